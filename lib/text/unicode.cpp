// utf8proc and PCRE2 through dlopen (dynamic_library.hpp), as gemm.cpp loads OpenBLAS: their
// headers are read at build time for the types, no symbol of theirs is linked.
#include "unicode.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <vector>
#include <cstring>
#include <mutex>

#include "attntrace/tensor/dynamic_library.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace::text {
namespace {

struct Utf8proc {
    decltype(&utf8proc_category) category = nullptr;
    decltype(&utf8proc_tolower) tolower = nullptr;
    decltype(&utf8proc_map) map = nullptr;
    decltype(&utf8proc_decompose_char) decompose_char = nullptr;
    decltype(&utf8proc_get_property) property = nullptr;
    decltype(&utf8proc_normalize_utf32) normalize_utf32 = nullptr;
};

struct Pcre2 {
    decltype(&pcre2_compile_8) compile = nullptr;
    decltype(&pcre2_jit_compile_8) jit_compile = nullptr;
    decltype(&pcre2_match_data_create_from_pattern_8) match_data_create = nullptr;
    decltype(&pcre2_match_8) match = nullptr;
    decltype(&pcre2_jit_match_8) jit_match = nullptr;
    decltype(&pcre2_get_ovector_pointer_8) ovector = nullptr;
    decltype(&pcre2_match_data_free_8) match_data_free = nullptr;
    decltype(&pcre2_code_free_8) code_free = nullptr;
    decltype(&pcre2_get_error_message_8) error_message = nullptr;
};

void* open_or_throw(const char* soname, const char* path, const char* package) {
    void* handle = open_library(soname, path);
    if (!handle)
        throw InputError(std::string("tokenizer: cannot load ") + soname + " (install Debian's " + package +
                         "): " + dlerror());
    return handle;
}

const Utf8proc& utf8proc() {
    static const Utf8proc lib = [] {
        void* h = open_or_throw("libutf8proc.so.2", ATTNTRACE_UTF8PROC_LIBRARY, "libutf8proc2");
        Utf8proc l;
        bind_symbol<InputError>(h, l.category, "utf8proc_category", "libutf8proc");
        bind_symbol<InputError>(h, l.tolower, "utf8proc_tolower", "libutf8proc");
        bind_symbol<InputError>(h, l.map, "utf8proc_map", "libutf8proc");
        bind_symbol<InputError>(h, l.decompose_char, "utf8proc_decompose_char", "libutf8proc");
        bind_symbol<InputError>(h, l.property, "utf8proc_get_property", "libutf8proc");
        bind_symbol<InputError>(h, l.normalize_utf32, "utf8proc_normalize_utf32", "libutf8proc");
        return l;
    }();
    return lib;
}

const Pcre2& pcre2() {
    static const Pcre2 lib = [] {
        void* h = open_or_throw("libpcre2-8.so.0", ATTNTRACE_PCRE2_LIBRARY, "libpcre2-8-0");
        Pcre2 l;
        bind_symbol<InputError>(h, l.compile, "pcre2_compile_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.jit_compile, "pcre2_jit_compile_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.match_data_create, "pcre2_match_data_create_from_pattern_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.match, "pcre2_match_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.jit_match, "pcre2_jit_match_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.ovector, "pcre2_get_ovector_pointer_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.match_data_free, "pcre2_match_data_free_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.code_free, "pcre2_code_free_8", "libpcre2-8");
        bind_symbol<InputError>(h, l.error_message, "pcre2_get_error_message_8", "libpcre2-8");
        return l;
    }();
    return lib;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The first byte from I on (of N) that is not ASCII, or N: eight bytes at a time, the first high
// bit found by counting zeros (GPT-2's vocabulary keys are short ASCII runs between two-byte
// characters, which a byte-at-a-time loop walked one by one).
std::size_t next_non_ascii(const unsigned char* p, std::size_t i, std::size_t n) noexcept {
    if constexpr (std::endian::native == std::endian::little) {
        for (; i + 8 <= n; i += 8) {
            std::uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (const std::uint64_t high = w & 0x8080808080808080ull) return i + static_cast<std::size_t>(std::countr_zero(high)) / 8;
        }
    }
    while (i < n && p[i] < 0x80) ++i;
    return i;
}

// The well-formed sequence (Unicode 15, Table 3-7) at P[0..] (P[0] >= 0x80, N bytes left): its
// length, or 0. The second byte's range depends on the lead (no overlong form, no surrogate, nothing
// past U+10FFFF); the others are continuation bytes.
std::size_t utf8_sequence(const unsigned char* p, std::size_t n) noexcept {
    const unsigned char b = p[0];
    if (b >= 0xC2 && b <= 0xDF) return n >= 2 && is_continuation(p[1]) ? 2 : 0;
    if (b >= 0xE0 && b <= 0xEF) {
        if (n < 3) return 0;
        const unsigned char lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && is_continuation(p[2]) ? 3 : 0;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (n < 4) return 0;
        const unsigned char lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && is_continuation(p[2]) && is_continuation(p[3]) ? 4 : 0;
    }
    return 0;
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view s) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i = next_non_ascii(p, i + 1, n);
            continue;
        }
        const std::size_t len = utf8_sequence(p + i, n - i);
        if (len == 0) return i;
        i += len;
    }
    return std::nullopt;
}

