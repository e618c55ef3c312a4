#pragma once
// A piece of text as the tokenizers library holds it (its NormalizedString): the normalized bytes
// and, for each of them, the byte range of the original text it comes from. Offsets are absolute
// (into the whole input); BASE is the original offset of the piece's start, for characters inserted
// before everything else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "buffers.hpp"

namespace attntrace::text {

struct Span {
    std::uint32_t begin = 0, end = 0;
};

// A stretch of a NormStr's bytes, from AT to the next run's AT (or the text's end), and where its
// bytes come from. KEPT (END == kKept): characters that stand as they do in the original (byte
// AT + k of the run lies in the character around original byte BEGIN + k, whose length its lead
// byte gives); a kept run starts on a character. Written: every byte comes from [BEGIN, END).
struct AlignRun {
    std::uint32_t at, begin, end;
};
inline constexpr std::uint32_t kKept = ~std::uint32_t(0);

struct NormStr {
    std::string text;
    // The alignments (the library keeps one range a byte) as runs: an unchanged stretch is one
    // entry, a written character one entry (merged with its neighbour when they come from the same
    // range). Empty while IDENTITY: each character still stands where the original's did from BASE
    // on, so byte i comes from the character around base + i (most texts are never realigned).
    Buffer<AlignRun> runs;
    std::uint32_t base = 0;

    // The original text ORIGINAL[FROM, TO) unchanged (absolute offsets FROM..TO).
    static NormStr original(std::string_view whole, std::size_t from, std::size_t to);
    // The normalized bytes [FROM, TO) as a piece of their own.
    NormStr slice(std::size_t from, std::size_t to) const;
    // The original range covered by normalized bytes [FROM, TO) (the library's convert_offsets).
    Span original_span(std::size_t from, std::size_t to) const { return original_span(from, to, hint_); }
    std::uint32_t original_begin() const { return runs.empty() ? base : runs.front().begin; }
    // The original range normalized byte I (< text.size()) comes from.
    Span span_at(std::size_t i) const { return span_at(i, hint_); }
    // The index of the run holding byte I (runs not empty); quick when the bytes asked for move
    // forward, as tokens and rewrites read them.
    std::size_t run_of(std::size_t i) const { return run_of(i, hint_); }
    // The same three with the caller's HINT of the run last found instead of the string's own: two
    // threads reading one NormStr at once (the model's workers) each keep their own.
    Span original_span(std::size_t from, std::size_t to, std::size_t& hint) const;
    Span span_at(std::size_t i, std::size_t& hint) const;
    std::size_t run_of(std::size_t i, std::size_t& hint) const;

private:
    mutable std::size_t hint_ = 0;  // the run last found
};

// Appends the alignments of S's bytes [FROM, TO) to OUT, byte FROM becoming OUT_AT.
void copy_alignments(const NormStr& s, std::size_t from, std::size_t to, std::size_t out_at, Buffer<AlignRun>& out);

// One character of a transformation, as the library's NormalizedString::transform takes it: the new
// character and CHANGE = 0 (replaces the next old character), 1 (is inserted), -N (replaces the next
// old character and removes the N after it).
struct Change {
    char32_t c;
    int change;
};

// The library's NormalizedString::transform, one stretch at a time: each edit replaces old bytes
// [FROM, TO) by CHANGES (the first SKIP old characters removed first) and realigns exactly as the
// library does; what lies between the edits (given left to right) keeps its bytes and alignments.
// finish() puts the new text in place; nothing changes, not even the alignments, without an edit.
class Rewrite {
public:
    explicit Rewrite(NormStr& s) : s_(s) {}
    void edit(std::size_t from, std::size_t to, const Change* changes, std::size_t count, std::size_t skip = 0);
    // Old bytes [FROM, TO), one character, replaced by BYTES (none: removed), each of them from
    // that character's original range: what the library's map, filter and padding make of it.
    void replace_char(std::size_t from, std::size_t to, std::string_view bytes);
    void finish();
    // Gives back the buffers kept for the next rewrite (after a normalizer, so that the pieces and
    // tokens take their populated pages instead of fresh ones).
    static void release_spares();

private:
    static std::string& spare_text();  // the largest buffers a finished rewrite gave back
    static Buffer<AlignRun>& spare_runs();
    void keep_until(std::size_t to);   // old bytes [done_, TO) as they are
    void start(std::size_t room);      // the buffers, at the first edit
    NormStr& s_;
    std::string text_;
    Buffer<AlignRun> runs_;
    std::size_t done_ = 0;
    bool edited_ = false;
};

// One edit: S[FROM, TO) (normalized bytes) replaced by CHANGES, the first SKIP old characters removed.
void transform(NormStr& s, std::size_t from, std::size_t to, const std::vector<Change>& changes, std::size_t skip = 0);

// The characters of S, with a change of 0 each.
std::vector<Change> unchanged(std::string_view s);

// S with every character F(c) (F appends to a u32string, possibly nothing): the library's map,
// filter and lowercase. The first character of F(c) replaces c, the rest are inserted; nothing
// removes c; c alone leaves it (and its alignment) as it is.
template <class F>
void map_chars(NormStr& s, F&& f);

// S with every character F(c) when each keeps its UTF-8 length (alignments unchanged); false,
// and nothing changed, when some character would change length (F returns 0xFFFFFFFF to refuse).
template <class F>
bool map_same_length(NormStr& s, F&& f);

void prepend(NormStr& s, std::string_view what);
// Every occurrence of WHAT replaced by WITH (the library's NormalizedString::replace).
void replace_all(NormStr& s, std::string_view what, std::string_view with);
// Normalized text MATCHES[i] = (from, to) replaced by WITH.
void replace_ranges(NormStr& s, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                    std::string_view with);

}  // namespace attntrace::text

#include "normalized_impl.hpp"
