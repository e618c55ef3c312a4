// BLOOM (transformers models/bloom/modeling_bloom.py, BloomAttention): LayerNorm
// input_layernorm, q/k/v fused per head in self_attention.query_key_value as NeoX's, no rotary but
// ALiBi slopes added to the scores (build_alibi_tensor), causal. Its config spells its sizes either
// way (n_embed / hidden_size, n_head / num_attention_heads, n_layer / num_hidden_layers).
#include "family.hpp"

namespace attntrace {

namespace {

class Bloom final : public Family {
public:
    Bloom() : Family("h.", " (fused query_key_value, per head)") {}

    std::vector<std::string_view> model_types() const override { return {"bloom"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        c.hidden = r.any_count({"hidden_size", "n_embed"});
        c.heads = c.kv_heads = r.any_count({"n_head", "num_attention_heads"});
        c.layers = r.any_count({"n_layer", "num_hidden_layers"});
        check_head_dim(r, c);
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.alibi = true;
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return fused_per_head_tensors(c, "self_attention.");
    }
};

}  // namespace

const Family& bloom_family() {
    static const Bloom family;
    return family;
}

}  // namespace attntrace
