// checkpoint.hpp against the tiny Hugging Face checkpoints of tests/fixtures/models (written by
// tests/goldens/make_checkpoint_goldens.py, whose cases.json records what transformers' code
// takes from each config: heads, scale, window, rotary frequencies, ALiBi slopes, norms).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/model/checkpoint.hpp"
#include "attntrace/tensor/errors.hpp"

using nlohmann::json;

namespace {

const std::string models = std::string(ATTNTRACE_FIXTURES) + "/models/";

json read_json(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void check_close(const std::vector<double>& got, const json& expected, const std::string& what) {
    REQUIRE_MESSAGE(got.size() == expected.size(), what);
    for (std::size_t i = 0; i < got.size(); ++i)
        CHECK_MESSAGE(std::abs(got[i] - expected[i].get<double>()) <= 1e-12 * std::abs(expected[i].get<double>()), what << "[" << i << "]");
}

void check_semantics(const attntrace::LayerConfig& c, const json& s, const std::string& name) {
    INFO(name);
    CHECK(c.heads == s["heads"]);
    CHECK(c.kv_heads == s["kv_heads"]);
    CHECK(c.head_dim == s["head_dim"]);
    CHECK(std::abs(c.scale - s["scale"].get<double>()) < 1e-15);
    CHECK(c.causal == s["causal"]);
    CHECK(c.window.has_value() == !s["window"].is_null());
    if (c.window) CHECK(*c.window == s["window"]);
    CHECK(c.alibi == s["alibi"]);
    CHECK(c.qk_norm == s["qk_norm"]);
    CHECK(c.qk_norm_whole == s.value("qk_norm_whole", false));
    CHECK(c.norm_offset == s.value("norm_offset", 0.0));
    CHECK(c.softcap.has_value() == !s.value("softcap", json()).is_null());
    if (c.softcap) CHECK(*c.softcap == s["softcap"].get<double>());
    CHECK(c.rotary.has_value() == !s["rotary"].is_null());
    if (c.rotary) {
        CHECK(c.rotary->dims == s["rotary_dims"]);
        check_close(c.rotary->inv_freq, s["inv_freq"], name + " inv_freq");
        check_close(c.rotary->long_inv_freq, s.value("long_inv_freq", json::array()), name + " long_inv_freq");
        CHECK(std::abs(c.rotary->attention_scaling - s.value("attention_scaling", 1.0)) < 1e-15);
        CHECK(c.rotary->long_after == s.value("long_after", std::size_t{0}));
    }
    if (c.alibi) check_close(attntrace::alibi_slopes(c.heads), s["alibi_slopes"], name + " slopes");
    const json norm = c.norm == attntrace::NormKind::none ? json() : json(c.norm == attntrace::NormKind::rms_norm ? "rms_norm" : "layer_norm");
    CHECK(norm == s["norm"]);
    if (!s["norm_eps"].is_null()) CHECK(c.norm_eps == s["norm_eps"].get<double>());
}

}  // namespace

TEST_CASE("every family's config and layer tensors resolve as transformers reads them") {
    const json cases = read_json(models + "cases.json")["cases"];
    REQUIRE(cases.size() >= 9);
    for (const json& c : cases) {
        const auto layer = attntrace::open_checkpoint_layer(models + c["model"].get<std::string>(), c["layer"]);
        check_semantics(layer.config, c["semantics"], c["name"]);
        const std::string prefix = c["tensor_prefix"];
        for (const auto& t : layer.tensors) CHECK_MESSAGE(t.name.rfind(prefix, 0) == 0, t.name << " vs " << prefix);
        const auto w = attntrace::load_layer_weights<double>(layer);
        const std::size_t e = layer.config.hidden, p = layer.config.head_dim;
        CHECK(w.attn.w_q.shape() == attntrace::Shape{layer.config.heads * p, e});
        CHECK(w.attn.w_k.shape() == attntrace::Shape{layer.config.kv_heads * p, e});
        CHECK(w.attn.w_o->shape() == attntrace::Shape{e, layer.config.heads * p});
        CHECK(w.norm_weight.has_value() == (layer.config.norm != attntrace::NormKind::none));
    }
}

TEST_CASE("bad checkpoints: one InputError naming what is wrong") {
    for (const json& c : read_json(models + "bad/cases.json")) {
        const std::string dir = models + c["model"].get<std::string>();
        try {
            const auto layer = attntrace::open_checkpoint_layer(dir, c["layer"]);
            attntrace::load_layer_weights<float>(layer);
            FAIL("no error for " << c["name"]);
        } catch (const attntrace::InputError& e) {
            const std::string what = e.what();
            CHECK_MESSAGE(what.find(c["error_contains"].get<std::string>()) != std::string::npos, c["name"] << ": " << what);
            CHECK(what.find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("an unknown model_type lists the supported ones") {
    const json config{{"model_type", "t5"}};
    CHECK_THROWS_WITH_AS(attntrace::read_layer_config(config, "config.json", 0),
                         "config.json: model_type 't5' is not supported (supported: gpt2, bert, roberta, llama, "
                         "mistral, qwen2, qwen3, gpt_neox, bloom, gemma, gemma2, gemma3_text, phi3, olmo2, mixtral, "
                         "qwen2_moe, qwen3_moe, olmoe)",
                         attntrace::InputError);
}

TEST_CASE("rope_parameters (new style) is read like rope_theta + rope_scaling") {
    const json old_style{{"model_type", "llama"}, {"hidden_size", 32}, {"num_attention_heads", 4},
                         {"num_hidden_layers", 2}, {"rope_theta", 500000.0},
                         {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}};
    json new_style = old_style;
    new_style.erase("rope_theta");
    new_style.erase("rope_scaling");
    new_style["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 500000.0}};
    const auto a = attntrace::read_layer_config(old_style, "old", 1);
    const auto b = attntrace::read_layer_config(new_style, "new", 1);
    REQUIRE(a.rotary);
    REQUIRE(b.rotary);
    CHECK(a.rotary->inv_freq == b.rotary->inv_freq);
    CHECK(a.rotary->inv_freq[0] == 0.25);
}

TEST_CASE("the checkpoint text gives each layer's plan; a lone .safetensors file says a checkpoint is a folder") {
    const std::string text = attntrace::checkpoint_info(models + "mistral");
    for (std::size_t n = 0; n < 3; ++n) {
        const auto layer = attntrace::open_checkpoint_layer(models + "mistral", n);
        const std::string line = "  plan of layer " + std::to_string(n) + ": " + attntrace::describe_layer(layer.config) + "\n";
        CHECK_MESSAGE(text.find(line) != std::string::npos, line);
    }
    const std::string shard = models + "mistral/model-00001-of-00002.safetensors";
    CHECK(attntrace::checkpoint_info(shard).rfind(shard + ": safetensors, ", 0) == 0);
    CHECK(attntrace::checkpoint_info(shard).find(" tensors (no config.json: a checkpoint is read from its folder)\n") !=
          std::string::npos);
}
