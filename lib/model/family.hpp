#pragma once
// A model family, described once: how its config.json reads, where its layer's tensors are and
// what shapes they have, and which of the core's canonical parameters each stored tensor feeds,
// the way llama.cpp has one build function per architecture, and in one table the names llama.cpp
// gives the same tensors and values in a GGUF file. Each family is one file,
// lib/model/family_<name>.cpp, and one line of the registry, families.cpp; resolve.cpp (where
// its tensors are in a source), checkpoint.cpp (one layer's attention) and model.cpp (the whole
// model) read any of them through this interface alone. Internal to lib/model.
//
// Legend: E hidden size, H heads, G kv heads, P head dim, I MLP size, V vocabulary, T position
// table rows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attntrace/model/checkpoint.hpp"
#include "attntrace/model/model.hpp"
#include "config_reader.hpp"

namespace attntrace {
class GgufFiles;
}

namespace attntrace {

// What a stored tensor feeds: the core's canonical parameters of a layer (LayerWeights,
// params.hpp), then the rest of the block (BlockWeights, model_tensors.hpp), then what surrounds
// the blocks (model_tensors.hpp).
enum class Canonical : std::uint8_t {
    w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm_weight, norm_bias, q_norm, k_norm,
    mlp_norm_weight, mlp_norm_bias,  // the norm whose output the MLP reads (BERT: after attention's residual)
    out_norm_weight, out_norm_bias,  // BERT's norm after the MLP's residual
    fc_in, fc_in_bias,               // the MLP's first linear (I, E): c_fc, dense_h_to_4h, up_proj
    fc_gate, fc_gate_bias,           // gated MLPs: gate_proj (I, E)
    fc_out, fc_out_bias,             // (E, I): c_proj, dense_4h_to_h, down_proj
    post_attention_norm_weight,      // the sandwich block's norm of the attention's output (Gemma 2, OLMo 2)
    post_mlp_norm_weight,            // ... and of the MLP's output (post_feedforward_layernorm)
    router,                          // a MoE layer's (X, E) gate
    expert_gate, expert_up, expert_down,  // expert j's (I_x, E), (I_x, E), (E, I_x): w1, w3, w2
    shared_gate, shared_up, shared_down,  // Qwen2-MoE's shared expert (I_s, E), (I_s, E), (E, I_s)
    shared_expert_gate,              // its (1, E) sigmoid gate
    token_embedding, position_embedding, token_type_embedding, embed_norm_weight, embed_norm_bias,
    final_norm_weight, final_norm_bias,
    head_dense, head_dense_bias, head_norm_weight, head_norm_bias,  // the MLM head's transform
    head_decoder, head_bias,         // the head's (V, E) and (V)
};

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
// (stacked with TensorSpec::split: parts of those row counts, e.g. Phi-3's qkv_proj [q (H*P);
// k (G*P); v (G*P)], or gate_up_proj [gate (I); up (I)].)

// One tensor a layer holds.
struct TensorSpec {
    std::string role;              // the name after the layer stem: "attn.c_attn.weight"
    Shape shape;                   // as stored, from the config
    std::string formula;           // "(E, 3E)"
    std::vector<Canonical> feeds;  // one parameter; q, k, v (or their biases) when fused
    Stored stored = Stored::linear;
    Fused fused = Fused::none;
    std::string alias{};           // another name the tensor may be saved under ("" none)
    std::vector<std::size_t> split{};  // stacked: each part's rows (empty: equal parts)
    double offset = 0;             // added to every value read (Gemma's norms: x * (1 + w))
    bool rotary_permuted = false;  // rows permuted per head for llama.cpp's rotary (a GGUF Llama's q, k:
                                   // GgufLayout::rotary), undone when read
};

// ---- a family's GGUF form -------------------------------------------------------------------

// How convert_hf_to_gguf.py writes a tensor, beyond its name.
enum class GgufLayout : std::uint8_t {
    as_is,
    transposed,  // a Conv1D weight written (out, in), a Linear's layout (conversion/gpt2.py)
    rotary,      // q or k rows permuted per head for llama.cpp's rotary (conversion/llama.py
                 // LlamaModel.permute: each head's (2, P/2) rows as (P/2, 2)), in the
                 // architectures whose rotary_permuted says so
    shifted,     // stored with TensorSpec::offset already added (conversion/gemma.py: Gemma's
                 // norms written as 1 + w)
};

// The names llama.cpp gives a family's tensors and metadata (src/llama-arch.cpp LLM_TENSOR_NAMES,
// LLM_KV_NAMES; gguf-py tensor_mapping.py), as one table: what a GGUF file of its architectures
// holds, read into the same description as its config.json and safetensors.
struct GgufTable {
    struct Architecture {
        std::string_view name;        // general.architecture: "qwen2"
        std::string_view model_type;  // the config.json model_type it reads as
        bool rotary_permuted = false; // its GgufLayout::rotary tensors are permuted (convert's llama)
    };
    struct Key {
        std::string_view key;     // after "<architecture>.": "attention.head_count"
        std::string_view config;  // config.json's key: "num_attention_heads"
    };
    struct Tensor {
        std::string_view role;  // the family's role: "self_attn.q_proj.weight", "embed_tokens.weight"
        std::string_view name;  // llama.cpp's: "attn_q.weight" (a layer's, after "blk.N."), "token_embd.weight"
        GgufLayout layout = GgufLayout::as_is;
        std::string_view only = "";  // the architectures it is for, space-separated ("": every one)
    };
    struct Flag {  // a config.json flag the file's tensors imply: KEY is whether TENSOR is there (or not, NEGATED)
        std::string_view tensor;  // "output.weight", "blk.0.attn_q.bias"
        std::string_view key;     // "tie_word_embeddings"
        bool negated = false;
    };
    std::vector<Architecture> architectures;
    std::vector<Key> keys;
    std::vector<Tensor> tensors;
    std::vector<Flag> flags;
    std::string_view token_embedding;  // its rows are vocab_size: "token_embd.weight"
    // llama.cpp's own rules that no key states (a hidden per-model default, a setting it ignores,
    // values stored as tensors), applied to CONFIG after the keys: null when none.
    void (*derive)(const GgufFiles& file, std::string_view architecture, nlohmann::json& config) = nullptr;

