// GPT-2 (transformers models/gpt2/modeling_gpt2.py, GPT2Attention and GPT2Block): LayerNorm ln_1,
// q/k/v in one Conv1D c_attn (E, 3E) stored (in, out), causal, the score scale switched by
// scale_attn_weights and divided by layer + 1 under scale_attn_by_inverse_layer_idx.
// The model (GPT2Model, GPT2LMHeadModel): wte + wpe (n_positions rows), pre-norm blocks with
// GPT2MLP (Conv1D c_fc (E, I), activation_function, Conv1D c_proj (I, E); I = n_inner or 4E),
// ln_f, lm_head tied to wte unless tie_word_embeddings is false.
#include <cmath>

#include "family.hpp"

namespace attntrace {

namespace {

class Gpt2 final : public Family {
public:
    Gpt2() : Family("h.", " (Conv1D c_attn, transposed)") {}

    std::vector<std::string_view> model_types() const override { return {"gpt2"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_mha_sizes(r, c, "n_embd", "n_head", "n_layer");
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.scale = r.flag("scale_attn_weights", true) ? 1.0 / std::sqrt(double(c.head_dim)) : 1.0;
        if (r.flag("scale_attn_by_inverse_layer_idx", false)) c.scale /= static_cast<double>(c.layer + 1);
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        using enum Canonical;
        const std::size_t e = c.hidden;
        std::vector<TensorSpec> s;
        add_norm(s, "ln_1", e, true);
        add_linear(s, {"attn.c_attn", {e, 3 * e}, "(E, 3E)", {w_q, w_k, w_v}, {b_q, b_k, b_v}, true, Stored::conv1d,
                       Fused::stacked});
        add_linear(s, {"attn.c_proj", {e, e}, "(E, E)", {w_o}, {b_o}, true, Stored::conv1d});
        return s;
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        m.vocab = r.count_or("vocab_size", 50257);
        m.intermediate = r.count_of({"n_inner"}).value_or(4 * m.hidden);
        m.activation = read_activation(r, "activation_function", "gelu_new");
        m.norm = NormKind::layer_norm;
        m.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        m.embedding = Embedding::tokens_positions;
        m.max_length = r.count_or("n_positions", 1024);
        m.tied = r.flag("tie_word_embeddings", true);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("wte.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding),
                table_spec("wpe.weight", *m.max_length, "(n_positions, E)", m.hidden, Canonical::position_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override {
        std::vector<TensorSpec> s;
        add_norm(s, "ln_2", m.hidden, true, Canonical::mlp_norm_weight, Canonical::mlp_norm_bias);
        add_mlp(s, "mlp.c_fc", "mlp.c_proj", m, true, Stored::conv1d);
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("ln_f", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }

    const GgufTable* gguf() const override { return &gguf_table; }

private:
    // llama.cpp's names (src/llama-arch.cpp LLM_ARCH_GPT2, src/models/gpt2.cpp); conversion/gpt2.py
    // writes the Conv1D weights transposed and feed_forward_length as 4 E; the output is
    // token_embd when there is no output.weight.
    inline static const GgufTable gguf_table{
        .architectures = {{"gpt2", "gpt2"}},
        .keys = {{"block_count", "n_layer"}, {"context_length", "n_positions"}, {"embedding_length", "n_embd"},
                 {"feed_forward_length", "n_inner"}, {"attention.head_count", "n_head"},
                 {"attention.layer_norm_epsilon", "layer_norm_epsilon"}},
        .tensors = {{"ln_1.weight", "attn_norm.weight"}, {"ln_1.bias", "attn_norm.bias"},
                    {"attn.c_attn.weight", "attn_qkv.weight", GgufLayout::transposed},
                    {"attn.c_attn.bias", "attn_qkv.bias"},
                    {"attn.c_proj.weight", "attn_output.weight", GgufLayout::transposed},
                    {"attn.c_proj.bias", "attn_output.bias"}, {"ln_2.weight", "ffn_norm.weight"},
                    {"ln_2.bias", "ffn_norm.bias"}, {"mlp.c_fc.weight", "ffn_up.weight", GgufLayout::transposed},
                    {"mlp.c_fc.bias", "ffn_up.bias"}, {"mlp.c_proj.weight", "ffn_down.weight", GgufLayout::transposed},
                    {"mlp.c_proj.bias", "ffn_down.bias"}, {"wte.weight", "token_embd.weight"},
                    {"wpe.weight", "position_embd.weight"}, {"ln_f.weight", "output_norm.weight"},
                    {"ln_f.bias", "output_norm.bias"}, {"lm_head.weight", "output.weight"}},
        .flags = {{"output.weight", "tie_word_embeddings", true}},
        .token_embedding = "token_embd.weight",
    };
};

}  // namespace

const Family& gpt2_family() {
    static const Gpt2 family;
    return family;
}

}  // namespace attntrace
