// BERT and RoBERTa (transformers models/bert/modeling_bert.py, BertSelfAttention and
// BertSelfOutput; models/roberta/modeling_roberta.py copies them): separate query/key/value
// linears with biases, no mask of their own, and no norm before attention (the block is post-norm:
// attention.output.LayerNorm comes after the residual). Only absolute position embeddings.
// The model (BertModel / RobertaModel, *ForMaskedLM): word + token type 0 + position embeddings
// (RoBERTa's positions from padding_idx + 1, create_position_ids_from_input_ids), LayerNorm;
// post-norm blocks (BertIntermediate dense + hidden_act, BertOutput dense, LayerNorm); no final
// norm; the MLM head when saved: BERT cls.predictions (transform dense, hidden_act, LayerNorm,
// decoder tied to the word embeddings, bias), RoBERTa lm_head (dense, exact gelu whatever
// hidden_act says, layer_norm, decoder, bias).
#include "family.hpp"

namespace attntrace {

namespace {

class Bert final : public Family {
public:
    Bert() : Family("encoder.layer.") {}

    std::vector<std::string_view> model_types() const override { return {"bert", "roberta"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_mha_sizes(r, c, "hidden_size", "num_attention_heads", "num_hidden_layers");
        const nlohmann::json* pos = r.find("position_embedding_type");
        if (pos && *pos != "absolute")
            config_error(r.source, "position_embedding_type " + pos->dump() + " is not supported (absolute)");
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        using enum Canonical;
        const std::size_t e = c.hidden;
        std::vector<TensorSpec> s;
        add_linear(s, {"attention.self.query", {e, e}, "(E, E)", {w_q}, {b_q}});
        add_linear(s, {"attention.self.key", {e, e}, "(E, E)", {w_k}, {b_k}});
        add_linear(s, {"attention.self.value", {e, e}, "(E, E)", {w_v}, {b_v}});
        add_linear(s, {"attention.output.dense", {e, e}, "(E, E)", {w_o}, {b_o}});
        return s;
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        const bool roberta = m.model_type == "roberta";
        m.vocab = r.count_or("vocab_size", roberta ? 50265 : 30522);
        m.intermediate = r.count_or("intermediate_size", 3072);
        m.activation = read_activation(r, "hidden_act", "gelu");
        m.head = Head::masked_lm;
        m.head_activation = roberta ? Activation::gelu : m.activation;  // RobertaLMHead: gelu, always
        m.norm_eps = r.number("layer_norm_eps", 1e-12);
        m.residual = Residual::post_norm;
        m.embedding = Embedding::bert;
        m.final_norm = false;
        m.tied = r.flag("tie_word_embeddings", true);
        const std::size_t table = r.count_or("max_position_embeddings", 512);
        m.max_length = table;
        m.token_types = r.count_or("type_vocab_size", 2);
        if (!roberta) return;
        const std::size_t pad = r.index("pad_token_id").value_or(1);
        if (table <= pad + 1) config_error(r.source, "max_position_embeddings " + std::to_string(table) +
                                                         " leaves no position after padding_idx + 1 = " + std::to_string(pad + 1));
        m.padding_idx = static_cast<std::uint32_t>(pad);
        m.position_offset = pad + 1;
        m.max_length = table - pad - 1;
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        std::vector<TensorSpec> s{
            table_spec("embeddings.word_embeddings.weight", m.vocab, "(V, E)", m.hidden, token_embedding),
            table_spec("embeddings.position_embeddings.weight", *m.max_length + m.position_offset,
                       "(max_position_embeddings, E)", m.hidden, position_embedding),
            table_spec("embeddings.token_type_embeddings.weight", m.token_types, "(type_vocab_size, E)", m.hidden,
                       token_type_embedding)};
        add_norm(s, "embeddings.LayerNorm", m.hidden, true, embed_norm_weight, embed_norm_bias);
        return s;
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        std::vector<TensorSpec> s;
        add_norm(s, "attention.output.LayerNorm", m.hidden, true, mlp_norm_weight, mlp_norm_bias);
        add_mlp(s, "intermediate.dense", "output.dense", m, true);
        add_norm(s, "output.LayerNorm", m.hidden, true, out_norm_weight, out_norm_bias);
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig&) const override { return {}; }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        const bool roberta = m.model_type == "roberta";
        const std::string head = roberta ? "lm_head." : "cls.predictions.";
        const std::size_t e = m.hidden;
        std::vector<TensorSpec> s;
        add_linear(s, {head + (roberta ? "dense" : "transform.dense"), {e, e}, "(E, E)", {head_dense}, {head_dense_bias}});
        add_norm(s, head + (roberta ? "layer_norm" : "transform.LayerNorm"), e, true, head_norm_weight, head_norm_bias);
        s.push_back({head + "bias", {m.vocab}, "(V)", {head_bias}, Stored::linear, Fused::none, head + "decoder.bias"});
        if (!m.tied) s.push_back(table_spec(head + "decoder.weight", m.vocab, "(V, E)", e, head_decoder));
        return s;
    }
};

}  // namespace

const Family& bert_family() {
    static const Bert family;
    return family;
}

}  // namespace attntrace
