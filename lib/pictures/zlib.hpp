#pragma once
// zlib, loaded with dlopen on first use (a PNG's tEXt chunk needs its CRC, the HTML report deflates
// the weights it embeds): no run that writes neither maps it.
#include <cstdint>
#include <string>
#include <string_view>

namespace attntrace {

// The CRC-32 of BYTES (PNG's and zlib's). Throws OutputError when zlib cannot be loaded.
std::uint32_t crc32_of(std::string_view bytes);

// BYTES compressed into the zlib format (RFC 1950: what a browser's DecompressionStream("deflate")
// reads), at the best compression. Throws OutputError when zlib cannot be loaded or fails.
std::string zlib_compress(std::string_view bytes);

}  // namespace attntrace