namespace {

// What the tokenizers ask of a character, looked up in utf8proc once per code point below
// U+30000: a text asks about the same few hundred characters again and again. One word each:
// bit 63 known, bits 0-20 the lowercase, 21-25 the category, 26-33 the combining class, 34 a
// canonical decomposition, 35 any decomposition. (Atomic, relaxed: two threads may fill an entry,
// with the same value.)
struct CharInfo {
    std::uint64_t bits;
    char32_t lower() const { return static_cast<char32_t>(bits & 0x1FFFFF); }
    Category category() const { return static_cast<Category>((bits >> 21) & 31); }
    int ccc() const { return static_cast<int>((bits >> 26) & 255); }
    bool decomposes(bool compat) const { return (bits >> (compat ? 35 : 34)) & 1; }
};

CharInfo look_up(char32_t c) {
    const Utf8proc& lib = utf8proc();
    const auto cp = static_cast<utf8proc_int32_t>(c);
    const utf8proc_property_t* p = lib.property(cp);
    const bool hangul = c >= 0xAC00 && c <= 0xD7A3;  // decomposed by rule
    const bool any = hangul || p->decomp_seqindex != UINT16_MAX;
    const bool canonical = hangul || (any && p->decomp_type == 0);
    return {static_cast<std::uint64_t>(lib.tolower(cp)) | std::uint64_t(lib.category(cp)) << 21 |
            std::uint64_t(p->combining_class) << 26 | std::uint64_t(canonical) << 34 | std::uint64_t(any) << 35 | 1ull << 63};
}

CharInfo info(char32_t c) {
    constexpr std::size_t kKnown = 0x30000;
    // calloc: zero pages the kernel maps only where a character is looked up
    static std::uint64_t* const known = static_cast<std::uint64_t*>(std::calloc(kKnown, sizeof(std::uint64_t)));
    if (c >= kKnown || !known) return look_up(c);
    std::atomic_ref<std::uint64_t> entry(known[c]);
    std::uint64_t v = entry.load(std::memory_order_relaxed);
    if (v == 0) entry.store(v = look_up(c).bits, std::memory_order_relaxed);
    return {v};
}

}  // namespace

Category category(char32_t c) { return info(c).category(); }

bool decomposes(char32_t c, bool compat) { return c >= 0xA0 && info(c).decomposes(compat); }

bool is_whitespace_above_ascii(char32_t c) noexcept {
    switch (c) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

bool is_punctuation_above_ascii(char32_t c) {
    const Category k = category(c);
    return k >= Category::Pc && k <= Category::Po;
}

bool is_numeric(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    const Category k = category(c);
    return k >= Category::Nd && k <= Category::No;
}

bool is_other(char32_t c) {
    const Category k = category(c);
    return k == Category::Cn || k >= Category::Cc;
}

bool is_mark_nonspacing(char32_t c) { return c >= 0x300 && category(c) == Category::Mn; }

bool is_word_char(char32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return true;
    const Category k = category(c);
    return (k >= Category::Lu && k <= Category::Nl) || k == Category::Pc;
}

void append_lowercase(std::u32string& out, char32_t c) {
    if (c < 0x80) {
        out += (c >= 'A' && c <= 'Z') ? c + 32 : c;
    } else if (c == 0x130) {
        out += U'i';
        out += char32_t(0x307);
    } else {
        out += info(c).lower();
    }
}

std::string normalize(std::string_view s, NormalForm f) {
    int options = UTF8PROC_STABLE;
    if (f == NormalForm::nfc || f == NormalForm::nfkc) options |= UTF8PROC_COMPOSE;
    else options |= UTF8PROC_DECOMPOSE;
    if (f == NormalForm::nfkc || f == NormalForm::nfkd) options |= UTF8PROC_COMPAT;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc().map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                                              static_cast<utf8proc_option_t>(options));
    if (n < 0) throw InputError("tokenizer: utf8proc cannot normalize the text");
    std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
    return result;
}

