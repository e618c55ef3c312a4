// Normalizers (the library's normalizers/): BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase,
// StripAccents, Strip, Prepend, Replace, Sequence.
#include <algorithm>
#include <cstring>

#include "attntrace/tensor/errors.hpp"
#include "components.hpp"

namespace attntrace::text {
namespace {

constexpr const char* kSupported =
    "BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, Sequence";

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool all_ascii(std::string_view s) {
    for (unsigned char b : s)
        if (b >= 0x80) return false;
    return true;
}

char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Rust's char::to_lowercase when it is one character of the same UTF-8 length; U+0130 (two
// characters) maps to a value no character has, so map_same_length refuses it.
char32_t same_length_lower(char32_t c) {
    if (c < 0x80) return ascii_lower(c);
    if (c == 0x130) return 0xFFFFFFFF;
    std::u32string one;
    append_lowercase(one, c);
    return one[0];
}

void lowercase(NormStr& s) {
    if (map_same_length(s, [](char32_t c) { return same_length_lower(c); })) return;
    map_chars(s, [](char32_t c, std::u32string& out) { append_lowercase(out, c); });
}

// The library's decomposition (unicode-normalization-alignments, which NormalizedString::nfd and
// friends use): each character's full decomposition, its first character replacing it (change 0),
// the rest inserted (1); each run of non-starters then stably sorted by combining class, the changes
// travelling with their characters.
void decompose_aligned(std::string_view s, bool compat, std::vector<Change>& out) {
    struct Item {
        int ccc;
        Change change;
    };
    thread_local std::vector<Item> items;
    thread_local std::u32string parts;
    items.clear();
    std::size_t ready = 0;  // items before this are in canonical order
    auto sort_pending = [&] {  // a stable insertion sort: runs of non-starters are short
        for (std::size_t i = ready + 1; i < items.size(); ++i)
            for (std::size_t k = i; k > ready && items[k - 1].ccc > items[k].ccc; --k) std::swap(items[k - 1], items[k]);
        ready = items.size();
    };
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, len] = decode_utf8(s, i);
        i += len;
        parts.clear();
        decompose_char(c, compat, parts);
        for (std::size_t k = 0; k < parts.size(); ++k) {
            const int ccc = combining_class(parts[k]);
            if (ccc == 0) sort_pending();
            items.push_back({ccc, {parts[k], k == 0 ? 0 : 1}});
        }
    }
    sort_pending();
    for (const Item& it : items) out.push_back(it.change);
}

// The library's canonical composition of decomposed characters (its Recompositions iterator): a
// composite takes the changes of what it joins, minus one.
void recompose_aligned(const std::vector<Change>& in, std::vector<Change>& out) {
    std::optional<Change> composee;
    std::vector<Change> blocked;  // non-starters that did not compose, emitted after the composee
    int last_ccc = 0;             // the combining class of blocked.back()
    for (const Change& ch : in) {
        const int ccc = combining_class(ch.c);
        if (!composee) {
            if (ccc != 0) out.push_back(ch);
            else composee = ch;
            continue;
        }
        const bool is_blocked = !blocked.empty() && last_ccc >= ccc;
        if (!is_blocked)
            if (const char32_t r = compose_pair(composee->c, ch.c)) {
                composee = Change{r, composee->change + ch.change - 1};
                continue;
            }
        if (ccc == 0) {
            out.push_back(*composee);
            out.insert(out.end(), blocked.begin(), blocked.end());
            blocked.clear();
            composee = ch;
            continue;
        }
        blocked.push_back(ch);
        last_ccc = ccc;
    }
    if (composee) out.push_back(*composee);
    out.insert(out.end(), blocked.begin(), blocked.end());
}

// The text in normal form F with the library's alignments. Chunks that run from one character below
// U+0300 (nothing before it can combine with or reorder around it) to the next are normalized
// independently; a chunk already in form F keeps its characters unchanged.
// Whether CHANGES leave OLD as it is: the same characters, each replacing itself.
bool same(std::string_view old, const std::vector<Change>& changes) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < old.size(); ++k) {
        const auto [c, len] = decode_utf8(old, i);
        if (k >= changes.size() || changes[k].c != c || changes[k].change != 0) return false;
        i += len;
    }
    return k == changes.size();
}

