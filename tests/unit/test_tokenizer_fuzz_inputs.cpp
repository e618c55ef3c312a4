// Inputs the fuzzers (tests/fuzz/fuzz_tokenizer_*.cpp) once crashed on, kept in
// tests/fixtures/tokenizers/fuzz/{json,text}/: each must now be handled as the fuzzers require,
// a tokenizer or an InputError for a tokenizer.json, an encoding that keeps its invariants for a text.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "test_helpers.hpp"

namespace {

namespace fs = std::filesystem;
using attntrace::Tokenizer;
using attntrace::testing::read_file;

const fs::path kFuzz = fs::path(ATTNTRACE_FIXTURES) / "tokenizers" / "fuzz";

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file()) out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    return out;
}

// The ids are in range and the offsets are byte spans of TEXT.
void check_encoding(const Tokenizer& t, const attntrace::Encoding& e, std::string_view text) {
    REQUIRE(e.ids.size() == e.offsets.size());
    for (std::size_t i = 0; i < e.ids.size(); ++i) {
        CHECK(e.ids[i] < t.vocab_size());
        CHECK(e.offsets[i].first <= e.offsets[i].second);
        CHECK(e.offsets[i].second <= text.size());
    }
}

}  // namespace

TEST_CASE("every tokenizer.json the fuzzer once crashed on is a tokenizer or an InputError") {
    const std::vector<fs::path> inputs = files_in(kFuzz / "json");
    CHECK(inputs.size() >= 2);
    for (const fs::path& path : inputs) {
        INFO(path.filename().string());
        try {
            const Tokenizer t = Tokenizer::from_json(read_file(path), path.filename().string());
            for (const std::string_view text : {"Hello world", "  don't  stop\t\n", "Café 我想 🚀 1234", "<s> [CLS] <|endoftext|> a"}) {
                const attntrace::Encoding e = t.encode(text, true, "text");
                check_encoding(t, e, text);
                CHECK_NOTHROW((void)t.decode(e.ids));
            }
        } catch (const attntrace::InputError& e) {
            CHECK(std::string(e.what()).rfind(path.filename().string() + ": ", 0) == 0);  // names the file
        }
    }
}

TEST_CASE("every text the fuzzer once crashed on encodes through GPT-2, BERT and Mistral, GPT-2 losslessly") {
    attntrace::testing::TempDir dir;
    std::vector<Tokenizer> tokenizers;
    for (const char* name : {"gpt2", "bert-base-uncased", "mistral-prepend"}) {
        const std::string json = dir / (std::string(name) + ".json");
        const fs::path xz = kFuzz.parent_path() / name / "tokenizer.json.xz";
        REQUIRE(std::system(("xz -dc '" + xz.string() + "' > '" + json + "'").c_str()) == 0);
        tokenizers.push_back(Tokenizer::load(json));  // no tokenizer_config.json: decode does no clean-up
    }
    for (const fs::path& path : files_in(kFuzz / "text")) {
        INFO(path.filename().string());
        const std::string text = read_file(path);
        for (std::size_t k = 0; k < tokenizers.size(); ++k) {
            const attntrace::Encoding e = tokenizers[k].encode(text, true, "text");
            check_encoding(tokenizers[k], e, text);
            const std::string back = tokenizers[k].decode(e.ids);
            if (k == 0) CHECK(back == text);
        }
    }
}

TEST_CASE("a long text tokenized by the model's two workers at once gives the ids and offsets of one") {
    attntrace::testing::TempDir dir;
    // ~400 KB: words of several scripts, numbers, spaces and newlines, then every fuzz text; a text
    // of 64 KB and more is cut in two halves, the second one tokenized by a second worker
    std::string text;
    const char* words[] = {"Hello", " world", ",", "  Café", " 我想", "🚀", "\n\n", " naïve", " Ελληνικά", " don't", "\t", " Привет"};
    for (std::size_t i = 0; text.size() < 400000; ++i) text += std::string(words[i % 12]) + words[(i * 7) % 12] + " " + std::to_string(i * 37 % 1000);
    for (const fs::path& path : files_in(kFuzz / "text")) text += read_file(path);
    for (const std::string name : {"gpt2", "bert-base-uncased", "mistral-prepend"}) {
        INFO(name);
        const std::string json = dir / (name + ".json");
        const fs::path xz = kFuzz.parent_path() / name / "tokenizer.json.xz";
        REQUIRE(std::system(("xz -dc '" + xz.string() + "' > '" + json + "'").c_str()) == 0);
        Tokenizer one = Tokenizer::load(json), two = Tokenizer::load(json);
        one.set_threads(1);
        two.set_threads(2);
        const attntrace::Encoding a = one.encode(text, true, "text"), b = two.encode(text, true, "text");
        CHECK(a.ids.size() > 20000);
        CHECK(a.ids == b.ids);
        CHECK(a.offsets == b.offsets);
        const attntrace::Encoding again = two.encode(text, true, "text");  // the workers' caches warm
        CHECK(again.ids == a.ids);
        CHECK(again.offsets == a.offsets);
    }
}
