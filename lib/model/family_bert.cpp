// BERT and RoBERTa (transformers models/bert/modeling_bert.py, BertSelfAttention and
// BertSelfOutput; models/roberta/modeling_roberta.py copies them): separate query/key/value
// linears with biases, no mask of their own, and no norm before attention (the block is post-norm:
// attention.output.LayerNorm comes after the residual). Only absolute position embeddings.
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
};

}  // namespace

const Family& bert_family() {
    static const Bert family;
    return family;
}

}  // namespace attntrace
