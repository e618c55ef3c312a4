// libFuzzer target: any bytes as the text of real tokenizers (GPT-2's byte-level BPE, BERT's
// WordPiece with its normalizer, Mistral's byte-fallback BPE in both forms, Llama 3's and Qwen3's
// Split regexes), read from the folder $FUZZ_TOKENIZERS (tests/fuzz/run_fuzz.sh unpacks them there).
//
// Must hold, else the target crashes: invalid UTF-8 is an InputError naming the first bad byte
// (first_invalid_utf8), valid UTF-8 always encodes; ids are in range, offsets are byte spans of the
// text; decode takes every id encode gave; and GPT-2, which neither normalizes nor loses a byte,
// decodes back to the text exactly.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"

namespace {

std::vector<attntrace::Tokenizer>* tokenizers = nullptr;  // gpt2 first
const char* const kNames[] = {"gpt2", "bert-base-uncased", "mistral-prepend", "mistral-metaspace", "llama3", "qwen3"};

bool valid_utf8(std::string_view s) {
    // The standard's table (Unicode 3.9, D92), independent of lib/text's validator.
    std::size_t i = 0;
    auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    while (i < s.size()) {
        const unsigned char b = at(i);
        std::size_t n = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
        if (n > 1 && (at(i + 1) < lo || at(i + 1) > hi)) return false;
        for (std::size_t k = 2; k < n; ++k)
            if (at(i + k) < 0x80 || at(i + k) > 0xBF) return false;
        i += n;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* dir = std::getenv("FUZZ_TOKENIZERS");
    if (!dir) {
        std::fprintf(stderr, "fuzz_tokenizer_text: set FUZZ_TOKENIZERS to a folder of tokenizer folders (run_fuzz.sh does)\n");
        std::exit(2);
    }
    tokenizers = new std::vector<attntrace::Tokenizer>;
    for (const char* name : kNames) tokenizers->push_back(attntrace::Tokenizer::load(std::string(dir) + "/" + name));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const bool valid = valid_utf8(text);
    for (std::size_t k = 0; k < tokenizers->size(); ++k) {
        const attntrace::Tokenizer& t = (*tokenizers)[k];
        attntrace::Encoding e;
        try {
            e = t.encode(text, true, "fuzz");
        } catch (const attntrace::InputError&) {
            if (valid) __builtin_trap();  // valid UTF-8 must encode
            continue;
        }
        if (!valid) __builtin_trap();  // invalid UTF-8 must be refused
        for (std::size_t i = 0; i < e.ids.size(); ++i)
            if (e.ids[i] >= t.vocab_size() || e.offsets[i].first > e.offsets[i].second || e.offsets[i].second > size) __builtin_trap();
        const std::string back = t.decode(e.ids);
        if (k == 0 && back != text) __builtin_trap();  // GPT-2 is lossless
    }
    return 0;
}
