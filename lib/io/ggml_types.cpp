// ggml's type table (llama.cpp ggml/src/ggml.c `type_traits`, ggml/include/ggml.h `enum
// ggml_type`, as built in @node-llama-cpp/linux-x64 3.21.1) and the dispatch of dequantize_row
// to the kernel chosen for this CPU (ggml_blocks.hpp's RowFn of ggml_dequant_*.cpp).
#include "attntrace/io/ggml_types.hpp"

#if ATTNTRACE_GGML_X86
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <limits>
#include <type_traits>
#include <utility>

#include "attntrace/tensor/errors.hpp"
#include "ggml_blocks.hpp"

namespace attntrace {
namespace {

struct TypeRow {
    const char* name;
    std::uint32_t block;  // elements per block; 0: removed, no layout
    std::uint32_t bytes;  // bytes per block
};

// Indexed by type id. Removed ids keep the name ggml.h's comments give them.
constexpr TypeRow kTypes[ggml_type_count] = {
    {"f32", 1, 4},         {"f16", 1, 2},          {"q4_0", 32, 18},       {"q4_1", 32, 20},
    {"q4_2", 0, 0},        {"q4_3", 0, 0},         {"q5_0", 32, 22},       {"q5_1", 32, 24},
    {"q8_0", 32, 34},      {"q8_1", 32, 36},       {"q2_K", 256, 84},      {"q3_K", 256, 110},
    {"q4_K", 256, 144},    {"q5_K", 256, 176},     {"q6_K", 256, 210},     {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66},  {"iq2_xs", 256, 74},    {"iq3_xxs", 256, 98},   {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},    {"iq3_s", 256, 110},    {"iq2_s", 256, 82},     {"iq4_xs", 256, 136},
    {"i8", 1, 1},          {"i16", 1, 2},          {"i32", 1, 4},          {"i64", 1, 8},
    {"f64", 1, 8},         {"iq1_m", 256, 56},     {"bf16", 1, 2},         {"q4_0_4_4", 0, 0},
    {"q4_0_4_8", 0, 0},    {"q4_0_8_8", 0, 0},     {"tq1_0", 256, 54},     {"tq2_0", 256, 66},
    {"iq4_nl_4_4", 0, 0},  {"iq4_nl_4_8", 0, 0},   {"iq4_nl_8_8", 0, 0},   {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},     {"q1_0", 128, 18},      {"q2_0", 64, 18},
};

const TypeRow* row_of(std::uint32_t type) { return type < ggml_type_count ? &kTypes[type] : nullptr; }

std::atomic<GgmlKernel> chosen{GgmlKernel::best};

constexpr std::pair<GgmlKernel, const char*> kKernelNames[] = {
    {GgmlKernel::best, "best"}, {GgmlKernel::scalar, "scalar"}, {GgmlKernel::avx2, "avx2"}};

ggml::RowFn kernel_row(GgmlKernel kernel, std::uint32_t type) {
    ggml::RowFn fn = nullptr;
#if ATTNTRACE_GGML_X86
    if (kernel == GgmlKernel::avx2) fn = ggml::avx2_row(type);
#endif
    return fn ? fn : ggml::scalar_row(type);
}

std::string supported_list() {
    std::string list;
    for (std::uint32_t t = 0; t < ggml_type_count; ++t)
        if (ggml_type_supported(t)) list += (list.empty() ? "" : ", ") + std::string(kTypes[t].name);
    return list;
}

}  // namespace

std::string ggml_type_name(std::uint32_t type) {
    const TypeRow* row = row_of(type);
    if (!row) return "unknown type " + std::to_string(type);
    return row->block ? std::string(row->name) : std::string(row->name) + " (removed)";
}

std::optional<std::uint32_t> ggml_type_named(std::string_view name) {
    for (std::uint32_t t = 0; t < ggml_type_count; ++t)
        if (kTypes[t].block && name == kTypes[t].name) return t;
    return std::nullopt;
}

std::size_t ggml_block_size(std::uint32_t type) { return row_of(type) ? row_of(type)->block : 0; }

std::size_t ggml_block_bytes(std::uint32_t type) { return row_of(type) ? row_of(type)->bytes : 0; }

bool ggml_type_supported(std::uint32_t type) { return ggml::scalar_row(type) != nullptr; }

std::size_t ggml_row_bytes(std::uint32_t type, std::size_t n) {
    const std::size_t block = ggml_block_size(type);
    if (block == 0) throw InputError("ggml type " + ggml_type_name(type) + " has no known layout");
    if (n % block != 0)
        throw InputError("ggml type " + ggml_type_name(type) + ": a row of " + std::to_string(n) +
                         " elements is not a whole number of its blocks of " + std::to_string(block));
    const std::size_t blocks = n / block, bytes = ggml_block_bytes(type);
    if (blocks > std::numeric_limits<std::size_t>::max() / bytes)
        throw InputError("ggml type " + ggml_type_name(type) + ": a row of " + std::to_string(n) +
                         " elements is larger than memory");
    return blocks * bytes;
}

namespace {

void dequantize_floats(std::uint32_t type, std::string_view src, float* dst, std::size_t n) {
    if (!ggml_type_supported(type))
        throw InputError("ggml type " + ggml_type_name(type) + " (" + std::to_string(type) +
                         ") is not one attntrace reads (" + supported_list() + ")");
    const std::size_t bytes = ggml_row_bytes(type, n);
    if (src.size() < bytes)
        throw InputError("ggml type " + ggml_type_name(type) + ": a row of " + std::to_string(n) + " elements needs " +
                         std::to_string(bytes) + " bytes, " + std::to_string(src.size()) + " given");
    const auto* x = reinterpret_cast<const std::uint8_t*>(src.data());
    kernel_row(ggml_kernel(), type)(x, dst, n / ggml_block_size(type));
}

// Through a float buffer of whole super-blocks, widened.
void dequantize_doubles(std::uint32_t type, std::string_view src, double* dst, std::size_t n) {
    constexpr std::size_t chunk = 16 * ggml::qk_k;  // a multiple of every supported block size
    float buffer[chunk];
    const std::size_t block = std::max<std::size_t>(ggml_block_size(type), 1);
    ggml_row_bytes(type, n);  // the checks, before any work
    for (std::size_t done = 0; done < n;) {
        const std::size_t count = std::min(chunk, n - done);
        const std::size_t offset = done / block * ggml_block_bytes(type);
        dequantize_floats(type, src.substr(std::min(offset, src.size())), buffer, count);
        std::copy(buffer, buffer + count, dst + done);
        done += count;
    }
}

}  // namespace

template <class T>
void dequantize_row(std::uint32_t type, std::string_view src, T* dst, std::size_t n) {
    if constexpr (std::is_same_v<T, float>)
        dequantize_floats(type, src, dst, n);
    else
        dequantize_doubles(type, src, dst, n);
}

template void dequantize_row<float>(std::uint32_t, std::string_view, float*, std::size_t);
template void dequantize_row<double>(std::uint32_t, std::string_view, double*, std::size_t);

bool ggml_kernel_runs(GgmlKernel kernel) {
#if ATTNTRACE_GGML_X86
    if (kernel == GgmlKernel::avx2) {
        // asked once: CPUID traps to the hypervisor in a VM (1% of a forward when asked per row)
        static const bool avx2 = [] {
            __builtin_cpu_init();
            unsigned a = 0, b = 0, c = 0, d = 0;  // CPUID 1: ECX bit 29 is F16C (clang 14 has no "f16c" feature name)
            return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        }();
        return avx2;
    }
#endif
    return kernel == GgmlKernel::scalar || kernel == GgmlKernel::best;
}

void set_ggml_kernel(GgmlKernel kernel) {
    if (!ggml_kernel_runs(kernel))
        throw UsageError("ggml kernel: this CPU cannot run the " + ggml_kernel_name(kernel) + " kernels");
    chosen = kernel;
}

GgmlKernel ggml_kernel() {
    const GgmlKernel k = chosen;
    if (k != GgmlKernel::best) return k;
    return ggml_kernel_runs(GgmlKernel::avx2) ? GgmlKernel::avx2 : GgmlKernel::scalar;
}

std::string ggml_kernel_name(GgmlKernel kernel) {
    for (const auto& [k, name] : kKernelNames)
        if (k == kernel) return name;
    return "";
}

}  // namespace attntrace
