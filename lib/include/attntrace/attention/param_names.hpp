#pragma once
// The naming schemes of attention parameters (torch, d2l/atcold, bloem; listed in params.hpp):
// dropping a name prefix, finding the scheme, mapping its names to MhaParams' fields (the names
// no scheme uses are kept as ignored), and what each field is called in messages.
#include <map>
#include <string>

#include "attntrace/attention/params.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// TENSORS (name in the file's spelling -> array of any shape, read from SOURCE) as MhaParams:
// keeps the names that start with PREFIX (stripped), picks the scheme and takes its tensors
// (torch's fused in_proj_weight (H*P + 2*G*P, E) split by DIMS' H and G); the output projection
// only when DIMS.out_proj. Throws InputError / ShapeError "SOURCE: ..."; shapes are checked only
// where a split needs them (check_mha_params in params_check.hpp checks the rest).
template <class T>
MhaParams<T> map_param_names(std::map<std::string, Array<T>> tensors, const std::string& source,
                             const std::string& prefix, const MhaDims& dims);

// What each field is called in messages, in the file's spelling: "W_k.weight",
// "in_proj_weight [6:12]" (a block of torch's fused tensors says which rows).
struct ParamLabels {
    std::string w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o;  // one per MhaParams field of that name
};

// The labels of P's fields under P's scheme (the random init is labelled with torch's names).
template <class T>
ParamLabels param_labels(const MhaParams<T>& p);

}  // namespace attntrace