// Whether OLD is its own NFD (NFKD with COMPAT): no character decomposes, and the combining
// classes of each run of non-starters are in order already.
bool decomposed_already(std::string_view old, bool compat) {
    int previous = 0;
    for (std::size_t i = 0; i < old.size();) {
        const auto [c, len] = decode_utf8(old, i);
        i += len;
        if (c < 0x80) {
            previous = 0;
            continue;
        }
        const int ccc = combining_class(c);
        if (decomposes(c, compat) || (ccc != 0 && previous > ccc)) return false;
        previous = ccc;
    }
    return true;
}

std::size_t char_length(char lead) {
    const auto b = static_cast<unsigned char>(lead);
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// The text in normal form F with the library's alignments. Chunks that run from one character below
// U+0300 (nothing before it can combine with or reorder around it) to the next are normalized
// independently; a character alone that does not decompose is its own normal form, a chunk that
// comes out the same is left as it is.
// Calls CHUNK(start, end) for each chunk of TEXT that normalization may change: from one character
// below U+0300 (nothing before it can combine with or reorder around it) to the next, ASCII
// characters alone left out.
template <class Chunk>
void for_each_chunk(std::string_view text, Chunk&& chunk) {
    for (std::size_t start = 0; start < text.size();) {
        std::size_t end = start + char_length(text[start]);
        while (end < text.size() && !is_normalization_boundary(static_cast<unsigned char>(text[end]))) end += char_length(text[end]);
        if (!(end == start + 1 && static_cast<unsigned char>(text[start]) < 0x80)) chunk(start, end);
        start = end;
    }
}

// The text in normal form F with the library's alignments, chunk by chunk; a chunk already in
// form F (decomposed already, or one character that does not decompose) is left as it is.
void unicode_normalize(NormStr& s, NormalForm f) {
    const bool compat = f == NormalForm::nfkc || f == NormalForm::nfkd;
    const bool compose = f == NormalForm::nfc || f == NormalForm::nfkc;
    const std::string_view text = s.text;
    std::vector<Change> changes, decomposed;
    Rewrite r(s);
    for_each_chunk(text, [&](std::size_t start, std::size_t end) {
        const std::string_view old = text.substr(start, end - start);
        const bool one = end - start == char_length(text[start]);
        if (compose ? one && !decomposes(decode_utf8(old, 0).first, compat) : decomposed_already(old, compat)) return;
        changes.clear(), decomposed.clear();
        decompose_aligned(old, compat, compose ? decomposed : changes);
        if (compose) recompose_aligned(decomposed, changes);
        if (!same(old, changes)) r.edit(start, end, changes.data(), changes.size());
    });
    r.finish();
}

// S rewritten where EDIT(rewrite, at, c, len) edits its non-ASCII characters; ASCII skipped unread.
template <class Edit>
void rewrite_above_ascii(NormStr& s, Edit&& edit) {
    Rewrite r(s);
    for (std::size_t i = 0; i < s.text.size();) {
        if (static_cast<unsigned char>(s.text[i]) < 0x80) {
            ++i;
            continue;
        }
        const auto [c, len] = decode_utf8(s.text, i);
        edit(r, i, c, len);
        i += len;
    }
    r.finish();
}

// The nonspacing marks (Mn) of S removed (the library's filter).
void remove_marks(NormStr& s) {
    rewrite_above_ascii(s, [](Rewrite& r, std::size_t at, char32_t c, std::size_t len) {
        if (is_mark_nonspacing(c)) r.edit(at, at + len, nullptr, 0, 1);
    });
}

// NFD then the nonspacing marks removed (BertNormalizer's strip_accents), in one rewrite where that
// is the same: marks that the decomposition inserted (change 1) consume nothing, so leaving them
// out changes no other character's alignment. Marks that stand in the text (as "e\u0301" does)
// are removed by a second pass, as the library's filter removes them.
void strip_accents(NormStr& s) {
    if (all_ascii(s.text)) return;
    const std::string_view text = s.text;
    std::vector<Change> changes, kept;
    bool marks_left = false;
    Rewrite r(s);
    for_each_chunk(text, [&](std::size_t start, std::size_t end) {
        const std::string_view old = text.substr(start, end - start);
        if (decomposed_already(old, false)) {  // nothing to decompose; marks in it stay for the second pass
            for (std::size_t i = 0; i < old.size() && !marks_left; i += char_length(old[i]))
                marks_left = is_mark_nonspacing(decode_utf8(old, i).first);
            return;
        }
        changes.clear(), kept.clear();
        decompose_aligned(old, false, changes);
        for (const Change& c : changes) {
            if (!is_mark_nonspacing(c.c)) kept.push_back(c);
            else if (c.change != 1) marks_left = true;
        }
        const std::vector<Change>& now = marks_left ? changes : kept;
        if (!same(old, now)) r.edit(start, end, now.data(), now.size());
    });
    r.finish();
    if (marks_left) remove_marks(s);
}

struct Bert final : Normalizer {
    bool clean_text = true, chinese = true, strip = false, lower = true;
    explicit Bert(Json n) {
        auto flag = [&](const char* name, bool dflt) { Json j = n.get(name); return j.is_null() ? dflt : j.boolean(name); };
        clean_text = flag("clean_text", true);
        chinese = flag("handle_chinese_chars", true);
        lower = flag("lowercase", true);
        strip = flag("strip_accents", lower);
    }
    void normalize(NormStr& s) const override {
        if (one_pass(s)) return;
        if (clean_text) clean(s);
        if (chinese) pad_chinese(s);
        if (strip) strip_accents(s);
        if (lower) lowercase(s);
    }

    // What the four steps make of one character: each keeps (or drops) it on its own and gives
    // every character it writes the character's range, but for NFD's reordering of the marks
    // around one, which matters only where a non-starter survives: a spacing mark (Mc) with a
    // combining class (a virama of some Indic scripts, a few more), COMPLEX. BYTES: the result.
    struct Fate {
        char32_t c = 0xFFFFFFFF;
        std::uint8_t flags = 0, len = 0;
        bool complex = false, same = false;
        char bytes[24];
    };
    std::uint8_t flags() const { return static_cast<std::uint8_t>(1 | clean_text << 1 | chinese << 2 | strip << 3 | lower << 4); }

    Fate fate_of(char32_t c) const {
        Fate f;
        f.c = c, f.flags = flags();
        if (clean_text && (c == 0xFFFD || is_other(c))) return f;  // removed
        std::u32string parts, out, d;
        if (clean_text && is_whitespace(c)) parts.push_back(U' ');
        else if (chinese && is_chinese_char(c)) parts.append(1, U' ').append(1, c).append(1, U' ');
        else parts.push_back(c);
        if (strip) {  // NFD, its nonspacing marks removed
            for (const char32_t p : parts) {
                d.clear();
                if (decomposes(p, false)) decompose_char(p, false, d);
                else d.push_back(p);
                for (const char32_t q : d) {
                    if (is_mark_nonspacing(q)) continue;
                    if (combining_class(q) != 0) return f.complex = true, f;
                    out.push_back(q);
                }
            }
            parts.swap(out), out.clear();
        }
        if (lower) {
            for (const char32_t p : parts) append_lowercase(out, p);
            parts.swap(out);
        }
        for (const char32_t p : parts) {
            if (f.len + 4u > sizeof f.bytes) return f.complex = true, f;
            f.len = static_cast<std::uint8_t>(f.len + encode_utf8(p, f.bytes + f.len));
        }
        f.same = parts.size() == 1 && parts[0] == c;
        return f;
    }

    const Fate& fate(char32_t c) const {
        thread_local std::vector<Fate> cache(4096);  // by the code point's low bits
        Fate& f = cache[c & 4095];
        if (f.c != c || f.flags != flags()) f = fate_of(c);
        return f;
    }

    // The four steps in one rewrite, character by character (ASCII in place where it keeps its
    // length); false, with only ASCII changed in place, at a COMPLEX character: the steps one by one
    // then give the same for the rest and realign that one as the library does.
    bool one_pass(NormStr& s) const {
        Rewrite r(s);
        std::string& t = s.text;
        for (std::size_t i = 0; i < t.size();) {
            const auto b = static_cast<unsigned char>(t[i]);
            if (b >= 0x20 && b < 0x7F && i + 8 <= t.size() && printable8(t.data() + i)) {
                if (lower) lower8(t.data() + i);
                i += 8;
                continue;
            }
            if (b < 0x80) {
                const char32_t m = ascii_fate(b);
                if (m == 0xFFFFFFFF) r.replace_char(i, i + 1, {});
                else t[i] = static_cast<char>(m);
                ++i;
                continue;
            }
            const auto [c, len] = decode_utf8(t, i);
            const Fate& f = fate(c);
            if (f.complex) return false;
            if (!f.same) r.replace_char(i, i + len, std::string_view(f.bytes, f.len));
            i += len;
        }
        r.finish();
        return true;
    }
    // Whether the 8 bytes at P are all printable ASCII (0x20 to 0x7E): all that clean leaves alone.
    static bool printable8(const char* p) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        const std::uint64_t below_space = (w - 0x20 * ones) & ~w & highs, del = ((w ^ 0x7F * ones) - ones) & ~(w ^ 0x7F * ones) & highs;
        return ((w & highs) | below_space | del) == 0;
    }
    // The 8 printable ASCII bytes at P lowercased in place.
    static void lower8(char* p) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        const std::uint64_t upper = ((w + (0x80 - 'A') * ones) ^ (w + (0x7F - 'Z') * ones)) & highs;  // 'A' <= b <= 'Z'
        if (!upper) return;
        w |= upper >> 2;
        std::memcpy(p, &w, 8);
    }
    // An ASCII character's fate: itself, another of the same length, or 0xFFFFFFFF (removed).
    char32_t ascii_fate(char32_t c) const {
        if (clean_text) c = clean_same_length(c);
        return lower && c != 0xFFFFFFFF ? ascii_lower(c) : c;
    }
    // The library's filter (\0, U+FFFD and control characters but \t \n \r removed) then map
    // (whitespace to ' '); in place when nothing is removed and no character changes length.
    static void clean(NormStr& s) {
        if (map_same_length(s, [](char32_t c) { return clean_same_length(c); })) return;
        Rewrite r(s);
        for (std::size_t i = 0; i < s.text.size();) {
            const auto b = static_cast<unsigned char>(s.text[i]);
            if (b < 0x80) {
                if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F) r.edit(i, i + 1, nullptr, 0, 1);
                ++i;
                continue;
            }
            const auto [c, len] = decode_utf8(s.text, i);
            if (c == 0xFFFD || is_other(c)) r.edit(i, i + len, nullptr, 0, 1);
            i += len;
        }
        r.finish();
        if (map_same_length(s, [](char32_t c) { return c < 0x80 ? (is_whitespace(c) ? U' ' : c) : is_whitespace(c) ? 0xFFFFFFFF : c; }))
            return;
        map_chars(s, [](char32_t c, std::u32string& out) { out += is_whitespace(c) ? U' ' : c; });
    }
    // What clean makes of C when it keeps C's length; a value no character has otherwise.
    static char32_t clean_same_length(char32_t c) {
        if (c < 0x80) {
            if (c == '\t' || c == '\n' || c == '\r') return ' ';
            return (c < 0x20 || c == 0x7F) ? 0xFFFFFFFF : c;  // other controls are removed
        }
        return (c == 0xFFFD || is_other(c) || is_whitespace(c)) ? 0xFFFFFFFF : c;
    }
    static void pad_chinese(NormStr& s) {
        rewrite_above_ascii(s, [](Rewrite& r, std::size_t at, char32_t c, std::size_t len) {
            if (!is_chinese_char(c)) return;
            const Change padded[] = {{U' ', 0}, {c, 1}, {U' ', 1}};
            r.edit(at, at + len, padded, 3);
        });
    }
};

