#pragma once
// Unicode for the tokenizers, from Debian's libraries loaded with dlopen on first use (so commands
// that tokenize nothing never map them): utf8proc for normalization forms, categories and case,
// PCRE2 (8-bit, UTF + UCP, JIT when the machine has it) for the regexes of tokenizer.json.
// UTF-8 decoding and validation are here too: every string that reaches them is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attntrace::text {

// The byte offset of the first byte of the first invalid sequence (overlong forms, surrogates,
// code points past U+10FFFF, truncated or stray continuation bytes), nullopt when S is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view s) noexcept;

// The code point starting at S[I] (valid UTF-8) and its length in bytes.
inline std::pair<char32_t, std::size_t> decode_utf8(std::string_view s, std::size_t i) noexcept {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return {b, 1};
    if (b < 0xE0) return {char32_t(b & 0x1F) << 6 | (s[i + 1] & 0x3F), 2};
    if (b < 0xF0) return {char32_t(b & 0x0F) << 12 | char32_t(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F), 3};
    return {char32_t(b & 0x07) << 18 | char32_t(s[i + 1] & 0x3F) << 12 | char32_t(s[i + 2] & 0x3F) << 6 |
                (s[i + 3] & 0x3F),
            4};
}
inline std::size_t utf8_length(char32_t c) noexcept { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
// C's UTF-8 bytes at OUT (room for 4); returns their number.
inline std::size_t encode_utf8(char32_t c, char* out) noexcept {
    if (c < 0x80) return out[0] = static_cast<char>(c), 1;
    if (c < 0x800) {
        out[0] = static_cast<char>(0xC0 | (c >> 6)), out[1] = static_cast<char>(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = static_cast<char>(0xE0 | (c >> 12)), out[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out[2] = static_cast<char>(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = static_cast<char>(0xF0 | (c >> 18)), out[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out[3] = static_cast<char>(0x80 | (c & 0x3F));
    return 4;
}
inline void append_utf8(std::string& out, char32_t c) {
    char bytes[4];
    out.append(bytes, encode_utf8(c, bytes));
}

// Unicode general categories as utf8proc numbers them (UTF8PROC_CATEGORY_*).
enum class Category : int { Cn = 0, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po,
                            Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co };
Category category(char32_t c);
bool is_whitespace_above_ascii(char32_t c) noexcept;
bool is_punctuation_above_ascii(char32_t c);
// Rust's char::is_whitespace: the White_Space property.
inline bool is_whitespace(char32_t c) noexcept {
    return c < 0x80 ? (c == ' ' || (c >= 0x09 && c <= 0x0D)) : is_whitespace_above_ascii(c);
}
// P*, as Rust's unicode_categories is_punctuation (ASCII: every printable that is no letter or digit).
inline bool is_punctuation(char32_t c) {
    if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    return is_punctuation_above_ascii(c);
}
bool is_numeric(char32_t c);             // Nd, Nl, No: Rust's char::is_numeric
bool is_other(char32_t c);                // C*: Cc Cf Cn Co Cs
bool is_mark_nonspacing(char32_t c);      // Mn
bool is_word_char(char32_t c);            // \w of Rust's regex crate: L, M, Nd, Nl, Pc, ZWJ/ZWNJ
// Rust's char::to_lowercase, appended: one code point, except U+0130 -> "i\u0307".
void append_lowercase(std::u32string& out, char32_t c);

enum class NormalForm { nfc, nfd, nfkc, nfkd };
// S in form F (S valid UTF-8).
std::string normalize(std::string_view s, NormalForm f);
// C's full canonical (or, with COMPAT, compatibility) decomposition, appended to OUT, not reordered.
void decompose_char(char32_t c, bool compat, std::u32string& out);
// Whether C has a canonical (or, with COMPAT, any) decomposition: false means C is its own NFD (NFKD).
bool decomposes(char32_t c, bool compat);
// C's canonical combining class (0 for a starter).
int combining_class(char32_t c);
// The primary composite of A followed by B, 0 when they do not compose.
char32_t compose_pair(char32_t a, char32_t b);
// Whether the normalization of S cannot change anything across a boundary before S[i]: S[i] is
// below U+0300, the first code point that can compose with or reorder around what precedes it.
inline bool is_normalization_boundary(unsigned char b) noexcept { return b < 0xCC; }

// A compiled PCRE2 pattern (the tokenizer.json regex syntax, which is Oniguruma's, translated where
// the two differ). Throws InputError "WHAT: regex PATTERN: MESSAGE at offset N" on a bad pattern.
class Regex {
public:
    Regex(std::string_view pattern, const std::string& what);
    Regex(Regex&& other) noexcept;
    Regex& operator=(Regex&&) = delete;
    Regex(const Regex&) = delete;
    ~Regex();
    // The non-empty matches in S, as byte ranges, left to right (an empty match is stepped over).
    void find_all(std::string_view s, std::vector<std::pair<std::size_t, std::size_t>>& out) const;
    // The first match in S starting at or after byte AT (a character boundary), as find_all would
    // find it when its previous match ended at AT; false when there is none.
    bool find_from(std::string_view s, std::size_t at, std::pair<std::size_t, std::size_t>& match) const;

private:
    void* code_ = nullptr;
    void* match_data_ = nullptr;
    bool jit_ = false;
};

// The pattern in PCRE2's syntax: nested classes [a[bc]] flattened, \s and \S widened to U+0085
// (Oniguruma's \s is White_Space, PCRE2's is not on NEL).
std::string translate_regex(std::string_view onig);

}  // namespace attntrace::text
