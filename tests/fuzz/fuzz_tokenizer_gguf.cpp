// libFuzzer target: any bytes as the text of tokenizers read from GGUF metadata as llama.cpp
// tokenizes (Tokenizer::load of a vocabulary-only .gguf): GPT-2's byte-level BPE (pre "gpt-2"),
// Llama 3's ("llama-bpe"), Qwen3's ("qwen2", user-defined tokens such as <think> matched in the
// text), GPT-NeoX's ("mpt"), and Mistral's vocabulary as SentencePiece ("llama": scores, byte
// fallback) and as convert_hf_to_gguf's llama-hf form; read from the folder $FUZZ_GGUF_VOCABS
// (tests/fuzz/run_fuzz.sh writes them there with tests/goldens/gguf_vocab.py).
//
// Must hold, else the target crashes: invalid UTF-8 is an InputError, valid UTF-8 always encodes,
// with and without special tokens; ids are in range, offsets are byte spans of the text in order;
// decode takes every id encode gave; and Qwen3's vocabulary (pre "qwen2": no normalizer, no
// clean-up of spaces before punctuation in llama_detokenize, user-defined tokens decoded as
// themselves; llama.cpp gives every test text back so) decodes the ids of the text without special
// tokens back to the text exactly. GPT-2's does not: llama.cpp's clean_spaces turns " ?" into "?".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "fuzz_text.hpp"

namespace {

std::vector<attntrace::Tokenizer>* tokenizers = nullptr;
const char* const kNames[] = {"gpt2", "llama3", "qwen3", "gpt-neox-20b", "mistral-spm", "mistral-hf"};
constexpr std::size_t kLossless = 2;  // qwen3

// TEXT through T with or without special tokens, the invariants checked; the ids (empty when refused).
attntrace::Encoding checked(const attntrace::Tokenizer& t, std::string_view text, bool special, bool valid) {
    attntrace::Encoding e;
    try {
        e = t.encode(text, special, "fuzz");
    } catch (const attntrace::InputError&) {
        if (valid) __builtin_trap();  // valid UTF-8 must encode
        return e;
    }
    if (!valid) __builtin_trap();  // invalid UTF-8 must be refused
    std::size_t last = 0;
    for (std::size_t i = 0; i < e.ids.size(); ++i) {
        const auto [b0, b1] = e.offsets[i];
        if (e.ids[i] >= t.vocab_size() || b0 > b1 || b1 > text.size() || b0 < last) __builtin_trap();
        last = b0;
    }
    (void)t.decode(e.ids);
    return e;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    tokenizers = load_tokenizers("fuzz_tokenizer_gguf", "FUZZ_GGUF_VOCABS", kNames, ".gguf");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const bool valid = valid_utf8(text);
    for (std::size_t k = 0; k < tokenizers->size(); ++k) {
        const attntrace::Tokenizer& t = (*tokenizers)[k];
        (void)checked(t, text, true, valid);
        const attntrace::Encoding plain = checked(t, text, false, valid);
        if (k == kLossless && valid && t.decode(plain.ids) != text) __builtin_trap();
    }
    return 0;
}
