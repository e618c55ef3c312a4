// Issue 36's families as their configuration classes complete config.json (transformers
// configuration_gemma2.py, configuration_gemma3.py, configuration_qwen2_moe.py,
// configuration_mixtral.py, configuration_phi3.py), the attention's soft-capping against its
// definition, and a mixture of experts' routing as the forward reports it.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/attention/attention.hpp"
#include "attntrace/model/forward.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/errors.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using attntrace::testing::error_of;
using json = nlohmann::json;

namespace {

json tiny(const char* type, std::size_t layers) {
    return {{"model_type", type}, {"hidden_size", 32}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"num_hidden_layers", layers}, {"intermediate_size", 64}, {"vocab_size", 10}, {"head_dim", 8}};
}

}  // namespace

TEST_CASE("Gemma 2: soft caps 50 and 30 when config.json leaves them out, none when null; even layers slide") {
    json c = tiny("gemma2", 3);
    ModelConfig m = read_model_config(c, "config.json");
    CHECK(m.layers[0].softcap == 50.0);
    CHECK(m.final_softcap == 30.0);
    CHECK(m.layers[0].window == 4096);
    CHECK_FALSE(m.layers[1].window.has_value());
    CHECK(m.layers[2].window == 4096);
    CHECK(m.layers[0].scale == doctest::Approx(1.0 / 16));  // query_pre_attn_scalar 256
    CHECK(m.residual == Residual::sandwich);
    CHECK(m.tied);
    CHECK(m.scale_embeddings);
    c["attn_logit_softcapping"] = nullptr, c["final_logit_softcapping"] = nullptr;
    m = read_model_config(c, "config.json");
    CHECK_FALSE(m.layers[0].softcap.has_value());
    CHECK_FALSE(m.final_softcap.has_value());
    c["use_bidirectional_attention"] = true;
    CHECK(error_of<InputError>([&] { read_model_config(c, "config.json"); }).find("use_bidirectional_attention") !=
          std::string::npos);
}

TEST_CASE("Gemma 3: every 6th layer global by default, local layers on rope_local_base_freq, no score cap") {
    json c = tiny("gemma3_text", 7);
    c["attn_logit_softcapping"] = 50.0;
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    const ModelConfig m = read_model_config(c, "config.json");
    for (std::size_t n = 0; n < 7; ++n) CHECK(m.layers[n].window.has_value() == (n != 5));
    CHECK_FALSE(m.layers[0].softcap.has_value());
    CHECK(m.layers[0].qk_norm);
    CHECK_FALSE(m.layers[0].qk_norm_whole);
    CHECK(m.layers[0].rotary->inv_freq[1] == doctest::Approx(std::pow(10000.0, -2.0 / 8)));  // local: not scaled
    CHECK(m.layers[5].rotary->inv_freq[1] == doctest::Approx(std::pow(1e6, -2.0 / 8) / 8));  // global: theta 1e6, x 1/8
    CHECK_FALSE(m.final_softcap.has_value());
}

TEST_CASE("the mixtures of experts: experts, top k, renormalisation, shared expert and dense layers") {
    json q = tiny("qwen2_moe", 4);
    q.update({{"num_experts", 6}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 16},
              {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}});
    const ModelConfig m = read_model_config(q, "config.json");
    REQUIRE(m.moe);
    CHECK(m.moe->sparse == std::vector<bool>{false, true, false, false});  // (n + 1) % 2, less mlp_only_layers
    CHECK(m.moe->shared_intermediate == 5632);
    CHECK_FALSE(m.moe->normalize);
    CHECK(m.layers[0].qkv_bias);
    CHECK_FALSE(m.layers[0].o_bias);
    json x = tiny("mixtral", 2);
    const ModelConfig mixtral = read_model_config(x, "config.json");
    CHECK(mixtral.moe->experts == 8);
    CHECK(mixtral.moe->top_k == 2);
    CHECK(mixtral.moe->normalize);
    CHECK(mixtral.moe->intermediate == 64);
    x["num_experts_per_tok"] = 9;
    CHECK(error_of<InputError>([&] { read_model_config(x, "config.json"); }).find("num_experts_per_tok 9") != std::string::npos);
    json o = tiny("olmoe", 1);
    o["clip_qkv"] = 8.0;
    CHECK(error_of<InputError>([&] { read_model_config(o, "config.json"); }).find("clip_qkv") != std::string::npos);
    json s = tiny("qwen3_moe", 1);
    s["use_sliding_window"] = true;
    CHECK(error_of<InputError>([&] { read_model_config(s, "config.json"); }).find("use_sliding_window") != std::string::npos);
}

TEST_CASE("Phi-3's LongRoPE: the attention factor from max / original, a factor list of the wrong length refused") {
    json c = tiny("phi3", 1);
    c.update({{"max_position_embeddings", 131072}, {"original_max_position_embeddings", 4096},
              {"rope_scaling", {{"type", "longrope"}, {"short_factor", {1, 1, 1, 1}}, {"long_factor", {2, 2, 2, 2}}}}});
    const Rotary r = *read_model_config(c, "config.json").layers[0].rotary;
    CHECK(r.attention_scaling == doctest::Approx(std::sqrt(1 + std::log(32.0) / std::log(4096.0))));
    CHECK(r.long_after == 4096);
    CHECK(r.long_inv_freq[1] == doctest::Approx(r.inv_freq[1] / 2));
    c["rope_scaling"]["long_factor"] = {2, 2};
    CHECK(error_of<InputError>([&] { read_model_config(c, "config.json"); }).find("longrope factors") != std::string::npos);
}