    // The entry of ROLE for ARCHITECTURE, or null.
    const Tensor* find(std::string_view role, std::string_view architecture) const {
        for (const Tensor& t : tensors)
            if (t.role == role && (t.only.empty() || names(t.only, architecture))) return &t;
        return nullptr;
    }
    // Whether the space-separated LIST holds WORD.
    static bool names(std::string_view list, std::string_view word) {
        for (std::size_t at = 0; at <= list.size();) {
            const std::size_t end = std::min(list.find(' ', at), list.size());
            if (list.substr(at, end - at) == word) return true;
            at = end + 1;
        }
        return false;
    }
    const Architecture* architecture(std::string_view name) const {
        for (const Architecture& a : architectures)
            if (a.name == name) return &a;
        return nullptr;
    }
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
    // The family's GGUF form, or null when llama.cpp has none for it.
    virtual const GgufTable* gguf() const { return nullptr; }

    // ---- the whole model (model.hpp) ----
    // What surrounds the layers, from the config: M's sizes (E, H, G, P) and layers are read.
    virtual void read_model(const ConfigReader& r, ModelConfig& m) const = 0;
    // The embeddings, after the model's prefix, the token embedding (V, E) first.
    virtual std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const = 0;
    // A layer's tensors besides attention_tensors, after its stem: the MLP and its norms.
    virtual std::vector<TensorSpec> block_tensors(const ModelConfig& m) const = 0;
    // Those of layer N, where they differ from layer to layer (a MoE layer's router and shared
    // expert, a dense layer's MLP): block_tensors by default. Never the experts themselves.
    virtual std::vector<TensorSpec> block_tensors_of(const ModelConfig& m, std::size_t layer) const {
        (void)layer;
        return block_tensors(m);
    }
    // Expert J of MoE layer N, after its stem: its gate, up and down linears (none by default).
    virtual std::vector<TensorSpec> expert_tensors(const ModelConfig& m, std::size_t layer, std::size_t expert) const {
        (void)m, (void)layer, (void)expert;
        return {};
    }
    // The final norm, after the model's prefix (none for BERT).
    virtual std::vector<TensorSpec> final_tensors(const ModelConfig& m) const = 0;
    // The head, by full name (it lives outside the base model: "lm_head.weight"), the decoder
    // (V, E) left out when tied; the first tensor tells whether a masked-LM head was saved.
    virtual std::vector<TensorSpec> head_tensors(const ModelConfig& m) const = 0;

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
const Family& gemma_family();  // gemma, gemma2, gemma3_text
const Family& phi3_family();
const Family& olmo2_family();
const Family& moe_family();    // mixtral, qwen2_moe, qwen3_moe, olmoe

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

// Appends a norm NAME: NAME.weight (E) feeding WEIGHT, and NAME.bias (E) feeding BIAS for a
// LayerNorm (WITH_BIAS).
void add_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t e, bool with_bias,
              Canonical weight = Canonical::norm_weight, Canonical bias = Canonical::norm_bias);

// Appends an RMSNorm NAME.weight of N values (FORMULA) feeding WHAT, read plus OFFSET (Gemma: 1).
void add_rms_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t n, const std::string& formula,
                  Canonical what, double offset);

