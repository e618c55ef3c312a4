// What a broken tokenizer.json, an unsupported component, invalid UTF-8 and an id out of range give:
// one InputError naming the file (or the text) and the problem.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "test_helpers.hpp"

namespace {

using attntrace::InputError;
using attntrace::Tokenizer;
using attntrace::testing::TempDir;
using attntrace::testing::write_file;

// A tokenizer.json with MODEL and the other members as given (JSON text), written into DIR.
std::string tokenizer_file(const TempDir& dir, const std::string& model, const std::string& rest = "") {
    const std::string path = dir / "tokenizer.json";
    write_file(path, "{\"model\": " + model + (rest.empty() ? "" : ", " + rest) + "}");
    return path;
}

const std::string kBpe = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

}  // namespace

TEST_CASE("a missing tokenizer.json, or a folder without one, is an InputError naming it") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(Tokenizer::load(dir.path.string()), (dir.path.string() + ": no tokenizer.json in this folder").c_str(),
                         InputError);
    CHECK_THROWS_AS(Tokenizer::load(dir / "none.json"), InputError);
    CHECK(attntrace::testing::error_of<InputError>([&] { Tokenizer::load(dir / "none.json"); }).find("none.json") !=
          std::string::npos);
}

TEST_CASE("a file that is not JSON, or not a tokenizer.json, says where") {
    TempDir dir;
    const std::string path = dir / "tokenizer.json";
    write_file(path, "{\"model\": ");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": not JSON: unexpected end at byte 10").c_str(), InputError);
    write_file(path, "{\"model\": {\"type\": \"BPE\"}} x");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": not JSON: unexpected text after the document at byte 27").c_str(),
                         InputError);
    write_file(path, "{\"a\": \"\\ud800\"}");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": not JSON: lone surrogate in \\u escape at byte 13").c_str(),
                         InputError);
    write_file(path, "[1, 2]");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": expected a JSON object (a tokenizer.json)").c_str(), InputError);
    write_file(path, "{\"version\": \"1.0\"}");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": no \"model\" (is it a tokenizer.json?)").c_str(), InputError);
    write_file(path, std::string(300, '[') + std::string(300, ']'));
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": not JSON: nested too deep at byte 257").c_str(), InputError);
}

TEST_CASE("an unsupported component is named with the supported ones") {
    TempDir dir;
    std::string path = tokenizer_file(dir, R"({"type": "Unigram", "vocab": [["a", 0.0]]})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": model: type Unigram is not supported (supported: BPE, WordPiece)").c_str(),
                         InputError);
    path = tokenizer_file(dir, kBpe, R"("normalizer": {"type": "Precompiled", "precompiled_charsmap": ""})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": normalizer Precompiled is not supported (supported: BertNormalizer, NFC, NFD, NFKC, NFKD, "
                                 "Lowercase, StripAccents, Strip, Prepend, Replace, Sequence)").c_str(),
                         InputError);
    path = tokenizer_file(dir, kBpe, R"("pre_tokenizer": {"type": "Whitespace"})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": pre_tokenizer Whitespace is not supported (supported: ByteLevel, Split, Metaspace, "
                                 "BertPreTokenizer, WhitespaceSplit, Digits, Sequence)").c_str(),
                         InputError);
    path = tokenizer_file(dir, kBpe, R"("post_processor": {"type": "Nope"})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": post_processor Nope is not supported (supported: TemplateProcessing, BertProcessing, "
                                 "RobertaProcessing, ByteLevel, Sequence)").c_str(),
                         InputError);
    path = tokenizer_file(dir, kBpe, R"("decoder": {"type": "CTC"})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": decoder CTC is not supported (supported: ByteLevel, Metaspace, WordPiece, ByteFallback, "
                                 "Fuse, Strip, Replace, Sequence)").c_str(),
                         InputError);
    path = tokenizer_file(dir, kBpe, R"("pre_tokenizer": {"type": "Split", "pattern": {"String": "a"}, "behavior": "Odd"})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": pre_tokenizer Split: behavior Odd is not supported (supported: Removed, Isolated, "
                                 "MergedWithPrevious, MergedWithNext, Contiguous)").c_str(),
                         InputError);
}

