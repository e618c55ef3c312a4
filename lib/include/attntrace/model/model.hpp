#pragma once
// A whole Hugging Face model: its config.json read for every layer and for what surrounds the
// layers (embeddings, the MLP, the residual wiring, the final norm, the LM head), and every tensor
// the forward pass reads found and shape-checked before any is read. What each family does is
// in its description (lib/model/family_<name>.cpp); forward.hpp runs the model.
//
//   model_type       embeddings                        block (residual wiring)             head
//   gpt2             wte + wpe                         pre-norm: x + attn(ln_1 x),         lm_head / tied wte
//                                                      then + mlp(ln_2 .)
//   bert, roberta    word + position + token type 0,   post-norm: LN(x + attn x),          MLM head (transform,
//                    LayerNorm (RoBERTa positions      then LN(. + mlp .)                  tied decoder, bias)
//                    from padding_idx + 1)
//   llama, mistral,  embed_tokens                      pre-norm, SwiGLU MLP                lm_head / tied
//   qwen2, qwen3
//   gpt_neox         embed_in                          parallel: x + attn(ln1 x) +         embed_out
//                                                      mlp(ln2 x), or pre-norm
//   bloom            word_embeddings, LayerNorm        pre-norm, or residuals from the     lm_head / tied
//                                                      normed input (post-layernorm)
//
// Legend: L sequence length, E hidden size, H heads, G kv heads, P head dim, I MLP (intermediate)
// size, V vocabulary, N layers.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/model/activations.hpp"
#include "attntrace/model/checkpoint.hpp"

namespace attntrace {

// How a block wires its norms and residuals around attention (attn) and the MLP (mlp).
enum class Residual : std::uint8_t {
    pre_norm,        // h = x + attn(norm1 x); out = h + mlp(norm2 h)    GPT-2, Llama-like, NeoX, BLOOM
    post_norm,       // h = norm1(x + attn x); out = norm2(h + mlp h)    BERT, RoBERTa
    parallel,        // out = x + attn(norm1 x) + mlp(norm2 x)           NeoX use_parallel_residual
    post_layernorm,  // a = norm1 x; h = norm2(a + attn a); out = h + mlp h
                     //                                                  BLOOM apply_residual_connection_post_layernorm
    sandwich,        // h = x + post1(attn(norm1 x)); out = h + post2(mlp(norm2 h)), norm1 / norm2 absent
                     // when the layer has none (OLMo 2)                 Gemma 2 and 3, OLMo 2
};

// A sparse mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): per token the router's
// softmax over X experts, the top K (renormalised to sum 1 when `normalize`), the token through each
// of its experts (gated MLPs of size I_x), summed with those weights; Qwen2-MoE adds a shared expert
// (size I_s) scaled by sigmoid(shared_expert_gate x). Layers where `sparse` is false have the dense MLP.
struct MoeConfig {
    std::size_t experts = 0;             // X
    std::size_t top_k = 0;               // K
    std::size_t intermediate = 0;        // I_x, each expert's
    std::size_t shared_intermediate = 0; // I_s, 0: no shared expert
    bool normalize = false;              // the top K weights divided by their sum
    std::vector<bool> sparse;            // (N) the layers with a MoE MLP
};

enum class Mlp : std::uint8_t {
    plain,  // fc_out(act(fc_in x))
    gated,  // fc_out(act(gate x) * fc_in x): SwiGLU (gate_proj, up_proj, down_proj)
};

enum class Embedding : std::uint8_t {
    tokens,            // token rows (Llama-like embed_tokens, NeoX embed_in)
    tokens_positions,  // token rows + position rows 0 .. L-1 (GPT-2 wte + wpe)
    bert,              // token + position + token type 0 rows, then LayerNorm (BERT, RoBERTa)
    tokens_norm,       // token rows, then LayerNorm (BLOOM word_embeddings_layernorm)
};

enum class Head : std::uint8_t {
    causal_lm,  // logits = x · Wᵀ, W (V, E) the head's own or the token embeddings
    masked_lm,  // BERT / RoBERTa: norm(act(dense x)) · Wᵀ + bias
};

// The whole model, from config.json (transformers' defaults for absent optional keys).
struct ModelConfig {
    std::string model_type;
    const Family* family = nullptr;
    std::vector<LayerConfig> layers;       // (N) each layer's attention: sizes, norm, positions
    std::size_t hidden = 0;                // E
    std::size_t heads = 0;                 // H
    std::size_t kv_heads = 0;              // G
    std::size_t head_dim = 0;              // P
    std::size_t intermediate = 0;          // I
    std::size_t vocab = 0;                 // V
    NormKind norm = NormKind::layer_norm;  // the block's, embeddings' and final norms
    double norm_eps = 1e-5;
    Activation activation = Activation::gelu;
    Mlp mlp = Mlp::plain;
    bool mlp_bias = true;
    Residual residual = Residual::pre_norm;
    Embedding embedding = Embedding::tokens;
    bool final_norm = true;                // a norm after the last block (ln_f, norm, final_layer_norm)
    Head head = Head::causal_lm;
    Activation head_activation = Activation::gelu;  // masked_lm's transform
    bool tied = false;                     // the head's W is the token embeddings
    bool scale_embeddings = false;         // Gemma: the token rows x sqrt(E), rounded to the embeddings' dtype
    double norm_offset = 0;                // Gemma's RMSNorm x * (1 + w): the norm weights read plus 1
    std::optional<double> final_softcap;   // Gemma 2/3: logits := tanh(logits / c) * c
    std::optional<MoeConfig> moe;          // a mixture of experts
    std::optional<std::size_t> max_length; // the longest sequence the position table holds
    std::size_t position_offset = 0;       // RoBERTa: positions count from padding_idx + 1
    std::size_t token_types = 0;           // BERT: type_vocab_size (every token is type 0)
    std::optional<std::uint32_t> padding_idx;  // RoBERTa: a pad token keeps position padding_idx
    std::optional<std::uint32_t> bos_token_id;
    std::optional<std::uint32_t> mask_token_id;  // none in config.json: from the tokenizer
    std::vector<std::uint32_t> special_ids;  // bos, eos, pad, unk, sep, cls token ids the config names
    nlohmann::json values;                 // the config values read, by key

