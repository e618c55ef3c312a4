// Test driver for the tokenizer of GGUF metadata (tests/e2e/gguf_tokenizer.sh), until attntrace
// reads GGUF files itself: the metadata as a JSON object keyed by the GGUF key names (what
// tests/goldens/gguf_vocab.py writes) into a GgufVocabulary, then every text of a JSON list encoded
// with and without special tokens, and the first encoding decoded.
//
//   gguf_tokenize METADATA.json TEXTS.json > OUT.jsonl
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
#include "attntrace/text/gguf_vocabulary.hpp"

namespace {

using nlohmann::json;

json read_json(const char* path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return json::parse(s.str());
}

template <class T>
void take(const json& m, const char* key, std::optional<T>& out) {
    if (m.contains(key)) out = m.at(key).get<T>();
}

attntrace::GgufVocabulary vocabulary(const json& m) {
    attntrace::GgufVocabulary v;
    v.model = m.value("tokenizer.ggml.model", "");
    v.pre = m.value("tokenizer.ggml.pre", "");
    v.general_name = m.value("general.name", "");
    v.architecture = m.value("general.architecture", "");
    v.tokens = m.at("tokenizer.ggml.tokens").get<std::vector<std::string>>();
    if (m.contains("tokenizer.ggml.scores")) v.scores = m.at("tokenizer.ggml.scores").get<std::vector<float>>();
    if (m.contains("tokenizer.ggml.token_type")) v.token_type = m.at("tokenizer.ggml.token_type").get<std::vector<std::int32_t>>();
    if (m.contains("tokenizer.ggml.merges")) v.merges = m.at("tokenizer.ggml.merges").get<std::vector<std::string>>();
    const std::string p = "tokenizer.ggml.";
    take(m, (p + "bos_token_id").c_str(), v.bos_id);
    take(m, (p + "eos_token_id").c_str(), v.eos_id);
    take(m, (p + "unknown_token_id").c_str(), v.unk_id);
    take(m, (p + "seperator_token_id").c_str(), v.sep_id);
    take(m, (p + "padding_token_id").c_str(), v.pad_id);
    take(m, (p + "mask_token_id").c_str(), v.mask_id);
    take(m, (p + "eot_token_id").c_str(), v.eot_id);
    take(m, (p + "eom_token_id").c_str(), v.eom_id);
    take(m, (p + "fim_pre_token_id").c_str(), v.fim_pre_id);
    take(m, (p + "fim_suf_token_id").c_str(), v.fim_suf_id);
    take(m, (p + "fim_mid_token_id").c_str(), v.fim_mid_id);
    take(m, (p + "fim_pad_token_id").c_str(), v.fim_pad_id);
    take(m, (p + "fim_rep_token_id").c_str(), v.fim_rep_id);
    take(m, (p + "fim_sep_token_id").c_str(), v.fim_sep_id);
    take(m, (p + "prefix_token_id").c_str(), v.prefix_id);
    take(m, (p + "suffix_token_id").c_str(), v.suffix_id);
    take(m, (p + "middle_token_id").c_str(), v.middle_id);
    take(m, (p + "add_bos_token").c_str(), v.add_bos_token);
    take(m, (p + "add_eos_token").c_str(), v.add_eos_token);
    take(m, (p + "add_space_prefix").c_str(), v.add_space_prefix);
    take(m, (p + "remove_extra_whitespaces").c_str(), v.remove_extra_whitespaces);
    return v;
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
        std::cerr << "usage: gguf_tokenize METADATA.json TEXTS.json\n";
        return 2;
    }
    try {
        const auto tokenizer = attntrace::Tokenizer::from_gguf(vocabulary(read_json(argv[1])), argv[1]);
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
