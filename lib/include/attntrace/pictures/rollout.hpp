#pragma once
// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): how
// much each input token flows into each position through a stack of layers, counting the
// residual connection. Per layer l: A_l = mean over heads of W_l, plus the identity, rows
// renormalised to sum 1 (= 0.5 W + 0.5 I for softmax rows); rollout = A_n · ... · A_2 · A_1.
#include <string>
#include <vector>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// LAYERS[l]: layer l's weights, (B, H, L, L), (H, L, L) or (L, L), the first layer first; NAMES
// (one per layer) are used in messages. Every layer must have the same B and L. Returns (B, L, L)
// for 4-d layers, (L, L) otherwise.
template <class T>
Array<T> attention_rollout(const std::vector<Array<T>>& layers, const std::vector<std::string>& names);

}  // namespace attntrace