TEST_CASE("a component with a wrong member says which and what was expected") {
    TempDir dir;
    std::string path = tokenizer_file(dir, R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": model.merges[0]: \"b\" is not in the vocabulary").c_str(), InputError);
    path = tokenizer_file(dir, R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": model.merges[0]: \"a\" is not two tokens").c_str(), InputError);
    path = tokenizer_file(dir, R"({"type": "BPE", "vocab": {"a": "x"}, "merges": []})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": model.vocab: expected an integer, found a string").c_str(), InputError);
    path = tokenizer_file(dir, R"({"type": "WordPiece", "vocab": {"a": 0}})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": model.unk_token \"[UNK]\" is not in the vocabulary").c_str(), InputError);
    path = tokenizer_file(dir, kBpe, R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})");
    CHECK_THROWS_WITH_AS(Tokenizer::load(path),
                         (path + ": pre_tokenizer Split: regex (a: missing closing parenthesis at offset 2").c_str(), InputError);
}

TEST_CASE("text that is not valid UTF-8 names the first byte of the bad sequence") {
    TempDir dir;
    const Tokenizer t = Tokenizer::load(tokenizer_file(dir, kBpe));
    CHECK_THROWS_WITH_AS(t.encode("ab\xC0\xAF" "cd", true, "notes.txt"), "notes.txt: invalid UTF-8 at byte 2", InputError);  // overlong
    CHECK_THROWS_WITH_AS(t.encode("x\xED\xA0\x80", true, "--text"), "--text: invalid UTF-8 at byte 1", InputError);  // surrogate
    CHECK_THROWS_WITH_AS(t.encode("abc\xE2\x82", true, "stdin"), "stdin: invalid UTF-8 at byte 3", InputError);     // truncated
    CHECK_THROWS_WITH_AS(t.encode("\xF4\x90\x80\x80", true, "t"), "t: invalid UTF-8 at byte 0", InputError);       // > U+10FFFF
    CHECK_THROWS_WITH_AS(t.encode("a\x80", true, "t"), "t: invalid UTF-8 at byte 1", InputError);                  // stray
    const attntrace::Encoding e = t.encode("ab", true, "t");
    CHECK((e.ids.size() == 1 && e.ids[0] == 2));
}

TEST_CASE("an id out of range in decode is an InputError naming the range") {
    TempDir dir;
    const std::string path = tokenizer_file(dir, kBpe);
    const Tokenizer t = Tokenizer::load(path);
    CHECK(t.decode(std::vector<std::uint32_t>{0, 1, 2}) == "a b ab");  // no decoder: the tokens joined by spaces
    CHECK_THROWS_WITH_AS(t.decode(std::vector<std::uint32_t>{0, 3}), ("decode: id 3 is not in " + path + " (ids 0 to 2)").c_str(), InputError);
}

TEST_CASE("many merges are read in two halves at once: the same table, and the lowest bad rank is the one told") {
    TempDir dir;
    // 20000 merges "cI z" -> "cIz", cI the CJK character U+4E00 + I (the two halves' look-ups run at
    // once from 16384 merges on); ids: cI is I, z 20000, cIz 20001 + I
    auto cjk = [](std::size_t i) {
        const auto c = static_cast<unsigned>(0x4E00 + i);
        return std::string{static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 63)), static_cast<char>(0x80 | (c & 63))};
    };
    const std::size_t n = 20000;
    auto model = [&](std::size_t bad_low, std::size_t bad_high) {
        std::string vocab = "\"z\": " + std::to_string(n), merges;
        for (std::size_t i = 0; i < n; ++i) {
            vocab += ", \"" + cjk(i) + "\": " + std::to_string(i) + ", \"" + cjk(i) + "z\": " + std::to_string(n + 1 + i);
            merges += std::string(i ? ", \"" : "\"") + (i == bad_low || i == bad_high ? "q" : cjk(i)) + " z\"";
        }
        return R"({"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [)" + merges + "]}";
    };
    const std::string good = tokenizer_file(dir, model(n, n));
    for (const std::size_t threads : {1, 2}) {
        const Tokenizer t = Tokenizer::load(good, threads);
        for (const std::size_t i : {0, 9999, 10000, 19999}) {
            const attntrace::Encoding e = t.encode(cjk(i) + "z", false, "text");
            CHECK(std::vector<std::uint32_t>(e.ids.begin(), e.ids.end()) == std::vector<std::uint32_t>{static_cast<std::uint32_t>(n + 1 + i)});
        }
    }
    const std::string bad = tokenizer_file(dir, model(300, 15000));
    for (const std::size_t threads : {1, 2})
        CHECK_THROWS_WITH_AS(Tokenizer::load(bad, threads), (bad + ": model.merges[300]: \"q\" is not in the vocabulary").c_str(), InputError);
    const std::string late = tokenizer_file(dir, model(15000, 19000));
    CHECK_THROWS_WITH_AS(Tokenizer::load(late, 2), (late + ": model.merges[15000]: \"q\" is not in the vocabulary").c_str(), InputError);
}
