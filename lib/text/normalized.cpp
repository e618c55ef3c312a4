#include "normalized.hpp"

#include <cstring>

namespace attntrace::text {

NormStr NormStr::original(std::string_view whole, std::size_t from, std::size_t to) {
    NormStr s;
    s.text.assign(whole.substr(from, to - from));
    s.align.resize(to - from);
    s.base = static_cast<std::uint32_t>(from);
    for (std::size_t i = from; i < to;) {
        const std::size_t len = utf8_length(decode_utf8(whole, i).first);
        const Span span{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + len)};
        for (std::size_t k = 0; k < len; ++k) s.align[i - from + k] = span;
        i += len;
    }
    return s;
}

NormStr NormStr::slice(std::size_t from, std::size_t to) const {
    NormStr s;
    s.text.assign(text, from, to - from);
    s.align.assign(align.begin() + static_cast<std::ptrdiff_t>(from), align.begin() + static_cast<std::ptrdiff_t>(to));
    s.base = from < to ? align[from].begin : (from < align.size() ? align[from].begin : (align.empty() ? base : align.back().end));
    return s;
}

Span NormStr::original_span(std::size_t from, std::size_t to) const {
    if (from >= to) return {static_cast<std::uint32_t>(base + from), static_cast<std::uint32_t>(base + to)};
    return {align[from].begin, align[to - 1].end};
}

std::vector<Change> unchanged(std::string_view s) {
    std::vector<Change> out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, len] = decode_utf8(s, i);
        out.push_back({c, 0});
        i += len;
    }
    return out;
}

void transform(NormStr& s, std::size_t from, std::size_t to, const std::vector<Change>& changes, std::size_t skip) {
    // The old characters of [FROM, TO), consumed as CHANGES replace or remove them.
    std::size_t old_at = from;
    auto next_old_len = [&]() -> std::size_t {
        if (old_at >= to) return 0;
        const std::size_t len = utf8_length(decode_utf8(s.text, old_at).first);
        old_at += len;
        return len;
    };
    for (std::size_t k = 0; k < skip; ++k) next_old_len();
    std::size_t offset = old_at;  // the library's `offset`: where the next old character starts
    std::string text;
    std::vector<Span> align;
    text.reserve(to - from + changes.size());
    align.reserve(to - from + changes.size());
    for (const Change& ch : changes) {
        Span a;
        if (ch.change > 0) a = offset < 1 ? Span{s.base, s.base} : s.align[offset - 1];
        else a = offset < s.align.size() ? s.align[offset] : (s.align.empty() ? Span{s.base, s.base} : s.align.back());
        std::size_t consumed = ch.change > 0 ? 0 : next_old_len();
        for (int r = 0; r < -ch.change; ++r) consumed += next_old_len();
        offset += consumed;
        const std::size_t before = text.size();
        append_utf8(text, ch.c);
        align.insert(align.end(), text.size() - before, a);
    }
    s.text.replace(from, to - from, text);
    s.align.erase(s.align.begin() + static_cast<std::ptrdiff_t>(from), s.align.begin() + static_cast<std::ptrdiff_t>(to));
    s.align.insert(s.align.begin() + static_cast<std::ptrdiff_t>(from), align.begin(), align.end());
}

bool map_same_length(NormStr& s, char32_t (*f)(char32_t)) {
    std::string out;
    out.reserve(s.text.size());
    for (std::size_t i = 0; i < s.text.size();) {
        const auto [c, len] = decode_utf8(s.text, i);
        const char32_t m = f(c);
        if (utf8_length(m) != len) return false;
        append_utf8(out, m);
        i += len;
    }
    s.text.swap(out);
    return true;
}

void prepend(NormStr& s, std::string_view what) {
    if (s.text.empty() || what.empty()) return;
    const auto [next, len] = decode_utf8(s.text, 0);
    std::vector<Change> changes;
    bool first = true;
    for (const Change& c : unchanged(what)) {
        changes.push_back({c.c, first ? 0 : 1});
        first = false;
    }
    changes.push_back({next, 1});
    transform(s, 0, len, changes);
}

void replace_ranges(NormStr& s, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                    std::string_view with) {
    // As the library does: the old characters are all removed, the new ones all inserted (aligned
    // with the last removed one). Right to left, so earlier ranges stay where they are.
    std::vector<Change> changes = unchanged(with);
    for (Change& c : changes) c.change = 1;
    for (auto m = matches.rbegin(); m != matches.rend(); ++m) {
        std::size_t old_chars = 0;
        for (std::size_t i = m->first; i < m->second; i += utf8_length(decode_utf8(s.text, i).first)) ++old_chars;
        transform(s, m->first, m->second, changes, old_chars);
    }
}

void replace_all(NormStr& s, std::string_view what, std::string_view with) {
    if (what.empty()) return;
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    for (std::size_t at = s.text.find(what); at != std::string::npos; at = s.text.find(what, at + what.size()))
        matches.emplace_back(at, at + what.size());
    replace_ranges(s, matches, with);
}

}  // namespace attntrace::text
