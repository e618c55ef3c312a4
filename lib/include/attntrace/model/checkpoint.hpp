#pragma once
// Hugging Face checkpoints: a folder with config.json and model.safetensors (or the shards listed
// in model.safetensors.index.json). One layer's attention is read into the library's canonical
// parameters (params.hpp) together with what the family adds around the core (positions.hpp).
// Each family is described in one file, lib/model/family_<name>.cpp:
//
//   model_type       tensors of layer N (after the model's prefix)           positions, masks
//   gpt2             h.N.ln_1, h.N.attn.c_attn Conv1D (E, 3E), c_proj (E, E)  causal
//   bert, roberta    encoder.layer.N.attention.self.query/key/value,          none
//                    attention.output.dense
//   llama, mistral,  layers.N.input_layernorm, self_attn.q/k/v/o_proj (GQA),   rotary (rotate-half);
//   qwen2, qwen3     qwen2 q/k/v biases, qwen3 self_attn.q_norm / k_norm        causal, sliding window
//   gpt_neox         layers.N.input_layernorm, attention.query_key_value        partial rotary; causal
//                    (3E, E) interleaved per head [q_h; k_h; v_h], dense
//   bloom            h.N.input_layernorm, self_attention.query_key_value (as    ALiBi; causal
//                    NeoX), dense
//
// Only layer N's tensors are read: the files are memory-mapped and the other layers' pages are
// never touched. Every problem is an InputError (ShapeError for shapes) naming the file.
//
// Legend: E hidden size, H heads, G kv heads, P head dim, R rotary dims.
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/params.hpp"
#include "attntrace/io/ggml_matmul.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// A family's description: how its config.json reads and where its tensors are (lib/model/family.hpp).
class Family;

// "gpt2, bert, roberta, llama, mistral, qwen2, qwen3, gpt_neox, bloom"
std::string supported_model_types();

// What layer N of the model does, from config.json (transformers' defaults for absent optional keys).
struct LayerConfig {
    std::string model_type;   // as config.json spells it
    const Family* family = nullptr;  // its description
    std::size_t layer = 0;    // N
    std::size_t layers = 0;   // num_hidden_layers
    std::size_t hidden = 0;   // E
    std::size_t heads = 0;    // H
    std::size_t kv_heads = 0; // G
    std::size_t head_dim = 0; // P
    NormKind norm = NormKind::none;       // the pre-attention norm
    double norm_eps = 0;
    double scale = 0;                     // multiplies q·k
    bool causal = false;
    std::optional<std::size_t> window;    // this layer's sliding window
    std::optional<Rotary> rotary;         // R dims of each head, rotate-half
    bool alibi = false;                   // BLOOM
    bool qkv_bias = true;                 // the q/k/v projections have biases
    bool o_bias = true;                   // the output projection has one
    bool qk_norm = false;                 // Qwen3: RMSNorm over P of each q and k head
    bool qk_norm_whole = false;           // with qk_norm, OLMo 2 / OLMoE: over the whole projection (H*P, G*P)
    double norm_offset = 0;               // Gemma's RMSNorm: x * (1 + w), the weights read plus 1
    std::optional<double> softcap;        // Gemma 2: the scores soft-capped, tanh(s / c) * c, before the mask
    nlohmann::json values;                // the config values used, by config.json's key
};

// Reads layer N's settings from CONFIG (SOURCE names the file in messages; KEY_NAMES, when given,
// how the file spells config.json's keys: a GGUF file's metadata keys).
LayerConfig read_layer_config(const nlohmann::json& config, const std::string& source, std::size_t layer,
                              const std::map<std::string, std::string>* key_names = nullptr);

// "LayerNorm (eps 1e-05) -> q/k/v projections -> ... -> output projection": what the layer computes.
std::string describe_layer(const LayerConfig& config);

// One tensor of the checkpoint as stored.
struct StoredTensor {
    std::string role;   // the family's name without the layer prefix: "attn.c_attn.weight"
    std::string name;   // the full name in the file
    std::string file;   // the file holding it (.safetensors, .gguf)
    std::string dtype;  // "BF16" (safetensors), "q4_K" (GGUF)
    Shape shape;
};

