#pragma once
// The tensors of a whole model (model.hpp), resolved by name and shape-checked when it is opened,
// and read one block at a time as the forward pass reaches it: converted to T in parallel where
// large (safetensors.hpp), the file's pages dropped once read, so only the block being computed is
// held. The embedding tables and the LM head are never read whole: rows are gathered, and the head
// is read in blocks of rows. Internal to lib/model.
//
// Legend: L sequence length, E hidden size, I MLP size, V vocabulary.
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/model/checkpoint.hpp"
#include "attntrace/model/model.hpp"
#include "family.hpp"
#include "model_source.hpp"

namespace attntrace {

// One tensor the forward reads: what the family says of it (as its source stores it), and where
// it is stored.
struct ModelTensor {
    TensorSpec spec;
    StoredTensor stored;
};

struct ModelTensors {
    std::shared_ptr<ModelSource> files;           // where they are stored
    std::string prefix;                            // the base model's: "transformer.", "model.", "" (a checkpoint's)
    std::vector<ModelTensor> embeddings;
    std::vector<CheckpointLayer> attention;        // (N) each layer's attention, as mha --model reads it
    std::vector<std::vector<ModelTensor>> blocks;  // (N) the rest of each block
    // (N, X) a MoE layer's experts, each its gate, up and down (empty lists for a dense layer):
    // read only when a token chose the expert (moe.hpp), not by load_block
    std::vector<std::vector<std::vector<ModelTensor>>> experts;
    std::vector<ModelTensor> final_norm;
    std::vector<ModelTensor> head;                 // empty without a head

    // The tensor of LIST that feeds WHAT, or null.
    static const ModelTensor* find(const std::vector<ModelTensor>& list, Canonical what);
};

// ---- reading (model_tensors.cpp) ------------------------------------------------------------

// A linear layer: y = x · Wᵀ + b for W (out, in); GPT-2's Conv1D keeps W as stored, (in, out).
template <class T>
struct Linear {
    Array<T> w;                    // (out, in), or (in, out) with conv1d; empty when `in_file` holds W
    std::optional<Array<T>> b;     // (out)
    bool conv1d = false;           // W is (in, out)
    const T* in_file = nullptr;    // W read in place from the checkpoint (already T), of shape `shape`
    Shape shape;
    std::optional<QuantizedMatrix> quantized;  // (out, in) W as a GGUF file's quantized bytes, instead of w
    const T* weight() const { return in_file ? in_file : w.data(); }
    std::size_t out() const {
        return quantized ? quantized->rows : in_file ? shape[conv1d ? 1 : 0] : w.shape()[conv1d ? 1 : 0];
    }
    std::size_t in() const {
        return quantized ? quantized->cols : in_file ? shape[conv1d ? 0 : 1] : w.shape()[conv1d ? 0 : 1];
    }
};

// One block's weights in the compute type: its attention as mha --model runs it, and the rest.
template <class T>
struct BlockWeights {
    LayerWeights<T> attention;
    std::optional<Array<T>> mlp_norm_weight, mlp_norm_bias;  // (E)
    std::optional<Array<T>> out_norm_weight, out_norm_bias;  // (E), BERT
    std::optional<Array<T>> post_attention_norm, post_mlp_norm;  // (E), the sandwich block's
    Linear<T> fc_in;                                         // (I, E)
    std::optional<Linear<T>> gate;                           // (I, E), gated MLPs
    Linear<T> fc_out;                                        // (E, I)
    std::optional<Linear<T>> router;                         // (X, E), a MoE layer
    std::optional<Linear<T>> shared_gate, shared_up, shared_down;  // (I_s, E), (I_s, E), (E, I_s)
    std::optional<Linear<T>> shared_expert_gate;             // (1, E)
};

// SPEC's offset added to each of the values of SHAPE at DATA (Gemma's norms: 1 + w).
template <class T>
void add_offset(const TensorSpec& spec, T* data, const Shape& shape) {
    if (spec.offset == 0) return;
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(double(data[i]) + spec.offset);
}

// Layer N's block into W, each array of W reused when it has the shape needed (the previous
// layer's: its pages are present, so nothing is faulted in and zeroed again).
// A linear layer's weight already stored as T (a float32 checkpoint run in float32) is read in
// place from the file's pages, not copied: release_block drops them once the layer has run. So is
// one a float32 forward multiplies by as its quantized bytes (ModelSource::quantized: a GGUF
// file's q8_0 ... q6_K weights), the attention's projections included (LayerWeights).
template <class T>
void load_block(const ModelTensors& tensors, std::size_t layer, BlockWeights<T>& w);
void release_block(const ModelTensors& tensors, std::size_t layer);
// The bytes of block LAYER's weights that load_block puts in memory of the allocator's (copies of
// the file's float32 rows, conversions to T): 0 for those it reads in place from the file's
// mapping, and for a GGUF file's (mapped, or small).
template <class T>
std::size_t block_copy_bytes(const ModelTensors& tensors, std::size_t layer);

// A small tensor (a norm's weight) of LIST feeding WHAT, or nullopt when the list has none.
template <class T>
std::optional<Array<T>> load_small(const ModelTensors& tensors, const std::vector<ModelTensor>& list, Canonical what);

// Rows ROWS of TABLE (a (rows, E) table) into OUT (ROWS.size(), E).
template <class T>
void gather_rows(const ModelTensors& tensors, const ModelTensor& table, const std::vector<std::size_t>& rows, T* out);

}  // namespace attntrace