    bool causal() const { return head == Head::causal_lm; }  // a decoder: predicts the next token
};

// Each tensor the forward reads, resolved (lib/model/model_tensors.hpp).
struct ModelTensors;

// An opened checkpoint folder: config read, every tensor of every layer, the embeddings and the
// final norm found and its shape checked; no tensor data read yet. The head's tensors are checked
// too; `head_missing` says why there is no head (a BERT saved without its MLM head, an untied
// lm_head.weight absent), empty when there is one.
struct Model {
    std::string dir;  // the folder or GGUF file
    ModelConfig config;
    std::string head_missing;
    std::shared_ptr<const ModelTensors> tensors;

    bool has_head() const { return head_missing.empty(); }
};

// How a float32 forward multiplies by a GGUF file's weights stored as q8_0, q4_0, q5_0, q4_1,
// q5_1, q4_K, q5_K or q6_K: `quantized` (the default) keeps them as their bytes in the file's
// mapping and runs llama.cpp's products (io/ggml_matmul.hpp: each activation row quantized to 8
// bits as ggml does, integer dot products); `float32` dequantizes each layer to float32 and runs
// sgemm (the exact reference). Other types, and float64 runs, are always dequantized. The app sets
// it from ATTNTRACE_GGUF_PRODUCTS (docs/gguf.md).
enum class GgufProducts : std::uint8_t { quantized, float32 };
void set_gguf_products(GgufProducts products);
GgufProducts gguf_products();

// Opens PATH: a checkpoint folder (config.json + model.safetensors or shards) or a GGUF file (the
// first of a split one). InputError naming the file for a bad config, "missing tensor 'NAME'
// (SHAPE)" for a missing tensor, ShapeError for a wrong shape.
Model open_model(const std::string& path);

// Reads the whole-model settings from CONFIG (SOURCE names the file in messages; KEY_NAMES as
// read_layer_config's).
ModelConfig read_model_config(const nlohmann::json& config, const std::string& source,
                              const std::map<std::string, std::string>* key_names = nullptr);

// "gpt2, 12 layers, 12 heads (12 kv heads) of 64, hidden 768, MLP 3072 gelu_new, vocabulary 50257"
std::string describe_model(const ModelConfig& config);

// RoBERTa's position ids (create_position_ids_from_input_ids): a token other than PADDING_IDX
// gets padding_idx + 1 + the count of non-pad tokens before it; a pad token gets padding_idx.
// Without PADDING_IDX, OFFSET + i.
std::vector<std::size_t> position_ids(const std::vector<std::uint32_t>& ids, std::size_t offset,
                                      std::optional<std::uint32_t> padding_idx);

// Refuses IDS the model cannot run (InputError naming WHAT, e.g. "--ids"): empty, an id past the
// vocabulary, longer than the position table allows.
void check_ids(const ModelConfig& config, const std::vector<std::uint32_t>& ids, const std::string& what);

}  // namespace attntrace