struct Unicode final : Normalizer {
    NormalForm form;
    explicit Unicode(NormalForm f) : form(f) {}
    void normalize(NormStr& s) const override { unicode_normalize(s, form); }
};

struct Lowercase final : Normalizer {
    void normalize(NormStr& s) const override { lowercase(s); }
};

struct StripAccents final : Normalizer {
    void normalize(NormStr& s) const override { remove_marks(s); }
};

struct Strip final : Normalizer {
    bool left, right;
    explicit Strip(Json n) : left(n.get("strip_left").boolean("normalizer.strip_left")),
                             right(n.get("strip_right").boolean("normalizer.strip_right")) {}
    void normalize(NormStr& s) const override {
        std::size_t from = 0, to = s.text.size();
        if (right)
            while (to > from) {
                std::size_t k = to - 1;
                while (k > from && (static_cast<unsigned char>(s.text[k]) & 0xC0) == 0x80) --k;
                if (!is_whitespace(decode_utf8(s.text, k).first)) break;
                to = k;
            }
        if (left)
            while (from < to && is_whitespace(decode_utf8(s.text, from).first)) from += utf8_length(decode_utf8(s.text, from).first);
        Rewrite r(s);
        if (from > 0) r.edit(0, from, nullptr, 0, unchanged(std::string_view(s.text).substr(0, from)).size());
        if (to < s.text.size()) r.edit(to, s.text.size(), nullptr, 0, unchanged(std::string_view(s.text).substr(to)).size());
        r.finish();
    }
};

