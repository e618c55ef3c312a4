#pragma once
// Telling a file's format from its first bytes: the one sniffer every reader uses (tensor files,
// parameter files, and the stream reader that must decide how much to read).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attntrace {

enum class Sniffed : std::uint8_t {
    npy,          // "\x93NUMPY", or a cut-off part of it (parse_npy says what is missing)
    json,         // optional whitespace, then [ { - a digit, N (NaN) or I (Infinity)
    safetensors,  // 8-byte little-endian header size that fits, then '{'
    empty,        // no bytes at all
    blank,        // only whitespace (so far)
    unknown,      // none of these
};

// The format HEAD (the first bytes of a file, or all of it) shows. FILE_SIZE, when known, bounds
// the safetensors header size; without it the bound is the format's 100,000,000 bytes.
Sniffed sniff_format(std::string_view head, std::optional<std::uint64_t> file_size);

// The first LIMIT bytes as Python prints bytes: b'PK\x03\x04' ("..." after when there are more).
std::string bytes_repr(std::string_view bytes, std::size_t limit);

}  // namespace attntrace
