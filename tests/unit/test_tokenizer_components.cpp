// Each component of a tokenizer.json against Hugging Face's Rust `tokenizers`: the tiny files in
// tests/fixtures/tokenizers/tiny and the ids, tokens, byte offsets and decodes that
// tests/fixtures/tokenizers/make_tiny.mjs had the Rust library give for them.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attntrace/text/tokenizer.hpp"
#include "test_helpers.hpp"

namespace {

using attntrace::Tokenizer;
using attntrace::testing::read_file;
using Offsets = std::vector<std::pair<std::size_t, std::size_t>>;

const std::string kTiny = std::string(ATTNTRACE_FIXTURES) + "/tokenizers/tiny/";

const nlohmann::json& expected() {
    static const nlohmann::json all = nlohmann::json::parse(read_file(kTiny + "expected.json"));
    return all;
}

// One text through TOKENIZER against the reference's row (ids, tokens, offsets, decode).
void check_encoding(const Tokenizer& tokenizer, const std::string& text, bool special, const nlohmann::json& want) {
    INFO("text \"" << attntrace::c_escape(text) << "\", add_special_tokens " << special);
    const attntrace::Encoding e = tokenizer.encode(text, special, "text");
    const std::vector<std::uint32_t> ids(e.ids.begin(), e.ids.end());
    CHECK(ids == want["ids"].get<std::vector<std::uint32_t>>());
    CHECK(std::vector<std::string>(e.tokens.begin(), e.tokens.end()) == want["tokens"].get<std::vector<std::string>>());
    CHECK(Offsets(e.offsets.begin(), e.offsets.end()) == want["offsets"].get<Offsets>());
    CHECK(tokenizer.decode(ids) == want["decode"].get<std::string>());
    // the CLI's path, straight from the tokens, writes what the Encoding's forms hold
    std::ostringstream json, lines;
    tokenizer.encode_json(text, special, "text", json);
    tokenizer.encode_text(text, special, "text", lines);
    CHECK(json.str() == attntrace::encoding_json(e));
    CHECK(lines.str() == attntrace::encoding_text(e, text));
}

// Checks every tiny tokenizer whose name starts with PREFIX; returns how many there were.
int check_family(const std::string& prefix) {
    int count = 0;
    for (const auto& [name, row] : expected().items()) {
        if (name.rfind(prefix, 0) != 0) continue;
        ++count;
        INFO("tiny tokenizer " << name << ".json");
        const Tokenizer tokenizer = Tokenizer::load(kTiny + name + ".json");
        for (const auto& t : row["texts"]) {
            const std::string text = t["text"];
            check_encoding(tokenizer, text, true, t["special"]);
            check_encoding(tokenizer, text, false, t["plain"]);
        }
        for (const auto& d : row["decodes"]) {
            const auto ids = d["ids"].get<std::vector<std::uint32_t>>();
            INFO("decode " << d["ids"].dump());
            CHECK(tokenizer.decode(ids) == d["text"].get<std::string>());
        }
    }
    return count;
}

}  // namespace

TEST_CASE("each normalizer gives the Rust library's text and alignments") {
    // NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, BertNormalizer's options
    CHECK(check_family("normalizer_") == 20);
}

TEST_CASE("each pre-tokenizer splits as the Rust library does") {
    // ByteLevel (add_prefix_space, use_regex), Split (string and regex, every behaviour, invert),
    // Metaspace (always/first/never, split), BertPreTokenizer, WhitespaceSplit, Digits, Sequence
    CHECK(check_family("pre_") == 38);
}

TEST_CASE("BPE merges by rank, falls back to bytes or unk, and honours its options as the Rust library") {
    // merges as strings and pairs, unk with and without fuse_unk, byte_fallback, prefix and suffix,
    // ignore_merges, GPT-2's byte-level alphabet
    CHECK(check_family("bpe_") == 10);
}

TEST_CASE("WordPiece takes the longest prefix, unk for a word it cannot split or too long") {
    CHECK(check_family("wordpiece") == 3);
}

TEST_CASE("each post-processor adds special tokens and trims offsets as the Rust library") {
    // TemplateProcessing, BertProcessing, RobertaProcessing and ByteLevel (trim_offsets,
    // add_prefix_space), Sequence
    CHECK(check_family("post_") == 12);
}

TEST_CASE("each decoder gives the Rust library's text") {
    // the Llama decoder sequence (Replace, ByteFallback, Fuse, Strip), Strip, Replace, Fuse,
    // Metaspace's schemes, ByteLevel, and no decoder (tokens joined by spaces)
    CHECK(check_family("decoder_") == 10);
}

TEST_CASE("added tokens are matched as the Rust library matches them") {
    // lstrip, rstrip, single_word, normalized, special, leftmost-longest, around normalizers
    CHECK(check_family("added_") == 12);
}
