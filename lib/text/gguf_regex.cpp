// llama.cpp's pre-tokenizers: its code point classes, the regexes it splits a text with
// (src/unicode.cpp: unicode_regex_split and the unicode_regex_split_custom_* functions) and what each
// tokenizer.ggml.pre name selects (src/llama-vocab.cpp: llama_vocab::impl::load, llm_tokenizer_bpe),
// at commit 80fb11ac. The custom splitters are transcribed as they are, quirks included: a match is
// decided from the flags of the next code points, a position outside the piece having none.
#include <algorithm>
#include <string_view>

#include "attntrace/tensor/errors.hpp"
#include "gguf_tokenizer.hpp"

namespace attntrace::text {
namespace {

constexpr char32_t kOutOfRange = 0xFFFFFFFF;

std::uint16_t flags_of_category(Category k) {
    switch (k) {
        case Category::Cn: return kCptUndefined;
        case Category::Lu: case Category::Ll: case Category::Lt: case Category::Lm: case Category::Lo: return kCptLetter;
        case Category::Mn: case Category::Mc: case Category::Me: return kCptMark;
        case Category::Nd: case Category::Nl: case Category::No: return kCptNumber;
        case Category::Pc: case Category::Pd: case Category::Ps: case Category::Pe: case Category::Pi: case Category::Pf:
        case Category::Po: return kCptPunctuation;
        case Category::Sm: case Category::Sc: case Category::Sk: case Category::So: return kCptSymbol;
        case Category::Zs: case Category::Zl: case Category::Zp: return kCptSeparator;
        default: return kCptControl;  // Cc Cf Cs Co
    }
}

// One piece [ini, end) of the text, read as the custom splitters read it (_get_cpt, _get_flags),
// and its cuts (_add_token).
struct Stretch {
    std::span<const char32_t> cpts;
    std::span<const std::uint16_t> flags;
    std::size_t ini, end, prev;
    std::vector<std::size_t>& out;
    char32_t cpt(std::size_t pos) const { return pos >= ini && pos < end ? cpts[pos] : kOutOfRange; }
    std::uint16_t flag(std::size_t pos) const { return pos >= ini && pos < end ? flags[pos] : 0; }
    std::size_t add(std::size_t to) {
        const std::size_t len = to - prev;
        if (len > 0) out.push_back(len);
        prev = to;
        return len;
    }
};

bool is_contraction_letter(char32_t c) { return c == 's' || c == 't' || c == 'm' || c == 'd'; }
// unicode_tolower where it matters here: only A-Z lower to the contractions' letters.
char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d at POS (case-insensitive with FOLD): the cut made, or false.
bool contraction(Stretch& p, std::size_t& pos, bool fold) {
    if (p.cpt(pos) != '\'' || pos + 1 >= p.end) return false;
    auto low = [&](std::size_t at) { return fold ? ascii_lower(p.cpt(at)) : p.cpt(at); };
    const char32_t next = low(pos + 1);
    if (is_contraction_letter(next)) return pos += p.add(pos + 2), true;
    if (pos + 2 >= p.end) return false;
    const char32_t after = low(pos + 2);
    if ((next == 'r' && after == 'e') || (next == 'v' && after == 'e') || (next == 'l' && after == 'l')) return pos += p.add(pos + 3), true;
    return false;
}

// \s+(?!\S) and \s+ at POS (after nothing else matched): the whitespace run, all but its last
// character when a character follows it; a single character when nothing matches. With NEWLINES,
// \s*[\r\n]+ first: the run up to its last \r or \n.
void whitespace_or_one(Stretch& p, std::size_t& pos, bool newlines) {
    std::size_t n = 0, last_newline = 0;
    for (; p.flag(pos + n) & kCptWhitespace; ++n)
        if (newlines && (p.cpt(pos + n) == '\r' || p.cpt(pos + n) == '\n')) last_newline = pos + n + 1;
    if (last_newline > 0) pos = last_newline;
    else if (n > 1 && p.cpt(pos + n) != kOutOfRange) pos += n - 1;
    else if (n > 0) pos += n;
    else ++pos;
    p.add(pos);
}

// unicode_regex_split_custom_gpt2.
void split_gpt2(Stretch& p) {
    constexpr std::uint16_t kWsLN = kCptWhitespace | kCptLetter | kCptNumber;
    for (std::size_t pos = p.ini; pos < p.end;) {
        const char32_t cpt = p.cpt(pos);
        if (contraction(p, pos, false)) continue;
        std::uint16_t f2 = cpt == ' ' ? p.flag(pos + 1) : p.flag(pos);
        if (f2 & (kCptLetter | kCptNumber)) {  //  ?\p{L}+ |  ?\p{N}+
            const std::uint16_t kind = f2 & kCptLetter ? kCptLetter : kCptNumber;
            pos += cpt == ' ';
            while (f2 & kind) f2 = p.flag(++pos);
            p.add(pos);
            continue;
        }
        if (!(f2 & kWsLN) && f2) {  //  ?[^\s\p{L}\p{N}]+
            pos += cpt == ' ';
            while (!(f2 & kWsLN) && f2) f2 = p.flag(++pos);
            p.add(pos);
            continue;
        }
        whitespace_or_one(p, pos, false);
    }
}

// unicode_regex_split_custom_llama3 (DIGITS 3), _qwen2 (DIGITS 1) and _qwen35 (MARKS: marks go with
// letters).
void split_llama3(Stretch& p, std::size_t digits, bool marks) {
    const std::uint16_t word = kCptLetter | (marks ? kCptMark : 0);
    const std::uint16_t not_punct = kCptWhitespace | kCptNumber | word;
    for (std::size_t pos = p.ini; pos < p.end;) {
        const char32_t cpt = p.cpt(pos);
        const std::uint16_t flags = p.flag(pos);
        if (contraction(p, pos, true)) continue;
        if (!(cpt == '\r' || cpt == '\n' || (flags & kCptNumber)) && ((flags & word) || (p.flag(pos + 1) & word))) {
            ++pos;  // [^\r\n\p{L}\p{N}]?\p{L}+
            while (p.flag(pos) & word) ++pos;
            p.add(pos);
            continue;
        }
        if (flags & kCptNumber) {  // \p{N}{1,DIGITS}
            for (std::size_t ini = pos; p.flag(pos) & kCptNumber;)
                if (++pos - ini >= digits) p.add(pos), ini = pos;
            p.add(pos);
            continue;
        }
        std::uint16_t f2 = cpt == ' ' ? p.flag(pos + 1) : flags;
        if (!(f2 & not_punct) && flags) {  //  ?[^\s\p{L}\p{N}]+[\r\n]*
            pos += cpt == ' ';
            while (!(f2 & not_punct) && f2) f2 = p.flag(++pos);
            for (char32_t c2 = p.cpt(pos); c2 == '\r' || c2 == '\n';) c2 = p.cpt(++pos);
            p.add(pos);
            continue;
        }
        whitespace_or_one(p, pos, true);
    }
}

// The collapsed classes of unicode_regex_split: an ASCII character as itself, any other whitespace
// as \v, any other character as its category's stand-in (0xD1 N, 0xD2 L, 0xD3 P, 0xD4 M, 0xD5 S).
bool in_punctuation_class(char32_t c, std::uint16_t f, bool backtick) {  // [\p{P}\$\+<=>\^~\|] (and `)
    if (c < 0x80) return c == '`' ? backtick : std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_{|}~").find(static_cast<char>(c)) != std::string_view::npos;
    return !(f & kCptWhitespace) && (f & kCptCategories) == kCptPunctuation;
}
bool in_number_class(char32_t c, std::uint16_t f) {  // \p{N}
    if (c < 0x80) return c >= '0' && c <= '9';
    return !(f & kCptWhitespace) && (f & kCptCategories) == kCptNumber;
}
bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }

// unicode_regex_split_stl: the leftmost matches from each position (MATCH(pos): the end of the
// match at POS, POS when none), each match and each stretch between two a piece.
template <class Match>
void split_matches(Stretch& p, Match&& match) {
    std::size_t gap = p.ini;
    for (std::size_t pos = p.ini; pos < p.end;) {
        const std::size_t to = match(pos);
        if (to == pos) {
            ++pos;
            continue;
        }
        if (pos > gap) p.out.push_back(pos - gap);
        p.out.push_back(to - pos);
        pos = gap = to;
    }
    if (p.end > gap) p.out.push_back(p.end - gap);
}

void split_simple(Stretch& p, LlamaRegex regex) {
    auto run = [&](auto&& in_class) {
        split_matches(p, [&](std::size_t pos) {
            std::size_t to = pos;
            while (to < p.end && in_class(p.cpts[to], p.flags[to])) ++to;
            return to;
        });
    };
    switch (regex) {
        case LlamaRegex::punctuation_runs: return run([](char32_t c, std::uint16_t f) { return in_punctuation_class(c, f, false); });
        case LlamaRegex::falcon_punctuation_runs: return run([](char32_t c, std::uint16_t f) { return in_punctuation_class(c, f, true); });
        case LlamaRegex::number_runs: return run(in_number_class);
        case LlamaRegex::number:
            return split_matches(p, [&](std::size_t pos) { return in_number_class(p.cpts[pos], p.flags[pos]) ? pos + 1 : pos; });
        case LlamaRegex::digit_triples:
            return split_matches(p, [&](std::size_t pos) {
                const bool three = pos + 3 <= p.end && is_ascii_digit(p.cpts[pos]) && is_ascii_digit(p.cpts[pos + 1]) && is_ascii_digit(p.cpts[pos + 2]);
                return three ? pos + 3 : pos;
            });
        default: {  // unicode_regex_split_custom_newlines: runs of \n and of anything else
            for (std::size_t pos = p.ini; pos < p.end;) {
                const bool newline = p.cpts[pos] == '\n';
                const std::size_t start = pos;
                while (pos < p.end && (p.cpts[pos] == '\n') == newline) ++pos;
                p.out.push_back(pos - start);
            }
        }
    }
}

// llama.cpp's names for the pre-tokenizers whose regexes attntrace has, by what they select.
struct PreGroup {
    std::vector<std::string_view> names;
    std::vector<LlamaRegex> regexes;
    bool ignore_merges = false, add_bos = false, no_bos = false;
    std::vector<std::string_view> unclean = {};  // the names whose clean_spaces is false
};

const std::vector<PreGroup>& pre_groups() {
    using R = LlamaRegex;
    static const std::vector<PreGroup> groups = {
        {{"", "default"}, {R::punctuation_runs, R::gpt2, R::number_runs, R::digit_triples}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}, {R::llama3}, true, true},
        {{"dbrx", "smaug-bpe"}, {R::llama3}},
        {{"glm4", "chatglm-bpe"}, {R::llama3}, false, false, true},
        {{"falcon"}, {R::falcon_punctuation_runs, R::gpt2, R::digit_triples}},
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}, {R::number, R::gpt2},
         false, false, false, {"command-r", "smollm"}},
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert",
          "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"},
         {R::gpt2}, false, false, false, {"trillion", "granite-docling"}},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"}, {R::qwen2},
         false, false, false, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"}},
        {{"qwen35"}, {R::qwen35}, false, false, false, {"qwen35"}},
        {{"laguna"}, {R::newline_runs, R::qwen2}, false, false, false, {"laguna"}},
    };
    return groups;
}