void decompose_char(char32_t c, bool compat, std::u32string& out) {
    utf8proc_int32_t buf[32];
    int boundclass = 0;
    const int options = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    const utf8proc_ssize_t n = utf8proc().decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32,
                                                         static_cast<utf8proc_option_t>(options), &boundclass);
    if (n < 0 || n > 32) throw InputError("tokenizer: utf8proc cannot decompose U+" + std::to_string(c));
    for (utf8proc_ssize_t i = 0; i < n; ++i) out += static_cast<char32_t>(buf[i]);
}

int combining_class(char32_t c) { return c < 0x300 ? 0 : info(c).ccc(); }

char32_t compose_pair(char32_t a, char32_t b) {
    utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
    const utf8proc_ssize_t n = utf8proc().normalize_utf32(buf, 2, UTF8PROC_COMPOSE);
    return n == 1 ? static_cast<char32_t>(buf[0]) : 0;
}

std::string translate_regex(std::string_view onig) {
    std::string out;
    out.reserve(onig.size() + 16);
    int class_depth = 0;
    for (std::size_t i = 0; i < onig.size(); ++i) {
        const char c = onig[i];
        if (c == '\\' && i + 1 < onig.size()) {
            const char e = onig[++i];
            if (e == 's') out += class_depth ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (e == 'S' && !class_depth) out += "[^\\s\\x{85}]";
            else out += {'\\', e};
            continue;
        }
        if (c == '[') {
            // A class inside a class is Oniguruma's union: its members join the outer class.
            if (class_depth++ > 0) continue;
            out += c;
            if (i + 1 < onig.size() && onig[i + 1] == '^') out += onig[++i];
            if (i + 1 < onig.size() && onig[i + 1] == ']') out += "\\]", ++i;
            continue;
        }
        if (c == ']' && class_depth > 0) {
            if (--class_depth > 0) continue;
        }
        out += c;
    }
    return out;
}

Regex::Regex(std::string_view pattern, const std::string& what) {
    const Pcre2& lib = pcre2();
    const std::string translated = translate_regex(pattern);
    int error = 0;
    PCRE2_SIZE at = 0;
    code_ = lib.compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                        &error, &at, nullptr);
    if (!code_) {
        PCRE2_UCHAR message[256];
        lib.error_message(error, message, sizeof message);
        throw InputError(what + ": regex " + std::string(pattern) + ": " + reinterpret_cast<const char*>(message) +
                         " at offset " + std::to_string(at));
    }
    jit_ = lib.jit_compile(static_cast<pcre2_code*>(code_), PCRE2_JIT_COMPLETE) == 0;
    match_data_ = lib.match_data_create(static_cast<pcre2_code*>(code_), nullptr);
}

Regex::Regex(Regex&& other) noexcept : code_(other.code_), match_data_(other.match_data_), jit_(other.jit_) {
    other.code_ = other.match_data_ = nullptr;
}

Regex::~Regex() {
    if (!code_) return;
    pcre2().match_data_free(static_cast<pcre2_match_data*>(match_data_));
    pcre2().code_free(static_cast<pcre2_code*>(code_));
}

bool Regex::find_from(std::string_view s, std::size_t at, std::pair<std::size_t, std::size_t>& match) const {
    const Pcre2& lib = pcre2();
    auto* code = static_cast<pcre2_code*>(code_);
    auto* md = static_cast<pcre2_match_data*>(match_data_);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    const PCRE2_SIZE* ov = lib.ovector(md);
    while (at <= s.size()) {
        const int rc = jit_ ? lib.jit_match(code, subject, s.size(), at, 0, md, nullptr)
                            : lib.match(code, subject, s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) throw InputError("tokenizer: regex match failed (PCRE2 error " + std::to_string(rc) + ")");
        if (ov[1] > ov[0]) {
            match = {ov[0], ov[1]};
            return true;
        }
        at = ov[0] + 1;  // an empty match: step over one character
        while (at < s.size() && is_continuation(static_cast<unsigned char>(s[at]))) ++at;
    }
    return false;
}

void Regex::find_all(std::string_view s, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
    std::pair<std::size_t, std::size_t> m;
    for (std::size_t at = 0; find_from(s, at, m); at = m.second) out.push_back(m);
}

}  // namespace attntrace::text
