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
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "fuzz_text.hpp"

namespace {

std::vector<attntrace::Tokenizer>* tokenizers = nullptr;  // gpt2 first
const char* const kNames[] = {"gpt2", "bert-base-uncased", "mistral-prepend", "mistral-metaspace", "llama3", "qwen3"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    tokenizers = load_tokenizers("fuzz_tokenizer_text", "FUZZ_TOKENIZERS", kNames, "");
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