// The other names llama.cpp knows (its regexes run on std::regex or on code of their own that
// attntrace does not transcribe).
constexpr std::string_view kUnsupported[] = {
    "minicpm5", "deepseek-llm", "deepseek-coder", "deepseek-v3", "youtu", "jais-2", "gemma4", "granite-embed-multi-311m",
    "sarvam-moe", "whitespace", "poro-chat", "viking", "tekken", "bloom", "gpt3-finnish", "exaone-moe", "chameleon",
    "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe",
    "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan-dense", "joyai-llm", "kimi-k2", "afmoe", "minimax-m2",
};

std::string supported_pre_names() {
    std::string out;
    for (const PreGroup& g : pre_groups())
        for (std::string_view n : g.names)
            if (!n.empty()) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
}

}  // namespace

GgufPre gguf_pre(const std::string& name, const std::string& file) {
    for (const PreGroup& g : pre_groups()) {
        if (std::find(g.names.begin(), g.names.end(), name) == g.names.end()) continue;
        GgufPre pre;
        pre.regexes = g.regexes;
        pre.ignore_merges = g.ignore_merges, pre.add_bos = g.add_bos, pre.no_bos = g.no_bos;
        pre.clean_spaces = std::find(g.unclean.begin(), g.unclean.end(), name) == g.unclean.end();
        return pre;
    }
    const bool known = std::find(std::begin(kUnsupported), std::end(kUnsupported), name) != std::end(kUnsupported);
    throw InputError(file + ": tokenizer.ggml.pre \"" + name + "\" " +
                     (known ? "is not supported" : "is not a pre-tokenizer llama.cpp knows (llama.cpp refuses the file too)") +
                     " (supported: " + supported_pre_names() + ")");
}

