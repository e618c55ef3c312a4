#pragma once
// The tokenizer of a GGUF vocabulary (gguf_vocabulary.hpp) as llama.cpp runs it, transcribed from
// llama.cpp's src/llama-vocab.cpp and src/unicode.cpp at commit 80fb11ac (the source of the libllama
// 3.21.1 of npm's @node-llama-cpp/linux-x64 that tests/goldens/make_gguf_tokenizer_goldens.py takes its
// goldens from): the special tokens matched in the raw text (tokenizer_st_partition), then each
// stretch of text through the BPE session (llm_tokenizer_bpe_session: the pre-tokenizer's regexes,
// byte-level characters, merges by rank) or the SentencePiece one (llm_tokenizer_spm_session: "▁"
// for spaces, merges by score, byte fallback).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attntrace/text/gguf_vocabulary.hpp"
#include "attntrace/text/token_display.hpp"
#include "components.hpp"
#include "merge_table.hpp"
#include "word_cache.hpp"

namespace attntrace::text {

// llama.cpp's token attributes (include/llama.h llama_token_attr).
enum : std::uint32_t {
    kAttrUnknown = 1u << 0, kAttrUnused = 1u << 1, kAttrNormal = 1u << 2, kAttrControl = 1u << 3,
    kAttrUserDefined = 1u << 4, kAttrByte = 1u << 5, kAttrLstrip = 1u << 7, kAttrRstrip = 1u << 8,
};

// ---- llama.cpp's code point classes and regexes (unicode.h, unicode.cpp) --------------------------
// A code point's flags as llama.cpp's unicode_cpt_flags holds them: one general category bit (its
// table is Unicode 15.1's UnicodeData.txt) and White_Space. 0 only for a position outside the text.
enum : std::uint16_t {
    kCptUndefined = 0x1, kCptNumber = 0x2, kCptLetter = 0x4, kCptSeparator = 0x8, kCptMark = 0x10,
    kCptPunctuation = 0x20, kCptSymbol = 0x40, kCptControl = 0x80, kCptCategories = 0xFF, kCptWhitespace = 0x100,
};
// C's flags: utf8proc's category (Unicode 15.0 in Debian 12) with the 627 code points Unicode 15.1
// added (tests/unit/test_gguf_tokenizer.cpp checks every code point against llama.cpp's table).
std::uint16_t llama_cpt_flags(char32_t c);

// The regexes llama.cpp splits a text with, each by its custom code (unicode_regex_split_custom_*)
// or, for the simple ones, as std::regex matches them on its collapsed text (unicode_regex_split).
enum class LlamaRegex : std::uint8_t {
    gpt2,              // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    llama3,            // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    qwen2,             // the same with \p{N} for \p{N}{1,3}
    qwen35,            // qwen2's with [\p{L}\p{M}]+ for \p{L}+
    punctuation_runs,  // [\p{P}\$\+<=>\^~\|]+
    falcon_punctuation_runs,  // [\p{P}\$\+<=>\^~\|`]+
    number_runs,       // \p{N}+
    number,            // \p{N}
    digit_triples,     // [0-9][0-9][0-9]
    newline_runs,      // [^\n]+|[\n]+
};

// What llama.cpp makes of a tokenizer.ggml.pre name (llama_vocab::impl::load, llm_tokenizer_bpe).
struct GgufPre {
    std::vector<LlamaRegex> regexes;  // applied in turn, each to the pieces of the one before
    bool ignore_merges = false;       // a word in the vocabulary is one token
    bool add_bos = false;             // add_bos before tokenizer.ggml.add_bos_token
    bool clean_spaces = true;         // detokenize's clean-up of " ." " 's" ...
    bool no_bos = false;              // the BOS id default cleared (glm4)
};
// The pre-tokenizer NAME ("" for none: llama.cpp's "default"); throws InputError naming FILE and
// NAME when llama.cpp does not know it or attntrace lacks its regexes.
GgufPre gguf_pre(const std::string& name, const std::string& file);

// The pieces of a text (code points CPTS, their FLAGS): OFFSETS, lengths in code points of the
// pieces so far, cut by REGEX into OUT (the matches and the stretches between them, in order).
void llama_regex_split(LlamaRegex regex, std::span<const char32_t> cpts, std::span<const std::uint16_t> flags,
                       const std::vector<std::size_t>& offsets, std::vector<std::size_t>& out);

// llama.cpp's UTF-8 decoder (unicode_cpts_from_utf8): lenient, a byte it cannot read U+FFFD.
std::vector<char32_t> llama_cpts_from_utf8(std::string_view s);

// ---- the BPE merges (llm_tokenizer_bpe_session) --------------------------------------------------
// Symbols are strings (llama.cpp merges by the texts of the pair): each string of the vocabulary,
// the merges' sides and their results gets a number, the vocabulary's own ids first.
class GgufBpe {
public:
    static constexpr std::uint32_t kNone = ~std::uint32_t(0);  // a string that no merge or token has
    GgufBpe(const std::vector<std::string>& merges, const Vocab& vocab, bool ignore_merges);
    // The tokens of WORD (raw bytes of the text), [begin, end) relative to WORD.
    void tokenize(std::string_view word, std::vector<ModelToken>& out) const;

private:
    std::uint32_t intern(std::string_view s);
    std::uint32_t lookup(std::string_view s) const;
    void merge(std::vector<CachedToken>& symbols) const;
    bool emit_symbol(std::string_view word, std::uint32_t at, const CachedToken& s, std::vector<ModelToken>& out) const;
    const Vocab& vocab_;
    bool ignore_merges_;
    MergeTable table_;
    std::unordered_map<std::string, std::uint32_t> extra_;  // strings beyond the vocabulary
    std::array<std::uint32_t, 256> byte_symbol_{};          // each byte's byte-level character
    mutable WordCache cache_;
    mutable std::string mapped_;
};

// ---- the tokenizer -------------------------------------------------------------------------------
class GgufTokenizer {
public:
    // Builds the tokenizer of V (moved in) and fills VOCAB (kept by reference) with its tokens.
    GgufTokenizer(GgufVocabulary v, const std::string& file, Vocab& vocab);
    ~GgufTokenizer();
    void encode(std::string_view text, bool add_special, Tokens& out) const;
    std::string decode(std::span<const std::uint32_t> ids) const;
    TokenStyle style() const;

    // A stretch of the text (bytes [from, to)) after the special tokens are matched: raw text, or
    // the special token TOKEN.
    struct Fragment {
        std::size_t from, to;
        std::optional<std::uint32_t> token;
    };
    std::vector<Fragment> partition(std::string_view text) const;

private:
    void build_attributes(const GgufVocabulary& v);
    void validate_pieces() const;
    void encode_bpe(std::string_view text, const Fragment& f, Tokens& out) const;
    void encode_spm(std::string_view text, const Fragment& f, bool prefix, Tokens& out) const;
    std::string piece(std::uint32_t id) const;  // token_to_piece(special = true)
    std::uint32_t byte_token(unsigned char b) const;

    std::string file_;
    bool spm_ = false;
    GgufPre pre_;
    std::vector<std::string> tokens_;  // (V)
    std::vector<float> scores_;        // (V)
    std::vector<std::uint32_t> attrs_;  // (V) kAttr*
    Vocab& vocab_;
    std::optional<std::uint32_t> bos_, eos_;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
    std::vector<std::uint32_t> specials_;  // matched in the text: user-defined, longest first
    std::unique_ptr<GgufBpe> bpe_;
};

}  // namespace attntrace::text
