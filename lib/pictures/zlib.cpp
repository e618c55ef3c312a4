#include "zlib.hpp"

#include <zlib.h>

#include <algorithm>

#include "attntrace/tensor/dynamic_library.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

#define ZLIB_SYMBOLS(X) X(crc32) X(compress2) X(compressBound)
struct LibZ {
    ATTNTRACE_SYMBOL_FIELDS(ZLIB_SYMBOLS)
};

LibZ load_zlib() {
    void* handle = open_library("libz.so.1", ATTNTRACE_ZLIB_LIBRARY);
    if (!handle) throw OutputError(std::string("zlib could not be loaded (") + dlerror() + ")");
    LibZ lib;
    const std::string missing = ATTNTRACE_BIND_SYMBOLS(ZLIB_SYMBOLS, handle, lib);
    if (!missing.empty()) throw OutputError("zlib has no symbol " + missing);
    return lib;
}

// The loaded zlib; loads it on the first call (a failed load throws, and the next call tries again).
const LibZ& libz() {
    static const LibZ lib = load_zlib();
    return lib;
}

}  // namespace

std::uint32_t crc32_of(std::string_view bytes) {
    const auto& z = libz();
    uLong crc = z.crc32(0, nullptr, 0);
    const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
    for (std::size_t left = bytes.size(); left > 0;) {  // uInt pieces
        const uInt n = static_cast<uInt>(std::min<std::size_t>(left, std::size_t(1) << 30));
        crc = z.crc32(crc, p, n);
        p += n, left -= n;
    }
    return static_cast<std::uint32_t>(crc);
}

std::string zlib_compress(std::string_view bytes) {
    const auto& z = libz();
    uLongf size = z.compressBound(static_cast<uLong>(bytes.size()));
    std::string out(size, '\0');
    const int status = z.compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                                   reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uLong>(bytes.size()), 9);
    if (status != Z_OK) throw OutputError("zlib could not compress (status " + std::to_string(status) + ")");
    out.resize(size);
    return out;
}

}  // namespace attntrace