// A gated MLP's three linears without biases: GATE (I, E) feeding GATE_ROLE, UP (I, E), DOWN (E, I),
// I = INTER ("(I, E)" spelt with I_NAME: "I", "I_x", "I_s").
struct GatedNames {
    std::string gate, up, down;
    Canonical gate_role = Canonical::fc_gate, up_role = Canonical::fc_in, down_role = Canonical::fc_out;
};
void add_gated_mlp(std::vector<TensorSpec>& specs, const GatedNames& names, std::size_t e, std::size_t inter,
                   const std::string& i_name);

// Llama's attention tensors (q/k/v/o_proj, GQA), after NORM ("" none: OLMo 2) read plus NORM_OFFSET,
// with biases per C; Qwen3's / Gemma 3's per-head q/k norms or OLMo's over the projection per C.
std::vector<TensorSpec> llama_attention_tensors(const LayerConfig& c, const std::string& norm);

// The rotary of Llama-like layers: rope_theta + rope_scaling / rope_parameters (DEFAULT_THETA when
// absent) on R = P * PARTIAL dims (LongRoPE included, for Phi-3).
Rotary read_llama_rotary(const ConfigReader& r, std::size_t head_dim, double default_theta, double partial = 1.0);

// Llama-like sizes: hidden_size, num_attention_heads, num_hidden_layers, num_key_value_heads (H when
// absent), head_dim (DEFAULT_HEAD_DIM, or E / H when that is 0).
void read_llama_sizes(const ConfigReader& r, LayerConfig& c, std::size_t default_head_dim = 0);

// The MLP's linears: NAME_IN (I, E) feeding fc_in, NAME_OUT (E, I) feeding fc_out, with biases
// when BIAS (Conv1D's (E, I) / (I, E) when STORED is conv1d).
void add_mlp(std::vector<TensorSpec>& specs, const std::string& name_in, const std::string& name_out,
             const ModelConfig& m, bool bias, Stored stored = Stored::linear);

// NeoX's and BLOOM's MLP: LayerNorm post_attention_layernorm, mlp.dense_h_to_4h (I, E) and
// mlp.dense_4h_to_h (E, I), with biases.
std::vector<TensorSpec> dense_4h_mlp_tensors(const ModelConfig& m);

// The final norm NAME (E), with NAME.bias for a LayerNorm (M.norm).
std::vector<TensorSpec> final_norm_tensors(const std::string& name, const ModelConfig& m);

// A causal LM's head NAME.weight (V, E); none when tied to the token embeddings.
std::vector<TensorSpec> lm_head_tensors(const std::string& name, const ModelConfig& m);

// The (V, E) token embedding (or another table) NAME feeding WHAT; ROWS rows, spelt FORMULA.
TensorSpec table_spec(const std::string& name, std::size_t rows, const std::string& formula, std::size_t e,
                      Canonical what);

// The activation named by config key KEY (FALLBACK when absent); an unknown name is an error.
Activation read_activation(const ConfigReader& r, const char* key, const char* fallback);

// The config's special token ids (bos, eos, pad, unk, sep, cls, mask *_token_id) into M, and
// bos_token_id / mask_token_id where present.
void read_special_ids(const ConfigReader& r, ModelConfig& m);

}  // namespace attntrace
