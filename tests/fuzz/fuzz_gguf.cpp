// libFuzzer target: any bytes through the GGUF header parser (parse_gguf, the entry every .gguf
// file goes through), then every metadata value rendered (GgufFiles::to_json walks strings and
// nested arrays element by element).
//
// An attntrace::Error is the documented way to reject an input. Anything else is a bug and must
// crash: another exception, a sanitizer report, a single allocation past libFuzzer's
// -malloc_limit_mb (a count the file cannot hold), or a tensor whose bytes leave the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attntrace/io/gguf.hpp"
#include "attntrace/tensor/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    attntrace::GgufHeader header;
    try {
        header = attntrace::parse_gguf(bytes, "fuzz");
    } catch (const attntrace::Error&) {
        return 0;
    }
    for (const auto& [key, value] : header.metadata) {
        if (key.empty() || value.bytes.data() < bytes.data() || value.bytes.data() + value.bytes.size() > bytes.data() + size)
            __builtin_trap();
        (void)attntrace::GgufFiles::to_json(value, 64).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    for (const attntrace::GgufTensor& t : header.tensors)
        if (t.offset > size || t.nbytes > size - t.offset || t.offset % header.alignment != 0) __builtin_trap();
    return 0;
}
