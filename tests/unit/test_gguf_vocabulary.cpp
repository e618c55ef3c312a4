// The tokenizer of a GGUF file's metadata read from the file (gguf_vocabulary.hpp
// read_gguf_vocabulary, Tokenizer::load of a .gguf): the keys llama.cpp reads, of the types its
// loader accepts (llama-vocab.cpp llama_vocab::impl::load, llama-model-loader.cpp get_key), and
// every other type or a missing key refused with one InputError naming the file and the key. The
// ids themselves are checked against llama.cpp by tests/e2e/gguf_tokenizer.sh and gguf_text.sh.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attntrace/io/gguf.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/gguf_vocabulary.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "gguf_builder.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using namespace attntrace::testing;

namespace {

std::string strings(const std::vector<std::string>& items) {
    std::string out = le(static_cast<std::uint32_t>(GgufType::string)) + le<std::uint64_t>(items.size());
    for (const std::string& s : items) out += gstr(s);
    return out;
}
template <class T>
std::string numbers(GgufType type, const std::vector<T>& items) {
    std::string out = le(static_cast<std::uint32_t>(type)) + le<std::uint64_t>(items.size());
    for (T x : items) out += le(x);
    return out;
}
std::string f32s(const std::vector<float>& items) {
    std::string out = le(static_cast<std::uint32_t>(GgufType::float32)) + le<std::uint64_t>(items.size());
    for (float x : items) out += f32(x);
    return out;
}

// A byte-level BPE vocabulary: h, i, the merge "h i", Ġ (a space) and an end-of-text token.
Builder gpt2() {
    Builder b;
    b.add("general.architecture", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.model", GgufType::string, gstr("gpt2"))
        .add("tokenizer.ggml.pre", GgufType::string, gstr("gpt-2"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"h", "i", "hi", "\xC4\xA0", "<|endoftext|>"}))
        .add("tokenizer.ggml.token_type", GgufType::array, numbers<std::int32_t>(GgufType::int32, {1, 1, 1, 1, 3}))
        .add("tokenizer.ggml.merges", GgufType::array, strings({"h i"}))
        .add("tokenizer.ggml.eos_token_id", GgufType::uint32, le<std::uint32_t>(4));
    return b;
}

// A SentencePiece vocabulary: <unk>, <s>, </s>, ▁h, i, ▁hi with scores.
Builder spm() {
    Builder b;
    b.add("general.architecture", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81h", "i", "\xE2\x96\x81hi"}))
        .add("tokenizer.ggml.scores", GgufType::array, f32s({0, 0, 0, -2, -3, -1}))
        .add("tokenizer.ggml.token_type", GgufType::array, numbers<std::int32_t>(GgufType::int32, {2, 3, 3, 1, 1, 1}));
    return b;
}

std::vector<std::uint32_t> ids_of(const Tokenizer& t, const std::string& text, bool special) {
    const Encoding e = t.encode(text, special, "--text");
    return {e.ids.begin(), e.ids.end()};
}

// The InputError of loading the tokenizer of B written as FILE.
std::string load_error(const std::string& file, const Builder& b) {
    write_file(file, b.bytes());
    return error_of<InputError>([&] { (void)Tokenizer::load(file); });
}

}  // namespace

TEST_CASE("gguf vocabulary: a file's tokenizer.ggml keys make the Tokenizer, BPE and SentencePiece") {
    TempDir dir;
    write_file(dir / "bpe.gguf", gpt2().bytes());
    const GgufVocabulary v = read_gguf_vocabulary(*GgufFiles::open(dir / "bpe.gguf"));
    CHECK(v.model == "gpt2");
    CHECK(v.pre == "gpt-2");
    CHECK(v.architecture == "llama");
    CHECK(v.tokens.size() == 5);
    CHECK(v.merges == std::vector<std::string>{"h i"});
    CHECK(v.eos_id == 4u);
    CHECK(!v.bos_id);
    CHECK(!v.add_bos_token);
    const Tokenizer bpe = Tokenizer::load(dir / "bpe.gguf");
    CHECK(ids_of(bpe, "hi hi", true) == std::vector<std::uint32_t>{2, 3, 2});
    CHECK(bpe.decode(std::vector<std::uint32_t>{2, 3, 2}) == "hi hi");

    write_file(dir / "spm.gguf", spm().add("tokenizer.ggml.add_eos_token", GgufType::boolean, std::string(1, '\1')).bytes());
    const Tokenizer sp = Tokenizer::load(dir / "spm.gguf");
    CHECK(ids_of(sp, "hi", true) == std::vector<std::uint32_t>{1, 5, 2});  // BOS (default for "llama"), ▁hi, EOS (add_eos_token)
    CHECK(ids_of(sp, "hi", false) == std::vector<std::uint32_t>{5});
}

TEST_CASE("gguf vocabulary: a missing key or one of another type is one InputError naming the file and the key") {
    TempDir dir;
    const std::string f = dir / "v.gguf";
    auto refused = [&](const Builder& b) { return load_error(f, b); };
    Builder none;
    none.add("general.architecture", GgufType::string, gstr("llama"));
    CHECK(refused(none) == f + ": no tokenizer.ggml.model: the file holds no tokenizer");
    Builder model_type;
    model_type.add("tokenizer.ggml.model", GgufType::uint32, le<std::uint32_t>(2));
    CHECK(refused(model_type) == f + ": tokenizer.ggml.model is of type uint32; llama.cpp reads it only as string");
    Builder bert;
    bert.add("tokenizer.ggml.model", GgufType::string, gstr("bert"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"a"}));
    CHECK(refused(bert) == f + ": tokenizer.ggml.model \"bert\" is not supported (supported: gpt2, llama)");
    Builder no_tokens;
    no_tokens.add("tokenizer.ggml.model", GgufType::string, gstr("llama"));
    CHECK(refused(no_tokens) == f + ": no tokenizer.ggml.tokens: the file's tokenizer has no vocabulary");
    Builder int_tokens;
    int_tokens.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, numbers<std::int32_t>(GgufType::int32, {1, 2}));
    CHECK(refused(int_tokens) == f + ": tokenizer.ggml.tokens is an array of int32, which llama.cpp does not read there");
    Builder no_merges;
    no_merges.add("tokenizer.ggml.model", GgufType::string, gstr("gpt2"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"a"}));
    CHECK(refused(no_merges) == f + ": no tokenizer.ggml.merges, which a \"gpt2\" tokenizer needs (llama.cpp refuses the file too)");
    CHECK(refused(gpt2().add("tokenizer.ggml.bos_token_id", GgufType::int32, le<std::int32_t>(4))) ==
          f + ": tokenizer.ggml.bos_token_id is of type int32; llama.cpp reads it only as uint32");
    CHECK(refused(gpt2().add("tokenizer.ggml.add_bos_token", GgufType::uint8, le<std::uint8_t>(1))) ==
          f + ": tokenizer.ggml.add_bos_token is of type uint8; llama.cpp reads it only as bool");
}

