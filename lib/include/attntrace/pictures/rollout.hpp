#pragma once
// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): how
// much each input token flows into each position through a stack of layers, counting the
// residual connection. Per layer l: A_l = mean over heads of W_l, plus the identity, rows
// renormalised to sum 1 (= 0.5 W + 0.5 I for softmax rows); rollout = A_n · ... · A_2 · A_1.
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// LAYERS[l]: layer l's weights, (B, H, L, L), (H, L, L) or (L, L), the first layer first; NAMES
// (one per layer) are used in messages. Every layer must have the same B and L. Returns (B, L, L)
// for 4-d layers, (L, L) otherwise.
template <class T>
Array<T> attention_rollout(const std::vector<Array<T>>& layers, const std::vector<std::string>& names);

// The same rollout built one layer at a time from weights that arrive in blocks (a whole model's
// forward hands each layer's (H, L, L) weights over in blocks of rows, from its worker threads,
// and keeps none): each layer's mean over heads is summed as the blocks come, then finish_layer()
// adds the residual, renormalises and multiplies it in. Holds three (L, L) arrays.
template <class T>
class RolloutBuilder {
public:
    RolloutBuilder(std::size_t heads, std::size_t length);
    // COUNT weights of the current layer's (H, L, L) from element FIRST on; from any thread.
    void add(std::size_t first, const T* weights, std::size_t count);
    // Every block of the current layer has been added.
    void finish_layer();
    std::size_t layers() const { return layers_; }
    // (L, L) the rollout of the layers finished so far; UsageError before any.
    const Array<T>& rollout() const;

private:
    std::size_t heads_, l_, layers_ = 0;
    Array<T> mean_, rollout_, next_;                 // (L, L) each
    std::unique_ptr<std::mutex[]> locks_;            // striped over the query rows
};

}  // namespace attntrace
