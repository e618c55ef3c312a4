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

std::size_t char_length(char lead) {
    const auto b = static_cast<unsigned char>(lead);
    return b < 0xE0 ? (b < 0x80 ? 1 : 2) : b < 0xF0 ? 3 : 4;
}

// Appends R to OUT, or lets the last run take its bytes when R continues it (a kept run from the
// next original byte, or a written one from the same range).
void push_run(Buffer<AlignRun>& out, const AlignRun& r) {
    if (!out.empty()) {
        const AlignRun& last = out.back();
        const bool continues = r.end == kKept ? last.end == kKept && r.begin - last.begin == r.at - last.at
                                              : last.begin == r.begin && last.end == r.end;
        if (continues) return;
    }
    out.push_back(r);
}

}  // namespace

NormStr NormStr::original(std::string_view whole, std::size_t from, std::size_t to) {
    NormStr s;
    s.text.assign(whole.substr(from, to - from));
    s.base = static_cast<std::uint32_t>(from);
    return s;
}

NormStr NormStr::slice(std::size_t from, std::size_t to) const {
    NormStr s;
    s.text.assign(text, from, to - from);
    if (runs.empty()) {
        s.base = static_cast<std::uint32_t>(base + char_start(text, from));
        return s;
    }
    s.base = from < text.size() ? span_at(from).begin : (text.empty() ? base : span_at(text.size() - 1).end);
    copy_alignments(*this, from, to, 0, s.runs);
    return s;
}

std::size_t NormStr::run_of(std::size_t i, std::size_t& hint) const {
    const std::size_t n = runs.size();
    std::size_t r = hint < n && runs[hint].at <= i ? hint : 0;
    for (std::size_t steps = 0; r + 1 < n && runs[r + 1].at <= i; ++r) {  // a few runs ahead: walk
        if (++steps == 8) {
            const auto after = std::upper_bound(runs.begin() + static_cast<std::ptrdiff_t>(r), runs.end(), i,
                                                [](std::size_t v, const AlignRun& x) { return v < x.at; });
            r = static_cast<std::size_t>(after - runs.begin()) - 1;
            break;
        }
    }
    hint = r;
    return r;
}

Span NormStr::span_at(std::size_t i, std::size_t& hint) const {
    if (runs.empty()) return {static_cast<std::uint32_t>(base + char_start(text, i)), static_cast<std::uint32_t>(base + char_end(text, i + 1))};
    const AlignRun& r = runs[run_of(i, hint)];
    if (r.end != kKept) return {r.begin, r.end};
    std::size_t lead = i;  // a kept run starts on a character
    while (lead > r.at && is_continuation(text[lead])) --lead;
    const auto b = static_cast<std::uint32_t>(r.begin + (lead - r.at));
    return {b, static_cast<std::uint32_t>(b + char_length(text[lead]))};
}

Span NormStr::original_span(std::size_t from, std::size_t to, std::size_t& hint) const {
    if (from >= to) return {static_cast<std::uint32_t>(base + from), static_cast<std::uint32_t>(base + to)};
    if (runs.empty()) return {static_cast<std::uint32_t>(base + char_start(text, from)), static_cast<std::uint32_t>(base + char_end(text, to))};
    const std::size_t k = run_of(from, hint);
    const AlignRun& r = runs[k];
    const std::size_t next = k + 1 < runs.size() ? runs[k + 1].at : text.size();
    if (r.end == kKept && to <= next && !is_continuation(text[from])) {  // within one kept run: one look-up
        std::size_t lead = to - 1;
        while (lead > from && is_continuation(text[lead])) --lead;
        return {static_cast<std::uint32_t>(r.begin + (from - r.at)), static_cast<std::uint32_t>(r.begin + (lead - r.at) + char_length(text[lead]))};
    }
    return {span_at(from, hint).begin, span_at(to - 1, hint).end};
}

void copy_alignments(const NormStr& s, std::size_t from, std::size_t to, std::size_t out_at, Buffer<AlignRun>& out) {
    for (std::size_t i = from; i < to;) {
        AlignRun r{0, s.base, kKept};  // the run around I and where it ends
        std::size_t end = s.text.size();
        if (!s.runs.empty()) {
            const std::size_t k = s.run_of(i);
            r = s.runs[k];
            if (k + 1 < s.runs.size()) end = s.runs[k + 1].at;
        }
        const auto at = static_cast<std::uint32_t>(out_at + (i - from));
        if (r.end != kKept) {
            push_run(out, {at, r.begin, r.end});
        } else if (is_continuation(s.text[i])) {  // the rest of a character that began before I
            const Span a = s.span_at(i);
            push_run(out, {at, a.begin, a.end});
            while (++i < std::min(end, to) && is_continuation(s.text[i])) {}
            continue;
        } else {
            push_run(out, {at, static_cast<std::uint32_t>(r.begin + (i - r.at)), kKept});
        }
        i = std::min(end, to);
    }
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

Buffer<AlignRun>& Rewrite::spare_runs() {
    thread_local Buffer<AlignRun> spare;
    return spare;
}

void Rewrite::release_spares() {
    std::string().swap(spare_text());
    Buffer<AlignRun>().swap(spare_runs());
}

void Rewrite::keep_until(std::size_t to) {
    copy_alignments(s_, done_, to, text_.size(), runs_);
    text_.append(s_.text, done_, to - done_);
    done_ = to;
}

void Rewrite::start(std::size_t room) {
    // the buffers a previous rewrite left (their pages are mapped already), with the text's room
    // to double (BERT pads every CJK character with two spaces: a std::string only touches what
    // it writes)
    text_.swap(spare_text()), runs_.swap(spare_runs());
    text_.clear(), runs_.clear();
    text_.reserve(2 * s_.text.size() + room + 64);
    edited_ = true;
}

void Rewrite::replace_char(std::size_t from, std::size_t to, std::string_view bytes) {
    if (!edited_) start(bytes.size());
    keep_until(from);
    if (!bytes.empty()) {
        const Span a = s_.span_at(from);
        push_run(runs_, {static_cast<std::uint32_t>(text_.size()), a.begin, a.end});
        text_.append(bytes);
    }
    done_ = to;
}

void Rewrite::edit(std::size_t from, std::size_t to, const Change* changes, std::size_t count, std::size_t skip) {
    if (!edited_) start(count);
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
        if (ch.change > 0) a = offset < 1 ? Span{s_.base, s_.base} : s_.span_at(offset - 1);
        else a = offset < n ? s_.span_at(offset) : (n == 0 ? Span{s_.base, s_.base} : s_.span_at(n - 1));
        std::size_t consumed = ch.change > 0 ? 0 : next_old_len();
        for (int r = 0; r < -ch.change; ++r) consumed += next_old_len();
        offset += consumed;
        push_run(runs_, {static_cast<std::uint32_t>(text_.size()), a.begin, a.end});
        append_utf8(text_, ch.c);
    }
    done_ = to;
}

void Rewrite::finish() {
    if (!edited_) return;
    keep_until(s_.text.size());
    s_.text.swap(text_);
    s_.runs.swap(runs_);
    if (text_.capacity() > spare_text().capacity()) spare_text().swap(text_);
    if (runs_.capacity() > spare_runs().capacity()) spare_runs().swap(runs_);
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
