#pragma once
// The tokenizer a GGUF file carries in its metadata (llama.cpp's `tokenizer.ggml.*` keys), as plain
// data, and the Tokenizer made from it: the ids llama.cpp's llama_tokenize(vocab, text,
// add_special, parse_special = false) gives, where they differ from the same model's tokenizer.json
// too (docs/tokenize.md, "GGUF files"). V = tokens in the vocabulary, M = merges.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/text/tokenizer.hpp"

namespace attntrace {

class GgufFiles;  // io/gguf.hpp

// llama.cpp's token types, the values of tokenizer.ggml.token_type (include/llama.h llama_token_type).
enum class GgufTokenType : std::int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct GgufVocabulary {
    std::string model;                     // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
    std::string pre;                       // tokenizer.ggml.pre: the BPE pre-tokenizer's name ("" when absent)
    std::vector<std::string> tokens;       // (V) tokenizer.ggml.tokens: each id's text, any bytes
    std::vector<float> scores;             // (V) tokenizer.ggml.scores, or empty (all 0)
    std::vector<std::int32_t> token_type;  // (V) tokenizer.ggml.token_type (GgufTokenType), or empty (all normal)
    std::vector<std::string> merges;       // (M) tokenizer.ggml.merges: "left right", the rank is the index

    // tokenizer.ggml.<name>_token_id where the file has it (an id past the vocabulary is ignored,
    // as llama.cpp ignores it); absent, llama.cpp's defaults for the model apply.
    std::optional<std::uint32_t> bos_id, eos_id, unk_id, sep_id, pad_id, mask_id, eot_id, eom_id;
    std::optional<std::uint32_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    std::optional<std::uint32_t> prefix_id, suffix_id, middle_id;  // the deprecated names of fim_pre/suf/mid

    std::optional<bool> add_bos_token, add_eos_token;  // tokenizer.ggml.add_bos_token / add_eos_token
    std::optional<bool> add_space_prefix;              // tokenizer.ggml.add_space_prefix
    std::optional<bool> remove_extra_whitespaces;      // read by llama.cpp for T5's tokenizer only

    // llama.cpp gives some models' special tokens lstrip/rstrip by these (llama-vocab.cpp, "Handle
    // per token attributes"): Phi-3's by general.name, jina's by the pre-tokenizer or architecture.
    std::string general_name;  // general.name
    std::string architecture;  // general.architecture
};

// The vocabulary of FILE's tokenizer.ggml.* (and general.name, general.architecture) keys, each of
// the type llama.cpp reads it as (ids uint32, flags bool, names strings, tokens and merges arrays
// of strings, scores of float32 or int32, token types of int32): another type, no
// tokenizer.ggml.model or tokens, or a "gpt2" model without merges is an InputError naming the
// file and the key (llama.cpp refuses such a file too).
GgufVocabulary read_gguf_vocabulary(const GgufFiles& file);

}  // namespace attntrace
