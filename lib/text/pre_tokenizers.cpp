// Pre-tokenizers (the library's pre_tokenizers/): ByteLevel, Split, Metaspace, BertPreTokenizer,
// WhitespaceSplit, Digits, Sequence. Each splits every piece into smaller ones, dropping the empty.
#include <array>
#include <tuple>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "components.hpp"

namespace attntrace::text {
namespace {

constexpr const char* kSupported = "ByteLevel, Split, Metaspace, BertPreTokenizer, WhitespaceSplit, Digits, Sequence";
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// ---- GPT-2's regex, with an ASCII fast path ----------------------------------------------------
// kGpt2Pattern's classes on ASCII bytes: \p{L}, \p{N}, \s (PCRE2 with UCP: space \t \n \v \f \r),
// everything else; kHigh: a byte of a non-ASCII character, which only PCRE2 classifies.
enum Gpt2Class : unsigned char { kOther, kLetter, kDigit, kSpace, kHigh };
constexpr std::array<unsigned char, 256> gpt2_classes() {
    std::array<unsigned char, 256> t{};
    for (int b = 0; b < 256; ++b) {
        const bool letter = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
        const bool space = b == ' ' || (b >= '\t' && b <= '\r');
        t[b] = b >= 0x80 ? kHigh : letter ? kLetter : (b >= '0' && b <= '9') ? kDigit : space ? kSpace : kOther;
    }
    return t;
}
constexpr std::array<unsigned char, 256> kGpt2Class = gpt2_classes();

// The end of kGpt2Pattern's match at AT when every byte deciding it is ASCII, 0 otherwise (PCRE2
// decides then). The alternatives in the pattern's order: a contraction; an optional space and a
// run of letters, digits or other characters; whitespace not followed by a non-space (a run that
// ends the text, or all of a run but its last character), else the whole run.
std::size_t ascii_gpt2_match(std::string_view s, std::size_t at) {
    const std::size_t n = s.size();
    auto cls = [&](std::size_t i) { return kGpt2Class[static_cast<unsigned char>(s[i])]; };
    unsigned char c = cls(at);
    if (c == kHigh) return 0;
    if (s[at] == '\'' && at + 1 < n) {
        const char a = s[at + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return at + 2;
        if (at + 2 < n && ((a == 'r' && s[at + 2] == 'e') || (a == 'v' && s[at + 2] == 'e') || (a == 'l' && s[at + 2] == 'l')))
            return at + 3;
    }
    std::size_t start = at;
    if (s[at] == ' ' && at + 1 < n && cls(at + 1) != kSpace) {
        if (cls(at + 1) == kHigh) return 0;
        start = at + 1, c = cls(at + 1);
    }
    std::size_t j = start + 1;
    while (j < n && cls(j) == c) ++j;
    if (j < n && cls(j) == kHigh) return 0;
    if (c != kSpace || j == n) return j;
    return j - at >= 2 ? j - 1 : j;  // \s+(?!\S) backs off one character, or \s+ takes one
}

// kGpt2Pattern's matches in S (REGEX compiled from it), the ASCII ones found without PCRE2.
template <class Out>
void gpt2_matches(std::string_view s, const Regex& regex, bool fast, Out& out) {
    std::pair<std::size_t, std::size_t> m;
    for (std::size_t at = 0; at < s.size();) {
        if (const std::size_t end = fast ? ascii_gpt2_match(s, at) : 0) {
            out.emplace_back(at, end);
            at = end;
        } else if (regex.find_from(s, at, m)) {
            out.push_back(m);
            at = m.second;
        } else {
            return;
        }
    }
}

// Replaces every piece by the kept ranges FIND gives for its text (relative to the piece).
// The library's split of one piece of N bytes (its SplitDelimiterBehavior): fed the matches in
// order (emplace_back), it keeps them and the stretches between them as behaviour B says, and hands
// each kept range to EMIT, holding back only the one a later range may still merge with.
template <class Emit>
class Splitter {
public:
    Splitter(std::size_t n, Behavior b, bool invert, Emit& emit) : n_(n), b_(b), invert_(invert), emit_(emit) {}
    void emplace_back(std::size_t from, std::size_t to) {
        if (prev_ < from) visit({prev_, from}, invert_);
        visit({from, to}, !invert_);
        prev_ = to;
    }
    void push_back(std::pair<std::size_t, std::size_t> m) { emplace_back(m.first, m.second); }
    void finish() {
        if (prev_ < n_ || n_ == 0) visit({prev_, n_}, invert_);
        if (pending_) hold(waiting_);
        if (held_) emit_(kept_.first, kept_.second);
    }

private:
    using Range = std::pair<std::size_t, std::size_t>;
    void hold(Range r) {
        if (held_) emit_(kept_.first, kept_.second);
        kept_ = r, held_ = true;
    }
    void visit(Range range, bool is_match) {
        if (b_ == Behavior::merged_with_next) {  // a match joins the stretch after it
            if (pending_ && !is_match) range.first = waiting_.first;
            else if (pending_) hold(waiting_);
            pending_ = is_match;
            if (is_match) waiting_ = range;
            else hold(range);
            return;
        }
        if (b_ == Behavior::removed && is_match) return;
        const bool merge = held_ && ((b_ == Behavior::contiguous && is_match == previous_match_) ||
                                     (b_ == Behavior::merged_with_previous && is_match && !previous_match_));
        if (merge) kept_.second = range.second;
        else hold(range);
        previous_match_ = is_match;
    }
    std::size_t n_, prev_ = 0;
    Behavior b_;
    bool invert_, previous_match_ = false;
    Emit& emit_;
    Range kept_{0, 0}, waiting_{0, 0};  // the range held back (HELD_), the match waiting (PENDING_)
    bool held_ = false, pending_ = false;
};

// Replaces every piece by the kept ranges of the matches FIND(text, sink) gives for its text.
template <class Find>
void split_each(Pieces& p, Behavior b, bool invert, Find&& find) {
    Buffer<Piece> out;
    out.reserve(p.pieces.size() * 2);
    for (const Piece& piece : p.pieces) {
        auto emit = [&](std::size_t from, std::size_t to) {
            if (to > from) out.push_back({piece.str, piece.begin + static_cast<std::uint32_t>(from), piece.begin + static_cast<std::uint32_t>(to)});
        };
        Splitter<decltype(emit)> splitter(piece.end - piece.begin, b, invert, emit);
        find(p.text(piece), splitter);
        splitter.finish();
    }
    p.pieces.swap(out);
}

// Every match of REGEX in S, in order, to OUT.
template <class Out>
void regex_matches(const Regex& regex, std::string_view s, Out& out) {
    std::pair<std::size_t, std::size_t> m;
    for (std::size_t at = 0; regex.find_from(s, at, m); at = m.second) out.push_back(m);
}

template <class Out, class Pred>
void char_matches(std::string_view s, Out& out, Pred&& pred) {
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, len] = decode_utf8(s, i);
        if (pred(c)) out.emplace_back(i, i + len);
        i += len;
    }
}

Behavior behavior_of(Json n) {
    const std::string_view b = n.get("behavior").str("pre_tokenizer.behavior");
    if (b == "Removed") return Behavior::removed;
    if (b == "Isolated") return Behavior::isolated;
    if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
    if (b == "MergedWithNext") return Behavior::merged_with_next;
    if (b == "Contiguous") return Behavior::contiguous;
    throw InputError(n.file() + ": pre_tokenizer Split: behavior " + std::string(b) +
                     " is not supported (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

struct ByteLevel final : PreTokenizer {
    bool add_prefix_space, use_regex;
    std::optional<Regex> regex;
    explicit ByteLevel(Json n) {
        Json a = n.get("add_prefix_space"), u = n.get("use_regex");
        add_prefix_space = a.is_null() || a.boolean("add_prefix_space");
        use_regex = u.is_null() || u.boolean("use_regex");
        if (use_regex) regex.emplace(kGpt2Pattern, n.file() + ": pre_tokenizer ByteLevel");
    }
    void pre_tokenize(Pieces& p) const override {
        if (add_prefix_space)
            for (Piece& piece : p.pieces)
                if (p.text(piece)[0] != ' ') {
                    NormStr& own = p.own(piece);
                    prepend(own, " ");
                    piece.end = static_cast<std::uint32_t>(own.text.size());
                }
        if (regex) split_each(p, Behavior::isolated, false, [&](std::string_view s, auto& m) { gpt2_matches(s, *regex, true, m); });
        p.byte_level = true;
    }
};

struct Split final : PreTokenizer {
    std::optional<Regex> regex;
    std::string literal;
    Behavior behavior;
    bool invert;
    explicit Split(Json n) : behavior(behavior_of(n)), invert(!n.get("invert").is_null() && n.get("invert").boolean("invert")) {
        Json p = n.get("pattern");
        if (p.has("String")) literal = p.get("String").str("pre_tokenizer.pattern.String");
        else regex.emplace(p.get("Regex").str("pre_tokenizer.pattern.Regex"), n.file() + ": pre_tokenizer Split");
    }
    void pre_tokenize(Pieces& p) const override {
        split_each(p, behavior, invert, [&](std::string_view s, auto& m) {
            if (regex) return regex_matches(*regex, s, m);
            if (literal.empty()) return;
            for (std::size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
                m.emplace_back(at, at + literal.size());
        });
    }
};

struct Metaspace final : PreTokenizer {
    std::string replacement;
    enum class Scheme { always, first, never } scheme = Scheme::always;
    bool split = true;
    explicit Metaspace(Json n) : replacement(n.get("replacement").str("pre_tokenizer.replacement")) {
        Json s = n.get("prepend_scheme"), a = n.get("add_prefix_space"), sp = n.get("split");
        if (!s.is_null()) {
            const std::string_view v = s.str("pre_tokenizer.prepend_scheme");
            scheme = v == "first" ? Scheme::first : v == "never" ? Scheme::never : Scheme::always;
        }
        if (!a.is_null() && !a.boolean("add_prefix_space")) scheme = Scheme::never;
        split = sp.is_null() || sp.boolean("split");
    }
    void pre_tokenize(Pieces& p) const override {
        for (Piece& piece : p.pieces) {
            NormStr& s = p.own(piece);
            replace_all(s, " ", replacement);
            const bool starts = s.text.compare(0, replacement.size(), replacement) == 0;
            if (!starts && (scheme == Scheme::always || (scheme == Scheme::first && s.original_begin() == 0)))
                prepend(s, replacement);
            piece.end = static_cast<std::uint32_t>(s.text.size());
        }
        if (!split) return;
        const char32_t rep = decode_utf8(replacement, 0).first;
        split_each(p, Behavior::merged_with_next, false,
                   [&](std::string_view s, auto& m) { char_matches(s, m, [&](char32_t c) { return c == rep; }); });
    }
};

// The library's two splits, on whitespace (removed) then on punctuation (isolated), in one pass.
// BertPreTokenizer's classes of ASCII bytes: part of a word, whitespace (a split), punctuation (a
// piece of its own).
constexpr unsigned char kWordByte = 0, kSpaceByte = 1, kPunctByte = 2;
std::array<unsigned char, 128> bert_classes() {
    std::array<unsigned char, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = is_whitespace(c) ? kSpaceByte : is_punctuation(c) ? kPunctByte : kWordByte;
    return t;
}
const std::array<unsigned char, 128> kBertClass = bert_classes();

struct Bert final : PreTokenizer {
    void pre_tokenize(Pieces& p) const override {
        Buffer<Piece> out;  // room for a word every 3 bytes: a 1 MB text's pieces are never copied
        std::size_t bytes = 0;
        for (const Piece& piece : p.pieces) bytes += piece.end - piece.begin;
        out.reserve(std::max(p.pieces.size() + p.pieces.size() / 2, bytes / 3) + 16);
        for (const Piece& piece : p.pieces) split(p.text(piece), piece, out);
        p.pieces.swap(out);
    }

    static void split(std::string_view s, const Piece& piece, Buffer<Piece>& out) {
        std::size_t word = s.size();  // where the word being read began; s.size(): none
        auto emit = [&](std::size_t from, std::size_t to) {
            out.push_back({piece.str, piece.begin + static_cast<std::uint32_t>(from), piece.begin + static_cast<std::uint32_t>(to)});
        };
        for (std::size_t i = 0; i < s.size();) {
            const auto b = static_cast<unsigned char>(s[i]);
            unsigned char k = b < 0x80 ? kBertClass[b] : kWordByte;
            std::size_t len = 1;
            if (b >= 0x80) {
                char32_t c;
                std::tie(c, len) = decode_utf8(s, i);
                k = is_whitespace(c) ? kSpaceByte : is_punctuation(c) ? kPunctByte : kWordByte;
            }
            if (k == kWordByte) {
                if (word == s.size()) word = i;
                for (i += len; i < s.size() && static_cast<unsigned char>(s[i]) < 0x80 && kBertClass[static_cast<unsigned char>(s[i])] == kWordByte;) ++i;
                continue;
            }
            if (word < i) emit(word, i);
            word = s.size();
            if (k == kPunctByte) emit(i, i + len);
            i += len;
        }
        if (word < s.size()) emit(word, s.size());
    }
};

struct WhitespaceSplit final : PreTokenizer {
    void pre_tokenize(Pieces& p) const override {
        split_each(p, Behavior::removed, false, [](std::string_view s, auto& m) { char_matches(s, m, is_whitespace); });
    }
};

struct Digits final : PreTokenizer {
    bool individual;
    explicit Digits(Json n) : individual(!n.get("individual_digits").is_null() && n.get("individual_digits").boolean("individual_digits")) {}
    void pre_tokenize(Pieces& p) const override {
        split_each(p, individual ? Behavior::isolated : Behavior::contiguous, false, [](std::string_view s, auto& m) {
            char_matches(s, m, is_numeric);
        });
    }
};

struct Sequence final : PreTokenizer {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    explicit Sequence(Json n) {
        Json list = n.get("pretokenizers");
        for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_pre_tokenizer(list[i]));
    }
    void pre_tokenize(Pieces& p) const override {
        for (const auto& part : parts) {
            if (p.byte_level) throw InputError("tokenizer.json: pre_tokenizer: a ByteLevel must come last in a Sequence");
            part->pre_tokenize(p);
        }
    }
};

}  // namespace

NormStr& Pieces::own(Piece& p) {
    if (!(p.begin == 0 && p.end == strs[p.str].text.size())) {
        strs.push_back(strs[p.str].slice(p.begin, p.end));
        p = {static_cast<std::uint32_t>(strs.size() - 1), 0, static_cast<std::uint32_t>(strs.back().text.size())};
    }
    return strs[p.str];
}

void split_ranges(std::size_t n, const Ranges& matches, Behavior b, bool invert, Ranges& out) {
    auto emit = [&](std::size_t from, std::size_t to) { out.emplace_back(from, to); };
    Splitter<decltype(emit)> splitter(n, b, invert, emit);
    for (const auto& m : matches) splitter.push_back(m);
    splitter.finish();
}

std::vector<std::pair<std::size_t, std::size_t>> split_ranges(std::size_t n, const Ranges& matches, Behavior b, bool invert) {
    Ranges out;
    split_ranges(n, matches, b, invert, out);
    return out;
}

const std::string& byte_level_char(unsigned char b) {
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        int extra = 0;
        for (int i = 0; i < 256; ++i) {
            const bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            append_utf8(t[i], printable ? char32_t(i) : char32_t(256 + extra++));
        }
        return t;
    }();
    return table[b];
}

int byte_level_byte(char32_t c) {
    static const std::array<int, 324> table = [] {
        std::array<int, 324> t;
        t.fill(-1);
        for (int b = 0; b < 256; ++b) t[decode_utf8(byte_level_char(static_cast<unsigned char>(b)), 0).first] = b;
        return t;
    }();
    return c < table.size() ? table[c] : -1;
}

}  // namespace attntrace::text

namespace attntrace {

std::vector<std::pair<std::size_t, std::size_t>> gpt2_regex_splits(std::string_view text, bool fast) {
    static const text::Regex regex(text::kGpt2Pattern, "GPT-2's pattern");
    text::Ranges out;
    text::gpt2_matches(text, regex, fast, out);
    return out;
}

}  // namespace attntrace

namespace attntrace::text {

std::unique_ptr<PreTokenizer> make_pre_tokenizer(Json n) {
    if (n.is_null()) return nullptr;
    const std::string type = type_of(n, "pre_tokenizer");
    if (type == "ByteLevel") return std::make_unique<ByteLevel>(n);
    if (type == "Split") return std::make_unique<Split>(n);
    if (type == "Metaspace") return std::make_unique<Metaspace>(n);
    if (type == "BertPreTokenizer") return std::make_unique<Bert>();
    if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
    if (type == "Digits") return std::make_unique<Digits>(n);
    if (type == "Sequence") return std::make_unique<Sequence>(n);
    unsupported(n, "pre_tokenizer", kSupported);
}

}  // namespace attntrace::text