struct Prepend final : Normalizer {
    std::string what;
    explicit Prepend(Json n) : what(n.get("prepend").str("normalizer.prepend")) {}
    void normalize(NormStr& s) const override { prepend(s, what); }
};

struct Replace final : Normalizer {
    std::string literal, content;
    std::optional<Regex> regex;
    explicit Replace(Json n) : content(n.get("content").str("normalizer.content")) {
        Json p = n.get("pattern");
        if (p.has("String")) literal = p.get("String").str("normalizer.pattern.String");
        else regex.emplace(p.get("Regex").str("normalizer.pattern.Regex"), n.file() + ": normalizer Replace");
    }
    void normalize(NormStr& s) const override {
        if (!regex) return replace_all(s, literal, content);
        std::vector<std::pair<std::size_t, std::size_t>> matches;
        regex->find_all(s.text, matches);
        replace_ranges(s, matches, content);
    }
};

struct Sequence final : Normalizer {
    std::vector<std::unique_ptr<Normalizer>> parts;
    explicit Sequence(Json n) {
        Json list = n.get("normalizers");
        for (std::size_t i = 0; i < list.size(); ++i)
            if (auto p = make_normalizer(list[i])) parts.push_back(std::move(p));
    }
    void normalize(NormStr& s) const override {
        for (const auto& p : parts) p->normalize(s);
    }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(Json n) {
    if (n.is_null()) return nullptr;
    const std::string type = type_of(n, "normalizer");
    if (type == "BertNormalizer") return std::make_unique<Bert>(n);
    if (type == "NFC") return std::make_unique<Unicode>(NormalForm::nfc);
    if (type == "NFD") return std::make_unique<Unicode>(NormalForm::nfd);
    if (type == "NFKC") return std::make_unique<Unicode>(NormalForm::nfkc);
    if (type == "NFKD") return std::make_unique<Unicode>(NormalForm::nfkd);
    if (type == "Lowercase") return std::make_unique<Lowercase>();
    if (type == "StripAccents") return std::make_unique<StripAccents>();
    if (type == "Strip") return std::make_unique<Strip>(n);
    if (type == "Prepend") return std::make_unique<Prepend>(n);
    if (type == "Replace") return std::make_unique<Replace>(n);
    if (type == "Sequence") return std::make_unique<Sequence>(n);
    unsupported(n, "normalizer", kSupported);
}

}  // namespace attntrace::text
