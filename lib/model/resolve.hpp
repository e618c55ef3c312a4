#pragma once
// A family's tensors found in a source (model_source.hpp), each shape-checked against the
// configuration before anything is read: where they sit and as what they are stored.
//
//   a checkpoint folder:  PREFIX + the family's stem + role    "model." "layers.3." "self_attn.q_proj.weight"
//                         (the prefix found once, before the first tensor the family expects;
//                         the head by its full name, "lm_head.weight")
//   a GGUF file:          the family's GGUF table (GgufTable)  "blk.3." "attn_q.weight"; "output.weight"
//                         with convert_hf_to_gguf.py's layouts: GPT-2's Conv1D weights stored
//                         (out, in), a Llama's q/k rows permuted for llama.cpp's rotary
//
// Internal to lib/model.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/model/checkpoint.hpp"
#include "family.hpp"
#include "model_tensors.hpp"
#include "model_source.hpp"

namespace attntrace {

// Where a family's tensors sit in one source.
struct TensorNaming {
    const Family* family = nullptr;
    std::string prefix;               // a checkpoint's: what precedes the family's names ("model.", "")
    const GgufTable* gguf = nullptr;  // a GGUF file's: the family's table
};

// The model's prefix ("transformer.", "model.", "" ...): what comes before TAIL in NAMES.
std::optional<std::string> find_prefix(const std::map<std::string, std::string>& names, const std::string& tail);

// How SOURCE names FAMILY's tensors: its GGUF table, or the prefix found before TAIL (nullopt
// when no name ends with it). InputError when FAMILY has no GGUF form.
std::optional<TensorNaming> naming_for(ModelSource& source, const Family& family, const std::string& tail);

// SPEC, a tensor of layer LAYER (nullopt: one outside the layers; a head's by its full name when
// HEAD), found in SOURCE and its shape checked: InputError "PATH: missing tensor 'NAME' FORMULA",
// ShapeError for another shape. The spec returned is as the source stores it.
ModelTensor resolve_tensor(ModelSource& source, const TensorNaming& naming, const TensorSpec& spec,
                           std::optional<std::size_t> layer, bool head = false);

// Layer C.layer's attention tensors in SOURCE.
CheckpointLayer resolve_layer(std::shared_ptr<ModelSource> source, const LayerConfig& c);

// Every tensor model M's forward reads, in SOURCE; the head's, or why there is none (HEAD_MISSING).
std::shared_ptr<const ModelTensors> resolve_model(std::shared_ptr<ModelSource> source, const ModelConfig& m,
                                                  std::string& head_missing);

// SPEC as SOURCE stores it: in a GGUF file, with the layout the family's table gives it
// (GPT-2's Conv1D transposed into a Linear's (out, in); a Llama's q/k rows rotary_permuted).
TensorSpec as_stored(const ModelSource& source, const Family& family, TensorSpec spec);

}  // namespace attntrace