std::uint16_t llama_cpt_flags(char32_t c) {
    std::uint16_t f;
    if (c >= 0x2EBF0 && c <= 0x2EE5D) f = kCptLetter;  // CJK Extension I (Unicode 15.1)
    else if ((c >= 0x2FFC && c <= 0x2FFF) || c == 0x31EF) f = kCptSymbol;  // ideographic description characters (15.1)
    else if (c > 0x10FFFF) f = kCptUndefined;
    else f = flags_of_category(category(c));
    return is_whitespace(c) ? f | kCptWhitespace : f;
}

void llama_regex_split(LlamaRegex regex, std::span<const char32_t> cpts, std::span<const std::uint16_t> flags,
                       const std::vector<std::size_t>& offsets, std::vector<std::size_t>& out) {
    out.clear();
    std::size_t start = 0;
    for (const std::size_t n : offsets) {
        Stretch p{cpts, flags, start, start + n, start, out};
        start += n;
        switch (regex) {
            case LlamaRegex::gpt2: split_gpt2(p); break;
            case LlamaRegex::llama3: split_llama3(p, 3, false); break;
            case LlamaRegex::qwen2: split_llama3(p, 1, false); break;
            case LlamaRegex::qwen35: split_llama3(p, 1, true); break;
            default: split_simple(p, regex);
        }
    }
}

std::vector<char32_t> llama_cpts_from_utf8(std::string_view s) {
    std::vector<char32_t> out;
    out.reserve(s.size());
    auto cont = [&](std::size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
    auto byte = [&](std::size_t i) { return char32_t(static_cast<unsigned char>(s[i])); };
    for (std::size_t i = 0; i < s.size();) {
        const char32_t b = byte(i);
        if (b < 0x80) out.push_back(b), i += 1;
        else if ((b & 0xE0) == 0xC0 && cont(i + 1)) out.push_back((b & 0x1F) << 6 | (byte(i + 1) & 0x3F)), i += 2;
        else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2))
            out.push_back((b & 0x0F) << 12 | (byte(i + 1) & 0x3F) << 6 | (byte(i + 2) & 0x3F)), i += 3;
        else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3))
            out.push_back((b & 0x07) << 18 | (byte(i + 1) & 0x3F) << 12 | (byte(i + 2) & 0x3F) << 6 | (byte(i + 3) & 0x3F)), i += 4;
        else out.push_back(0xFFFD), i += 1;
    }
    return out;
}

}  // namespace attntrace::text
