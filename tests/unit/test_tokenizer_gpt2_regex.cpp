// The ASCII fast path of GPT-2's pre-tokenizer regex against PCRE2 running the pattern itself:
// every ASCII string of up to two bytes and of three over a small alphabet that holds each class,
// random strings, and the fixtures' real texts (hostile corpus, llama.cpp's vectors).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attntrace/text/tokenizer.hpp"
#include "test_helpers.hpp"

namespace {

using attntrace::gpt2_regex_splits;

// Counts the texts where the fast path and PCRE2 differ (each reported once).
int differences(const std::vector<std::string>& texts) {
    int differ = 0;
    for (const std::string& text : texts) {
        if (gpt2_regex_splits(text, true) == gpt2_regex_splits(text, false)) continue;
        if (differ++ < 5) MESSAGE("the fast path splits \"" << attntrace::c_escape(text) << "\" otherwise than PCRE2");
    }
    return differ;
}

}  // namespace

TEST_CASE("GPT-2's regex: the ASCII fast path splits every short ASCII string as PCRE2 does") {
    std::vector<std::string> texts;
    for (int a = 0; a < 128; ++a) {
        texts.emplace_back(1, static_cast<char>(a));
        for (int b = 0; b < 128; ++b) texts.push_back({static_cast<char>(a), static_cast<char>(b)});
    }
    std::vector<std::string> alphabet = {"\xC3\xA9", "\u00a0", std::string(1, '\0')};  // é, no-break space, NUL
    for (char c : std::string("a Z9'\t\n\v\f\r!~\x1f\x7fsrvelmdt")) alphabet.emplace_back(1, c);
    for (const std::string& a : alphabet)
        for (const std::string& b : alphabet)
            for (const std::string& c : alphabet) texts.push_back(a + b + c);
    CHECK(texts.size() > 16000);
    CHECK(differences(texts) == 0);
}

TEST_CASE("GPT-2's regex: the fast path agrees with PCRE2 on random and real texts") {
    std::mt19937 rng(26);
    const std::vector<std::string> pieces = {" ", "  ", "\t", "\n", "\r\n", "a", "Z", "7", "'s", "'re", "'LL", "'", "!", "é", "\u00a0",
                                             "\u0085", "\u3000", "我", "١", "😀", "-", "x\u0301", "\v", "\x01"};
    std::vector<std::string> texts;
    for (int i = 0; i < 3000; ++i) {
        std::string t;
        for (int k = std::uniform_int_distribution<int>(1, 12)(rng); k > 0; --k) t += pieces[rng() % pieces.size()];
        texts.push_back(t);
    }
    const std::string dir = std::string(ATTNTRACE_FIXTURES) + "/tokenizers/";
    for (const auto& t : nlohmann::json::parse(attntrace::testing::read_file(dir + "hostile/texts.json"))) texts.push_back(t);
    const std::string inp = attntrace::testing::read_file(dir + "vectors/ggml-vocab-gpt-2.gguf.inp");
    for (std::size_t at = 0, next; at < inp.size(); at = next + 22) {
        next = inp.find("\n__ggml_vocab_test__\n", at);
        if (next == std::string::npos) break;
        texts.push_back(inp.substr(at, next - at));
    }
    CHECK(texts.size() > 3090);
    CHECK(differences(texts) == 0);
}
