// A GGUF vocabulary's tokenizer at work (src/llama-vocab.cpp at 80fb11ac): llama_vocab::impl::
// tokenize (tokenizer_st_partition, then the SPM or BPE session on each stretch of text) and
// detokenize (token_to_piece, clean_spaces). Offsets are what llama.cpp does not give: the bytes of
// the text each token stands for (an added prefix space none, a byte-fallback token its character).
#include <cstdio>
#include <cstdlib>
#include <queue>

#include "attntrace/tensor/errors.hpp"
#include "gguf_tokenizer.hpp"

namespace attntrace::text {
namespace {

// isspace in the C locale, as tokenizer_st_partition strips around lstrip / rstrip tokens.
bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // "▁", SentencePiece's space

// llm_bigram_spm and its comparator: the top is the highest score, then the leftmost.
struct SpmBigram {
    int left, right;
    float score;
    std::size_t size;
};
struct SpmOrder {
    bool operator()(const SpmBigram& l, const SpmBigram& r) const { return (l.score < r.score) || (l.score == r.score && l.left > r.left); }
};

struct SpmSymbol {
    int prev, next;
    std::uint32_t at, n;  // bytes of the escaped text
};

// unicode_len_utf8: a character's length by its first byte.
std::uint32_t utf8_len_of(char c) {
    static constexpr std::uint8_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[static_cast<unsigned char>(c) >> 4];
}

// llama_vocab::impl::detokenize's clean_spaces passes, as they are written (in place, each reading
// what the one before wrote).
void clean_spaces(std::string& text) {
    std::size_t total = text.size();
    const std::size_t total1 = total;  // " ?", " !", " .", " ,": the space removed
    total = total ? 1 : 0;
    for (std::size_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
        text[total++] = x;
    }
    const std::size_t total2 = total;  // " ' ": both spaces removed
    total = total ? 1 : 0;
    for (std::size_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            --total;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    const std::size_t total3 = total;  // " 's", " 'm", " 're", " 've": the space removed
    total = total ? 1 : 0;
    for (std::size_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') --total;
            else if (i + 2 < total3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e'))) --total;
        }
        text[total++] = x;
    }
    text.resize(total);
}

}  // namespace

std::vector<GgufTokenizer::Fragment> GgufTokenizer::partition(std::string_view text) const {
    std::vector<Fragment> frags, next;
    if (!text.empty()) frags.push_back({0, text.size(), std::nullopt});
    for (const std::uint32_t id : specials_) {  // each token in every stretch of text, longest tokens first
        const std::string& t = tokens_[id];
        next.clear();
        for (const Fragment& f : frags) {
            if (f.token) {
                next.push_back(f);
                continue;
            }
            for (std::size_t off = f.from;;) {
                const std::size_t match = text.substr(0, f.to).find(t, off);
                if (match == std::string_view::npos) {
                    if (f.to > off) next.push_back({off, f.to, std::nullopt});
                    break;
                }
                std::size_t left = match;
                if (attrs_[id] & kAttrLstrip)
                    while (left > off && is_c_space(text[left - 1])) --left;
                if (left > off) next.push_back({off, left, std::nullopt});
                next.push_back({match, match + t.size(), id});
                off = match + t.size();
                if (off >= f.to) break;
                if (attrs_[id] & kAttrRstrip)
                    while (off < f.to && is_c_space(text[off])) ++off;
            }
        }
        frags.swap(next);
    }
    return frags;
}

void GgufTokenizer::encode(std::string_view text, bool add_special, Tokens& out) const {
    auto special = [&](std::optional<std::uint32_t> id, const char* what) {
        if (!id) throw InputError(file_ + ": add_" + what + "_token is set but the vocabulary has no " + what + " token (llama.cpp aborts)");
        out.push_back({*id, {0, 0}, 0, 0});
    };
    const std::vector<Fragment> frags = partition(text);
    if (add_special && add_bos_) special(bos_, "bos");
    bool after_special = true;  // SentencePiece: a space before the text and after each special token
    for (const Fragment& f : frags) {
        if (f.token) {
            out.push_back({*f.token, {static_cast<std::uint32_t>(f.from), static_cast<std::uint32_t>(f.to)}, 0, 0});
            after_special = true;
            continue;
        }
        if (spm_) encode_spm(text, f, add_space_prefix_ && after_special, out);
        else encode_bpe(text, f, out);
        after_special = false;
    }
    if (add_special && add_eos_) special(eos_, "eos");
}

void GgufTokenizer::encode_bpe(std::string_view text, const Fragment& f, Tokens& out) const {
    const std::string_view s = text.substr(f.from, f.to - f.from);
    std::vector<char32_t> cpts;          // (C) the stretch's code points
    std::vector<std::uint32_t> at;       // (C + 1) their first bytes
    std::vector<std::uint16_t> flags;    // (C)
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, len] = decode_utf8(s, i);
        cpts.push_back(c), at.push_back(static_cast<std::uint32_t>(i)), flags.push_back(llama_cpt_flags(c));
        i += len;
    }
    at.push_back(static_cast<std::uint32_t>(s.size()));
    std::vector<std::size_t> offsets{cpts.size()}, cut;
    for (const LlamaRegex r : pre_.regexes) {
        llama_regex_split(r, cpts, flags, offsets, cut);
        offsets.swap(cut);
    }
    std::vector<ModelToken> tokens;
    std::size_t c = 0;
    for (const std::size_t n : offsets) {
        const std::uint32_t from = at[c], to = at[c + n];
        c += n;
        tokens.clear();
        bpe_->tokenize(s.substr(from, to - from), tokens);
        const auto base = static_cast<std::uint32_t>(f.from) + from;
        for (const ModelToken& t : tokens) out.push_back({t.id, {base + t.begin, base + t.end}, 0, 0});
    }
}

