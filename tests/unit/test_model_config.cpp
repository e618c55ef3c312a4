// The whole-model configuration (model.hpp) of each family's fixture (tests/fixtures/models/full_*,
// tests/goldens/make_model_goldens.py records what each pins), RoBERTa's position ids, the ids a
// model refuses, and --layers' spec (layer_spec.hpp).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/model/layer_spec.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/errors.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using attntrace::testing::error_of;

namespace {

const std::string models = std::string(ATTNTRACE_FIXTURES) + "/models/";

}  // namespace

TEST_CASE("each family's fixture reads as transformers builds the model") {
    struct Want {
        const char* name;
        Residual residual;
        Mlp mlp;
        Embedding embedding;
        Activation act;
        bool tied, final_norm, has_head;
        std::size_t vocab, intermediate;
    };
    using enum Residual;
    const Want cases[] = {
        {"full_gpt2", pre_norm, Mlp::plain, Embedding::tokens_positions, Activation::gelu_tanh, true, true, true, 281, 128},
        {"full_gpt2_bf16", pre_norm, Mlp::plain, Embedding::tokens_positions, Activation::gelu_tanh, true, true, true, 281, 128},
        {"full_bert_mlm", post_norm, Mlp::plain, Embedding::bert, Activation::gelu, true, false, true, 108, 64},
        {"full_bert_base", post_norm, Mlp::plain, Embedding::bert, Activation::gelu_tanh, true, false, false, 108, 64},
        {"full_roberta", post_norm, Mlp::plain, Embedding::bert, Activation::gelu_tanh, true, false, true, 285, 64},
        {"full_llama", pre_norm, Mlp::gated, Embedding::tokens, Activation::silu, false, true, true, 282, 64},
        {"full_llama_tied", pre_norm, Mlp::gated, Embedding::tokens, Activation::silu, true, true, true, 282, 64},
        {"full_neox", parallel, Mlp::plain, Embedding::tokens, Activation::gelu, false, true, true, 282, 64},
        {"full_neox_seq", pre_norm, Mlp::plain, Embedding::tokens, Activation::gelu, false, true, true, 282, 64},
        {"full_bloom", pre_norm, Mlp::plain, Embedding::tokens_norm, Activation::bloom_gelu, true, true, true, 284, 144},
        {"full_bloom_post", post_layernorm, Mlp::plain, Embedding::tokens_norm, Activation::bloom_gelu, true, true, true, 284, 128},
    };
    for (const Want& w : cases) {
        INFO(w.name);
        const Model m = open_model(models + w.name);
        CHECK(m.config.residual == w.residual);
        CHECK(m.config.mlp == w.mlp);
        CHECK(m.config.embedding == w.embedding);
        CHECK(m.config.activation == w.act);
        CHECK(m.config.tied == w.tied);
        CHECK(m.config.final_norm == w.final_norm);
        CHECK(m.has_head() == w.has_head);
        CHECK(m.config.vocab == w.vocab);
        CHECK(m.config.intermediate == w.intermediate);
    }
    const Model roberta = open_model(models + "full_roberta");
    CHECK(roberta.config.head_activation == Activation::gelu);  // RobertaLMHead: exact gelu, whatever hidden_act says
    CHECK(roberta.config.position_offset == 2);
    CHECK(roberta.config.max_length == 12);  // max_position_embeddings 14 - padding_idx 1 - 1
    CHECK(open_model(models + "full_gpt2").config.max_length == 16);
    CHECK_FALSE(open_model(models + "full_llama").config.max_length.has_value());  // rotary: no table
    CHECK(open_model(models + "full_bert_base").head_missing.find("no masked-LM head") != std::string::npos);
}

TEST_CASE("Mistral's sliding_window: 4096 when config.json leaves it out, none when null") {
    nlohmann::json c = {{"model_type", "mistral"}, {"hidden_size", 32}, {"num_attention_heads", 4},
                        {"num_hidden_layers", 1}, {"intermediate_size", 64}, {"vocab_size", 10}};
    CHECK(read_model_config(c, "config.json").layers[0].window == 4096);
    c["sliding_window"] = nullptr;
    CHECK_FALSE(read_model_config(c, "config.json").layers[0].window.has_value());
    c["sliding_window"] = 3;
    CHECK(read_model_config(c, "config.json").layers[0].window == 3);
    c["hidden_act"] = "gelu_10";
    CHECK(error_of<InputError>([&] { read_model_config(c, "config.json"); }) ==
          "config.json: hidden_act 'gelu_10' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, quick_gelu, "
          "silu, swish, relu, tanh)");
}

