#pragma once
// A model family, described once: how its config.json reads, where its layer's tensors are and
// what shapes they have, and which of the core's canonical parameters each stored tensor feeds,
// the way llama.cpp has one build function per architecture. Each family is one file,
// lib/model/family_<name>.cpp, and one line of the registry, families.cpp; checkpoint.cpp reads
// any of them through this interface alone. Internal to lib/model.
//
// Legend: E hidden size, H heads, G kv heads, P head dim.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attntrace/model/checkpoint.hpp"
#include "config_reader.hpp"

namespace attntrace {

// The core's canonical parameters of a layer (LayerWeights, params.hpp).
enum class Canonical : std::uint8_t { w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm_weight, norm_bias, q_norm, k_norm };

// How a stored weight is laid out.
enum class Stored : std::uint8_t {
    linear,  // nn.Linear: weight (out, in), bias (out); a norm's (E)
    conv1d,  // GPT-2's Conv1D: weight (in, out), transposed into (out, in); bias (out)
};

// How a tensor that feeds q, k and v together splits along its out dim.
enum class Fused : std::uint8_t {
    none,
    stacked,   // [q; k; v], a third each (GPT-2's c_attn)
    per_head,  // per head [q_h; k_h; v_h], P each (NeoX's and BLOOM's query_key_value)
};

// One tensor a layer holds.
struct TensorSpec {
    std::string role;              // the name after the layer stem: "attn.c_attn.weight"
    Shape shape;                   // as stored, from the config
    std::string formula;           // "(E, 3E)"
    std::vector<Canonical> feeds;  // one parameter; q, k, v (or their biases) when fused
    Stored stored = Stored::linear;
    Fused fused = Fused::none;
};

class Family {
public:
    // STEM: what precedes a layer's number ("h.", "layers."); PROJECTIONS_NOTE: how the q/k/v
    // projections are stored, for the layer's plan (" (Conv1D c_attn, transposed)").
    explicit Family(std::string stem, std::string projections_note = "")
        : stem_(std::move(stem)), projections_note_(std::move(projections_note)) {}
    virtual ~Family() = default;
    // The model_type values of config.json this description reads ("llama", "mistral", ...).
    virtual std::vector<std::string_view> model_types() const = 0;
    // Layer C.layer's settings from the config: sizes, norm, scale, causal, window, rotary, ALiBi,
    // biases (C.model_type is set).
    virtual void read_layer(const ConfigReader& r, LayerConfig& c) const = 0;
    // What precedes a layer's roles after the model's prefix: "h.3.", "encoder.layer.3.".
    std::string layer_stem(std::size_t layer) const { return stem_ + std::to_string(layer) + "."; }
    // Layer C's attention tensors, its pre-attention norm included, the first one always present.
    virtual std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const = 0;
    const std::string& projections_note() const { return projections_note_; }

private:
    std::string stem_;
    std::string projections_note_;
};

// The registry (families.cpp): every family, in the order the error for an unknown model_type
// lists them.
const std::vector<const Family*>& families();

// The families, one accessor each (family_<name>.cpp).
const Family& gpt2_family();
const Family& bert_family();
const Family& llama_family();
const Family& gpt_neox_family();
const Family& bloom_family();

// ---- shared by the descriptions --------------------------------------------------------------

// P = E / H; E not a multiple of H is an error.
void check_head_dim(const ConfigReader& r, LayerConfig& c);

// E, H (each its own kv head), the layer count and P = E / H under the config's keys; E not a
// multiple of H is an error.
void read_mha_sizes(const ConfigReader& r, LayerConfig& c, const char* hidden, const char* heads, const char* layers);

// Appends a linear layer NAME: NAME.weight of SHAPE (FORMULA, "(out, in)", or "(in, out)" for
// conv1d) feeding WEIGHT, and when BIAS, NAME.bias (out) feeding BIAS_FEEDS; FUSED splits both.
struct LinearSpec {
    std::string name;
    Shape shape;
    std::string formula;
    std::vector<Canonical> weight, bias;  // what the weight and the bias feed
    bool has_bias = true;
    Stored stored = Stored::linear;
    Fused fused = Fused::none;
};
void add_linear(std::vector<TensorSpec>& specs, const LinearSpec& linear);

// NeoX's and BLOOM's attention tensors (BLOOM names its attention "self_attention.", NeoX
// "attention."): LayerNorm input_layernorm, query_key_value (3E, E) per head, dense (E, E).
std::vector<TensorSpec> fused_per_head_tensors(const LayerConfig& c, const std::string& attention);

// Appends a norm NAME: NAME.weight (E), and NAME.bias (E) for a LayerNorm (WITH_BIAS).
void add_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t e, bool with_bias);

}  // namespace attntrace