void GgufTokenizer::encode_spm(std::string_view text, const Fragment& f, bool prefix, Tokens& out) const {
    // the text llama.cpp tokenizes (" " + stretch when PREFIX, each space as "▁") and, for each of
    // its bytes, the original character it stands for
    std::string s;
    std::vector<Span> src;
    if (prefix) s += kEscapedSpace, src.assign(3, Span{static_cast<std::uint32_t>(f.from), static_cast<std::uint32_t>(f.from)});
    for (std::size_t i = f.from; i < f.to;) {
        const std::size_t len = text[i] == ' ' ? 1 : decode_utf8(text, i).second;
        const Span span{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + len)};
        const std::string_view bytes = text[i] == ' ' ? kEscapedSpace : text.substr(i, len);
        s += bytes;
        src.insert(src.end(), bytes.size(), span);
        i += len;
    }
    std::vector<SpmSymbol> sym;  // llm_tokenizer_spm_session::tokenize
    for (std::uint32_t offs = 0; offs < s.size();) {
        const std::uint32_t n = std::min<std::uint32_t>(utf8_len_of(s[offs]), static_cast<std::uint32_t>(s.size()) - offs);
        const int index = static_cast<int>(sym.size());
        sym.push_back({index - 1, offs + n == s.size() ? -1 : index + 1, offs, n});
        offs += n;
    }
    std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmOrder> queue;
    auto try_add_bigram = [&](int left, int right) {
        if (left == -1 || right == -1) return;
        const SpmSymbol& l = sym[static_cast<std::size_t>(left)];
        const std::size_t size = l.n + sym[static_cast<std::size_t>(right)].n;
        if (const auto id = vocab_.find(std::string_view(s).substr(l.at, size))) queue.push({left, right, scores_[*id], size});
    };
    for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue.empty()) {
        const SpmBigram b = queue.top();
        queue.pop();
        SpmSymbol& l = sym[static_cast<std::size_t>(b.left)];
        SpmSymbol& r = sym[static_cast<std::size_t>(b.right)];
        if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // one side merged since
        l.n += r.n, r.n = 0;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = b.left;
        try_add_bigram(l.prev, b.left);
        try_add_bigram(b.left, l.next);
    }
    for (int i = 0; i != -1 && !sym.empty(); i = sym[static_cast<std::size_t>(i)].next) {  // resegment
        const SpmSymbol& y = sym[static_cast<std::size_t>(i)];
        const Span span{src[y.at].begin, src[y.at + y.n - 1].end};
        if (const auto id = vocab_.find(std::string_view(s).substr(y.at, y.n))) {
            out.push_back({*id, span, 0, 0});
            continue;
        }
        for (std::uint32_t k = 0; k < y.n; ++k) out.push_back({byte_token(static_cast<unsigned char>(s[y.at + k])), span, 0, 0});
    }
}

// llama_vocab::byte_to_token for SentencePiece: "<0xNN>", else the byte itself.
std::uint32_t GgufTokenizer::byte_token(unsigned char b) const {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    if (const auto id = vocab_.find(hex)) return *id;
    const char one = static_cast<char>(b);
    if (const auto id = vocab_.find(std::string_view(&one, 1))) return *id;
    throw InputError(file_ + ": the text needs the byte 0x" + std::string(hex + 3, 2) + ", and the vocabulary has neither " + hex +
                     " nor that byte (llama.cpp fails too)");
}

std::string GgufTokenizer::piece(std::uint32_t id) const {
    const std::uint32_t a = attrs_[id];
    const std::string& t = tokens_[id];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t;
    if (a & kAttrNormal) {
        std::string out;
        if (spm_) {  // llama_unescape_whitespace
            for (std::size_t at = 0;;) {
                const std::size_t hit = t.find(kEscapedSpace, at);
                out.append(t, at, hit - at);
                if (hit == std::string::npos) return out;
                out += ' ';
                at = hit + kEscapedSpace.size();
            }
        }
        for (const char32_t c : llama_cpts_from_utf8(t)) {  // llama_decode_text
            const int b = byte_level_byte(c);
            if (b >= 0) {
                out += static_cast<char>(b);
                continue;
            }
            char bytes[4];
            out += "[UNK_BYTE_0x";
            for (std::size_t k = 0, n = encode_utf8(c, bytes); k < n; ++k) {
                char hex[3];
                std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(bytes[k]));
                out += hex;
            }
            out += t + "]";
        }
        return out;
    }
    if (a & kAttrByte) return std::string(1, static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
    return {};
}

std::string GgufTokenizer::decode(std::span<const std::uint32_t> ids) const {
    std::string text;
    bool remove_space = add_space_prefix_;  // the space SentencePiece put before the text
    for (const std::uint32_t id : ids) {
        const std::string p = piece(id);
        text.append(p, remove_space && !p.empty() && p[0] == ' ' ? 1 : 0);
        remove_space = false;
    }
    if (pre_.clean_spaces) clean_spaces(text);
    return text;
}

}  // namespace attntrace::text
