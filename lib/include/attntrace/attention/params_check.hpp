#pragma once
// Checking attention parameters' shapes against the sizes they must agree with.
//
// Legend: Eq/Ek/Ev query/key/value input dims, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim.
#include "attntrace/attention/params.hpp"

namespace attntrace {

// Throws UsageError unless H >= 1, G >= 1 and G divides H ("kv heads: 8 query heads cannot share
// 3 kv heads (8 % 3 != 0)"); the messages name the parameters, the app adds its flags' names.
void check_head_counts(const MhaDims& dims);

// Checks the head counts and every shape against DIMS (w_q (H*P, Eq), w_k (G*P, Ek), w_v (G*Pv, Ev),
// w_o (PO, H*Pv), biases (rows,)) and returns the head sizes (throws UsageError / ShapeError
// "W_k.weight: shape (6, 5) but expected (6, 7) = (G*P, Ek) with G=2, P=3, Ek=7").
template <class T>
HeadSizes check_mha_params(const MhaParams<T>& params, const MhaDims& dims);

}  // namespace attntrace
