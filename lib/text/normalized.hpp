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

namespace attntrace::text {

struct Span {
    std::uint32_t begin = 0, end = 0;
};

struct NormStr {
    std::string text;
    std::vector<Span> align;  // align[i]: the original bytes normalized byte i comes from
    std::uint32_t base = 0;

    // The original text ORIGINAL[FROM, TO) unchanged (absolute offsets FROM..TO).
    static NormStr original(std::string_view whole, std::size_t from, std::size_t to);
    // The normalized bytes [FROM, TO) as a piece of their own.
    NormStr slice(std::size_t from, std::size_t to) const;
    // The original range covered by normalized bytes [FROM, TO) (the library's convert_offsets).
    Span original_span(std::size_t from, std::size_t to) const;
    std::uint32_t original_begin() const { return align.empty() ? base : align.front().begin; }
};

// One character of a transformation, as the library's NormalizedString::transform takes it: the new
// character and CHANGE = 0 (replaces the next old character), 1 (is inserted), -N (replaces the next
// old character and removes the N after it).
struct Change {
    char32_t c;
    int change;
};

// Replaces S[FROM, TO) (normalized bytes) by CHANGES, skipping the first SKIP old characters
// (removed), and realigns exactly as the library does.
void transform(NormStr& s, std::size_t from, std::size_t to, const std::vector<Change>& changes, std::size_t skip = 0);

// The characters of S, with a change of 0 each.
std::vector<Change> unchanged(std::string_view s);

// S with every character F(c) (F returns a u32string, possibly empty): the library's map/filter/
// lowercase pattern. The first character of F(c) replaces c, the rest are inserted; an empty result
// removes c.
template <class F>
void map_chars(NormStr& s, F&& f);

// In-place map where each character keeps its UTF-8 length (alignments unchanged); returns false
// (and changes nothing) when some character would change length.
bool map_same_length(NormStr& s, char32_t (*f)(char32_t));

void prepend(NormStr& s, std::string_view what);
// Every occurrence of WHAT replaced by WITH (the library's NormalizedString::replace).
void replace_all(NormStr& s, std::string_view what, std::string_view with);
// Normalized text MATCHES[i] = (from, to) replaced by WITH.
void replace_ranges(NormStr& s, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                    std::string_view with);

}  // namespace attntrace::text

#include "normalized_impl.hpp"
