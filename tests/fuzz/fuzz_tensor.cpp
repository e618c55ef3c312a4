// libFuzzer target: any bytes through parse_tensor, the entry every tensor file goes through
// (.npy or JSON, chosen by the first bytes), and through parse_safetensors (--params files).
//
// An attntrace::Error is the documented way to reject an input. Anything else is a bug and must
// crash: another exception (it escapes and terminates), a sanitizer report, a single allocation
// past libFuzzer's -malloc_limit_mb, or a tensor that does not survive npy_bytes -> parse_npy.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/io/tensor_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        (void)attntrace::parse_safetensors<float>(bytes, "fuzz");
    } catch (const attntrace::Error&) {
    }
    std::optional<attntrace::LoadedTensor<float>> loaded;
    try {
        loaded = attntrace::parse_tensor<float>(bytes, "fuzz");
    } catch (const attntrace::Error&) {
        return 0;
    }
    // Whatever reads must write and read back unchanged, bit for bit (NaN payloads included).
    const attntrace::Array<float>& array = loaded->array;
    const attntrace::Array<float> again = attntrace::parse_npy<float>(attntrace::npy_bytes(array), "again").array;
    if (again.shape() != array.shape() ||
        (array.size() > 0 && std::memcmp(again.data(), array.data(), array.size() * sizeof(float)) != 0)) {
        __builtin_trap();
    }
    return 0;
}
