#include "normalized.hpp"

#include <algorithm>
#include <cstring>

namespace attntrace::text {

namespace {

bool is_continuation(char b) { return (static_cast<unsigned char>(b) & 0xC0) == 0x80; }

// The start of the character around byte I of S, and the end of the one around byte I - 1.
std::size_t char_start(std::string_view s, std::size_t i) {
    while (i > 0 && i < s.size() && is_continuation(s[i])) --i;
    return i;
}
std::size_t char_end(std::string_view s, std::size_t i) {
    while (i < s.size() && is_continuation(s[i])) ++i;
    return i;
}

}  // namespace

NormStr NormStr::original(std::string_view whole, std::size_t from, std::size_t to) {
    NormStr s;
    s.text.assign(whole.substr(from, to - from));
    s.base = static_cast<std::uint32_t>(from);
    s.identity = true;
    return s;
}

NormStr NormStr::slice(std::size_t from, std::size_t to) const {
    NormStr s;
    s.text.assign(text, from, to - from);
    if (identity) {
        s.base = static_cast<std::uint32_t>(base + char_start(text, from));
        s.identity = true;
        return s;
    }
    s.align.assign(align.begin() + static_cast<std::ptrdiff_t>(from), align.begin() + static_cast<std::ptrdiff_t>(to));
    s.base = from < to ? align[from].begin : (from < align.size() ? align[from].begin : (align.empty() ? base : align.back().end));
    return s;
}

Span NormStr::original_span(std::size_t from, std::size_t to) const {
    if (from >= to) return {static_cast<std::uint32_t>(base + from), static_cast<std::uint32_t>(base + to)};
    if (identity)
        return {static_cast<std::uint32_t>(base + char_start(text, from)), static_cast<std::uint32_t>(base + char_end(text, to))};
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

std::string& Rewrite::spare_text() {
    thread_local std::string spare;
    return spare;
}

Buffer<Span>& Rewrite::spare_align() {
    thread_local Buffer<Span> spare;
    return spare;
}

void Rewrite::release_spares() {
    std::string().swap(spare_text());
    Buffer<Span>().swap(spare_align());
}

Span Rewrite::old_span(std::size_t i) const {
    if (!s_.identity) return s_.align[i];
    return {static_cast<std::uint32_t>(s_.base + char_start(s_.text, i)), static_cast<std::uint32_t>(s_.base + char_end(s_.text, i + 1))};
}

void Rewrite::keep_until(std::size_t to) {
    text_.append(s_.text, done_, to - done_);
    if (!s_.identity) {
        align_.insert(align_.end(), s_.align.begin() + static_cast<std::ptrdiff_t>(done_), s_.align.begin() + static_cast<std::ptrdiff_t>(to));
    } else {  // each byte aligned with its character, whose length its first byte gives
        std::size_t i = done_;
        if (i < to && is_continuation(s_.text[i])) {  // the rest of a character an edit began in
            const Span a = old_span(i);
            for (; i < to && is_continuation(s_.text[i]); ++i) align_.push_back(a);
        }
        const std::size_t first = align_.size();
        align_.resize(first + (to - i));
        Span* out = align_.data() + first - i;  // out[j]: the alignment of old byte j
        const auto base = s_.base;
        const char* text = s_.text.data();
        while (i < to) {
            const auto b = static_cast<unsigned char>(text[i]);
            if (b < 0x80) {
                out[i] = Span{static_cast<std::uint32_t>(base + i), static_cast<std::uint32_t>(base + i + 1)};
                ++i;
                continue;
            }
            const std::size_t len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            const Span a{static_cast<std::uint32_t>(base + i), static_cast<std::uint32_t>(base + i + len)};
            for (std::size_t k = 0; k < len && i < to; ++k) out[i++] = a;
        }
    }
    done_ = to;
}

void Rewrite::edit(std::size_t from, std::size_t to, const Change* changes, std::size_t count, std::size_t skip) {
    if (!edited_) {
        // the buffers a previous rewrite left (their pages are mapped already: a 1 MB text has
        // 8 MB of alignments, and a normalizer may rewrite it four times)
        text_.swap(spare_text()), align_.swap(spare_align());
        text_.clear(), align_.clear();
        // the text's room to double (BERT pads every CJK character with two spaces: a std::string
        // only touches what it writes), the alignments' an eighth (their block is populated at once)
        text_.reserve(2 * s_.text.size() + count + 64);
        align_.reserve(s_.text.size() + s_.text.size() / 8 + count + 64);
        edited_ = true;
    }
    keep_until(from);
    // The old characters of [FROM, TO), consumed as the changes replace or remove them.
    std::size_t old_at = from;
    auto next_old_len = [&]() -> std::size_t {
        if (old_at >= to) return 0;
        const std::size_t len = utf8_length(decode_utf8(s_.text, old_at).first);
        old_at += len;
        return len;
    };
    for (std::size_t k = 0; k < skip; ++k) next_old_len();
    std::size_t offset = old_at;  // the library's `offset`: where the next old character starts
    const std::size_t n = s_.text.size();
    for (std::size_t k = 0; k < count; ++k) {
        const Change& ch = changes[k];
        Span a;
        if (ch.change > 0) a = offset < 1 ? Span{s_.base, s_.base} : old_span(offset - 1);
        else a = offset < n ? old_span(offset) : (n == 0 ? Span{s_.base, s_.base} : old_span(n - 1));
        std::size_t consumed = ch.change > 0 ? 0 : next_old_len();
        for (int r = 0; r < -ch.change; ++r) consumed += next_old_len();
        offset += consumed;
        const std::size_t before = text_.size();
        append_utf8(text_, ch.c);
        align_.insert(align_.end(), text_.size() - before, a);
    }
    done_ = to;
}

void Rewrite::finish() {
    if (!edited_) return;
    keep_until(s_.text.size());
    s_.text.swap(text_);
    s_.align.swap(align_);
    if (text_.capacity() > spare_text().capacity()) spare_text().swap(text_);
    if (align_.capacity() > spare_align().capacity()) spare_align().swap(align_);
    s_.identity = false;
    edited_ = false;
}

void transform(NormStr& s, std::size_t from, std::size_t to, const std::vector<Change>& changes, std::size_t skip) {
    Rewrite r(s);
    r.edit(from, to, changes.data(), changes.size(), skip);
    r.finish();
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
    // with the last removed one).
    std::vector<Change> changes = unchanged(with);
    for (Change& c : changes) c.change = 1;
    Rewrite r(s);
    for (const auto& [from, to] : matches) {
        std::size_t old_chars = 0;
        for (std::size_t i = from; i < to; i += utf8_length(decode_utf8(s.text, i).first)) ++old_chars;
        r.edit(from, to, changes.data(), changes.size(), old_chars);
    }
    r.finish();
}

void replace_all(NormStr& s, std::string_view what, std::string_view with) {
    if (what.empty()) return;
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    for (std::size_t at = s.text.find(what); at != std::string::npos; at = s.text.find(what, at + what.size()))
        matches.emplace_back(at, at + what.size());
    replace_ranges(s, matches, with);
}

}  // namespace attntrace::text