TEST_CASE("soft-capped scores: the weights are the softmax of tanh(s / c) * c, before the mask") {
    const std::size_t l = 5, p = 4;
    Array<double> q = Array<double>::from_shape({1, l, p}), k = Array<double>::from_shape({1, l, p});
    Array<double> v = Array<double>::from_shape({1, l, p});
    for (std::size_t i = 0; i < q.size(); ++i)
        q.data()[i] = std::sin(1.3 * i) * 3, k.data()[i] = std::cos(0.7 * i) * 3, v.data()[i] = 0.1 * i;
    AttentionOptions o;
    o.softcap = 1.5;
    o.need_weights = true;
    Masks<double> masks;
    masks.causal = true;
    const AttentionResult<double> r = sdpa(q, k, v, masks, o);
    CHECK(r.softcap == 1.5);
    for (std::size_t i = 0; i < l; ++i) {
        std::vector<double> e(i + 1);
        for (std::size_t j = 0; j <= i; ++j) {
            double s = 0;
            for (std::size_t d = 0; d < p; ++d) s += q.data()[i * p + d] * k.data()[j * p + d];
            e[j] = std::exp(std::tanh(s / 2 / 1.5) * 1.5);  // scale 1/sqrt(4)
        }
        const double sum = std::accumulate(e.begin(), e.end(), 0.0);
        for (std::size_t j = 0; j < l; ++j)
            CHECK((*r.weights).data()[i * l + j] == doctest::Approx(j <= i ? e[j] / sum : 0.0).epsilon(1e-12));
    }
    o.softcap = -1.0;
    CHECK(error_of<UsageError>([&] { sdpa(q, k, v, masks, o); }).find("softcap") != std::string::npos);
}

namespace {

struct Routes final : ModelObserver<double> {
    std::vector<LayerRouting> seen;
    void expert_routing(const LayerRouting& r) override { seen.push_back(r); }
};

}  // namespace

TEST_CASE("a MoE layer reports its routing: K experts per row, most weight first, renormalised") {
    const Model model = open_model(std::string(ATTNTRACE_FIXTURES) + "/models/full_mixtral");
    Routes routes;
    forward<double>(model, {3, 1, 4, 1, 5, 9, 2, 6}, ForwardOptions{}, routes);
    REQUIRE(routes.seen.size() == 2);
    for (const LayerRouting& r : routes.seen) {
        CHECK(r.rows == 8);
        CHECK(r.k == 2);
        CHECK(std::accumulate(r.tokens.begin(), r.tokens.end(), std::size_t{0}) == 16);
        for (std::size_t i = 0; i < r.rows; ++i) {
            CHECK(r.weights[i * 2] >= r.weights[i * 2 + 1]);
            CHECK(r.weights[i * 2] + r.weights[i * 2 + 1] == doctest::Approx(1.0).epsilon(1e-12));
            CHECK(r.chosen[i * 2] != r.chosen[i * 2 + 1]);
        }
    }
}

namespace {

// Keeps resid_pre, attn_out and mlp_out of every layer, and the hidden states.
struct Sites final : ModelObserver<double> {
    std::map<std::pair<Site, std::size_t>, std::vector<double>> kept;
    std::vector<std::vector<double>> hidden;
    bool wants_site(Site site, std::size_t) const override {
        return site == Site::resid_pre || site == Site::attn_out || site == Site::mlp_out;
    }
    void at_site(SiteValues<double>& v) override {
        kept[{v.site(), v.layer()}].assign(v.values().begin(), v.values().end());
    }
    void hidden_state(std::size_t index, const double* x, std::size_t rows, std::size_t e) override {
        if (hidden.size() <= index) hidden.resize(index + 1);
        hidden[index].assign(x, x + rows * e);
    }
};

}  // namespace

TEST_CASE("the sites of the new blocks: resid_pre + attn_out + mlp_out is the next layer's resid_pre") {
    // Gemma 2 and OLMo 2: attn_out and mlp_out after their post norms; Qwen2-MoE: mlp_out the
    // experts' sum with the shared expert (layer 1 dense); Phi-3: the fused gate_up MLP.
    for (const char* name : {"full_gemma2", "full_olmo2", "full_qwen2_moe", "full_phi3"}) {
        INFO(name);
        const Model model = open_model(std::string(ATTNTRACE_FIXTURES) + "/models/" + name);
        Sites sites;
        forward<double>(model, {3, 1, 4, 1, 5, 9, 2, 6}, ForwardOptions{}, sites);
        const std::size_t layers = model.config.layers.size();
        for (std::size_t n = 0; n + 1 < layers; ++n) {
            const auto& x = sites.kept[{Site::resid_pre, n}];
            const auto& a = sites.kept[{Site::attn_out, n}];
            const auto& m = sites.kept[{Site::mlp_out, n}];
            const auto& next = sites.kept[{Site::resid_pre, n + 1}];
            REQUIRE(x.size() == next.size());
            for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] + a[i] + m[i] == doctest::Approx(next[i]).epsilon(1e-12));
            CHECK(sites.hidden[n + 1] == next);
        }
    }
}