TEST_CASE("gguf vocabulary: arrays shorter than the tokens, or of a type llama.cpp does not read, are refused") {
    TempDir dir;
    const std::string f = dir / "v.gguf";
    auto refused = [&](const Builder& b) { return load_error(f, b); };
    Builder short_scores;
    short_scores.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>", "a", "b"}))
        .add("tokenizer.ggml.scores", GgufType::array, f32s({0, 0}));
    CHECK(refused(short_scores) == f + ": tokenizer.ggml.scores: 2 scores for 3 tokens");
    Builder short_types;
    short_types.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>", "a", "b"}))
        .add("tokenizer.ggml.token_type", GgufType::array, numbers<std::int32_t>(GgufType::int32, {2}));
    CHECK(refused(short_types) == f + ": tokenizer.ggml.token_type: 1 types for 3 tokens");
    Builder float64_scores;
    float64_scores.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>"}))
        .add("tokenizer.ggml.scores", GgufType::array, numbers<std::uint64_t>(GgufType::float64, {0}));
    CHECK(refused(float64_scores) == f + ": tokenizer.ggml.scores is an array of float64, which llama.cpp does not read there");
    Builder float_types;
    float_types.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>"}))
        .add("tokenizer.ggml.token_type", GgufType::array, f32s({1}));
    CHECK(refused(float_types) == f + ": tokenizer.ggml.token_type is an array of float32, which llama.cpp does not read there");
    Builder scalar_scores;
    scalar_scores.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>"}))
        .add("tokenizer.ggml.scores", GgufType::float32, f32(0));
    CHECK(refused(scalar_scores) == f + ": tokenizer.ggml.scores is of type float32; llama.cpp reads it only as array");
    // an array claiming more strings than the file holds is refused before anything is allocated
    Builder claims;
    claims.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, le(static_cast<std::uint32_t>(GgufType::string)) + le<std::uint64_t>(1ull << 40) + gstr("a"));
    const std::string claimed = refused(claims);
    CHECK(claimed.rfind(f + ": ", 0) == 0);
    CHECK(claimed.find("tokenizer.ggml.tokens") != std::string::npos);
    // int32 scores are llama.cpp's too (llama_vocab::impl::load: iscores)
    Builder int_scores;
    int_scores.add("tokenizer.ggml.model", GgufType::string, gstr("llama"))
        .add("tokenizer.ggml.tokens", GgufType::array, strings({"<unk>", "\xE2\x96\x81" "a"}))
        .add("tokenizer.ggml.scores", GgufType::array, numbers<std::int32_t>(GgufType::int32, {0, -1}));
    write_file(f, int_scores.bytes());
    CHECK(ids_of(Tokenizer::load(f), "a", false) == std::vector<std::uint32_t>{1});
}