TEST_CASE("RoBERTa's position ids count the tokens other than the pad from padding_idx + 1") {
    // transformers' create_position_ids_from_input_ids([0, 5, 6, 1, 7], padding_idx=1) = [2, 3, 4, 1, 5]
    CHECK(position_ids({0, 5, 6, 1, 7}, 2, 1u) == std::vector<std::size_t>{2, 3, 4, 1, 5});
    CHECK(position_ids({1, 1, 9}, 2, 1u) == std::vector<std::size_t>{1, 1, 2});
    CHECK(position_ids({4, 4, 4}, 0, std::nullopt) == std::vector<std::size_t>{0, 1, 2});  // GPT-2, BERT
}

TEST_CASE("check_ids refuses an empty sequence, an id past the vocabulary and too many positions") {
    const Model roberta = open_model(models + "full_roberta");
    const ModelConfig& c = roberta.config;
    CHECK(error_of<InputError>([&] { check_ids(c, {}, "--ids"); }) == "--ids: no tokens to run");
    CHECK(error_of<InputError>([&] { check_ids(c, {0, 285}, "--ids"); }) ==
          "--ids: id 285 (token 1) is past the vocabulary (ids 0 to 284)");
    const std::vector<std::uint32_t> twelve(12, 7), thirteen(13, 7);
    CHECK_NOTHROW(check_ids(c, twelve, "--ids"));
    CHECK(error_of<InputError>([&] { check_ids(c, thirteen, "--text"); }) ==
          "--text: 13 tokens but roberta positions allow at most 12 (positions start at padding_idx + 1 = 2)");
    std::vector<std::uint32_t> padded = twelve;
    padded.push_back(1);  // the pad keeps position padding_idx: 13 ids, 12 positions used
    CHECK_NOTHROW(check_ids(c, padded, "--ids"));
}

TEST_CASE("open_model names a missing tensor and a wrong shape in one line") {
    attntrace::testing::TempDir dir;
    std::filesystem::copy(models + "full_gpt2/config.json", dir / "config.json");
    std::filesystem::copy(models + "full_gpt2/model.safetensors", dir / "model.safetensors");
    nlohmann::json config = nlohmann::json::parse(attntrace::testing::read_file(dir / "config.json"));
    config["n_inner"] = 100;
    attntrace::testing::write_file(dir / "config.json", config.dump());
    CHECK(error_of<ShapeError>([&] { open_model(dir.path.string()); }) ==
          dir.path.string() + ": h.0.mlp.c_fc.weight has shape (32, 128) but config.json gives (E, I) = (32, 100)");
    config["n_inner"] = 128;
    config["tie_word_embeddings"] = false;
    attntrace::testing::write_file(dir / "config.json", config.dump());
    CHECK(open_model(dir.path.string()).head_missing ==
          dir.path.string() + ": missing tensor 'lm_head.weight' (V, E) (tie_word_embeddings is false)");
}

TEST_CASE("--layers: layers and ranges, all by default; a bad spec is a UsageError naming the layers") {
    CHECK(parse_layer_spec("", 3) == std::vector<bool>{true, true, true});
    CHECK(parse_layer_spec("all", 2) == std::vector<bool>{true, true});
    CHECK(parse_layer_spec("0-3,7", 9) == std::vector<bool>{true, true, true, true, false, false, false, true, false});
    CHECK(parse_layer_spec("2,0,2", 3) == std::vector<bool>{true, false, true});
    CHECK(kept_layers(parse_layer_spec("1-2,5", 6)) == std::vector<std::size_t>{1, 2, 5});
    CHECK(error_of<UsageError>([] { parse_layer_spec("3", 3); }) == "layers: layer 3 does not exist (the model has 3 layers, 0 to 2)");
    CHECK(error_of<UsageError>([] { parse_layer_spec("2-1", 3); }) == "layers: '2-1' has the range 2-1 backwards (e.g. 0-3,7)");
    for (const char* bad : {"x", "1,", ",1", "1-", "-1", "1--2", "1 ,2", "0x1"})
        CHECK(error_of<UsageError>([&] { parse_layer_spec(bad, 3); }).starts_with("layers: '" + std::string(bad) + "' is not a list"));
}