// Where the tensors are stored: a checkpoint folder or a GGUF file (lib/model/model_source.hpp).
class ModelSource;

// A checkpoint folder or GGUF file opened for layer N: config read, names resolved, shapes
// checked against the config; no tensor data read yet.
struct CheckpointLayer {
    std::string dir;                         // the folder or file
    LayerConfig config;
    std::vector<StoredTensor> tensors;       // layer N's attention tensors (norm included)
    std::shared_ptr<ModelSource> files;
};

// PATH: a checkpoint folder or a .gguf file (the first of a split one).
CheckpointLayer open_checkpoint_layer(const std::string& path, std::size_t layer);

// Layer N's weights, converted to T and laid out canonically.
template <class T>
struct LayerWeights {
    MhaParams<T> attn;                         // w_q (H*P, E), w_k/w_v (G*P, E), w_o (E, H*P)
    std::optional<Array<T>> norm_weight;       // (E)
    std::optional<Array<T>> norm_bias;         // (E), LayerNorm only
    std::optional<Array<T>> q_norm, k_norm;    // (P), Qwen3; (H*P), (G*P) over the whole projection
    // (E, H*Pv) the output projection kept as a GGUF file's quantized bytes (a float32 whole model:
    // load_layer_weights IN_PLACE), which the forward multiplies by; attn.w_o_in_place has its shape only
    std::optional<QuantizedMatrix> w_o_quantized;
};

template <class T>
LayerWeights<T> load_layer_weights(const CheckpointLayer& layer);
// The same into W, reusing each of its arrays that already has the shape needed (a whole model
// reads every layer into the same arrays: no fresh pages to fault in and zero per layer). With
// IN_PLACE, a stacked in-projection (GPT-2's c_attn, Phi-3's qkv_proj) and the output projection
// that the file already holds as T are used where they lie (attn.in_proj, attn.w_o_in_place), not
// copied: they serve self-attention only, and their pages stay mapped until the caller releases
// the layer's tensors. So are, in float32, the projections a GGUF file holds quantized
// (ModelSource::quantized): q, k and v as attn.in_proj's product (when all of them are), the output
// projection as w_o_quantized.
template <class T>
void load_layer_weights(const CheckpointLayer& layer, LayerWeights<T>& w, bool in_place = false);

// The stages layer N adds around the core, pointing into WEIGHTS (which must outlive them):
// its pre-attention norm (none when INPUT_NORMED: the input is already normed), Qwen3's q/k
// norms, the rotary embedding, ALiBi slopes, causal mask and sliding window.
template <class T>
PositionStages<T> positions_for_layer(const LayerConfig& config, const LayerWeights<T>& weights, bool input_normed);

// `attntrace info` on a checkpoint folder or a .safetensors file: the layers, each layer's
// attention tensors with dtypes and shapes, and its plan ("  plan of layer N: " describe_layer;
// the app says how to run it). A lone .safetensors file: "(no config.json: a checkpoint is read
// from its folder)". One text block.
std::string checkpoint_info(const std::string& path);
// The same as one JSON object: path, model_type, layers, hidden, heads, kv_heads, head_dim, config,
// layer: [{index, tensors: [{name, dtype, shape, file}], model_plan}] (a lone .safetensors file:
// path and tensors only).
nlohmann::json checkpoint_info_json(const std::string& path);

// True when PATH is a folder holding config.json, or a .safetensors file.
bool is_checkpoint_path(const std::string& path);

// `attntrace info` on a GGUF file (the first of a split one): the format version, architecture,
// files and bytes, the sizes its metadata gives (layers, hidden, heads, kv_heads, head_dim,
// intermediate, context_length), each tensor type with its count (and whether attntrace reads
// it), the tokenizer (model, pre, tokens, merges, bos/eos ids); for an architecture attntrace
// runs, the model and each layer's plan, else why not ("not run"). One text block, or one JSON
// object: path, format, version, files, bytes, architecture, name, sizes, tensors,
// tensor_types [{type, tensors, parameters, bytes, read}], tokenizer, metadata_keys, model,
// layer [{index, model_plan}] (or model null and not_run).
std::string gguf_info(const std::string& path);
nlohmann::json gguf_info_json(const std::string& path);

}  // namespace attntrace
