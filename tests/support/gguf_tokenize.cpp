// Test driver for the tokenizer of GGUF metadata (tests/e2e/gguf_tokenizer.sh): a vocabulary-only
// GGUF file (what tests/goldens/gguf_vocab.py writes) read as attntrace reads any GGUF file's
// tokenizer (Tokenizer::load), then every text of a JSON list encoded with and without special
// tokens, and the first encoding decoded: one process per vocabulary where the CLI would take one
// per decoded text.
//
//   gguf_tokenize VOCABULARY.gguf TEXTS.json > OUT.jsonl
//
// One JSON object a line per text: {"ids": [...], "plain": [...], "offsets": [[b0, b1], ...],
// "decode": "..." or {"hex": "..."} when the decoded bytes are not UTF-8}. An InputError is one line
// on stderr and exit 3, as attntrace's own.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"

namespace {

using nlohmann::json;

json read_json(const char* path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return json::parse(s.str());
}

json decoded(const std::string& s) {
    try {
        json j = s;
        (void)j.dump();  // throws on invalid UTF-8
        return j;
    } catch (const json::type_error&) {
    }
    std::string hex;
    for (const unsigned char c : s) {
        char b[3];
        std::snprintf(b, sizeof b, "%02x", c);
        hex += b;
    }
    return json{{"hex", hex}};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: gguf_tokenize VOCABULARY.gguf TEXTS.json\n";
        return 2;
    }
    try {
        const auto tokenizer = attntrace::Tokenizer::load(argv[1]);
        for (const std::string& text : read_json(argv[2]).get<std::vector<std::string>>()) {
            const attntrace::Encoding e = tokenizer.encode(text, true, "text");
            const attntrace::Encoding plain = tokenizer.encode(text, false, "text");
            json row{{"ids", std::vector<std::uint32_t>(e.ids.begin(), e.ids.end())},
                     {"plain", std::vector<std::uint32_t>(plain.ids.begin(), plain.ids.end())},
                     {"offsets", json::array()}, {"decode", decoded(tokenizer.decode(e.ids))}};
            for (const auto& [b0, b1] : e.offsets) row["offsets"].push_back({b0, b1});
            std::cout << row.dump() << '\n';
        }
    } catch (const attntrace::InputError& e) {
        std::cerr << e.what() << '\n';
        return 3;
    }
    return 0;
}
