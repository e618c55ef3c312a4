// quantized_gemm (ggml_matmul.hpp): the activation quantizers as llama.cpp's CPU backend runs
// them on x86 (ggml/src/ggml-cpu/arch/x86/quants.c `quantize_row_q8_0`; ggml-quants.c
// `quantize_row_q8_K_ref`, which x86's quantize_row_q8_K calls), the scalar kernel (ggml-cpu
// quants.c `ggml_vec_dot_q8_0_q8_0_generic`, `_q4_K_q8_K_generic`, `_q6_K_q8_K_generic`, one
// float operation for one), and the driver that spreads tiles of 16 weight rows over the workers.
// Compiled with -ffp-contract=off (lib/CMakeLists.txt): the multiply-adds ggml's build fuses are
// written as std::fma, the others are not fused.
#include "attntrace/io/ggml_matmul.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "attntrace/io/ggml_types.hpp"
#include "attntrace/tensor/amx.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "ggml_matmul_kernels.hpp"
#include "half.hpp"

namespace attntrace {
namespace ggml {

// ggml-quants.c nearest_int: round half to even through the float's mantissa (|fval| <= 2^22).
inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    std::int32_t i;
    std::memcpy(&i, &val, 4);
    return (i & 0x007fffff) - 0x00400000;
}

// The 8 sub-blocks' 6-bit scales and mins and the two super-block scales q4_K and q5_K share.
template <class Block>
void k4_scales(const Block& x, KInts& out) {
    for (std::size_t j = 0; j < 8; ++j) {
        std::uint8_t sc, m;
        scale_min_k4(j, x.scales, sc, m);
        out.scale[j] = sc;
        out.min[j] = m;
    }
    out.d = fp16(x.d);
    out.dmin = fp16(x.dmin);
}

void q4_K_ints(const BlockQ4_K& x, KInts& out) {
    for (std::size_t j = 0; j < qk_k / 64; ++j)
        for (std::size_t l = 0; l < 32; ++l) {
            out.q[64 * j + l] = static_cast<std::int8_t>(x.qs[32 * j + l] & 0xF);
            out.q[64 * j + 32 + l] = static_cast<std::int8_t>(x.qs[32 * j + l] >> 4);
        }
    k4_scales(x, out);
}

// q4_K's unpacking with the fifth bit of each quant from qh (bit 2j for sub-block 2j, 2j + 1 for 2j + 1).
void q5_K_ints(const BlockQ5_K& x, KInts& out) {
    for (std::size_t j = 0; j < qk_k / 64; ++j)
        for (std::size_t l = 0; l < 32; ++l) {
            const int low = x.qs[32 * j + l] & 0xF, high = x.qs[32 * j + l] >> 4;
            out.q[64 * j + l] = static_cast<std::int8_t>(low + ((x.qh[l] >> (2 * j)) & 1) * 16);
            out.q[64 * j + 32 + l] = static_cast<std::int8_t>(high + ((x.qh[l] >> (2 * j + 1)) & 1) * 16);
        }
    k4_scales(x, out);
}

// The 16 nibbles at QS and the fifth bits in QH (4 bytes; none if null) as the block's 32 quants.
void nibbles(const std::uint8_t* qs, const std::uint8_t* qh, int zero, std::int8_t* q) {
    std::uint32_t high = 0;
    if (qh) std::memcpy(&high, qh, 4);
    for (std::size_t l = 0; l < qk / 2; ++l) {
        q[l] = static_cast<std::int8_t>(((qs[l] & 0x0F) | (((high >> l) & 1u) << 4)) - zero);
        q[l + qk / 2] = static_cast<std::int8_t>(((qs[l] >> 4) | (((high >> (l + 16)) & 1u) << 4)) - zero);
    }
}

float small_ints(std::uint32_t type, const std::uint8_t* block, std::int8_t* q, float* m) {
    if (type == ggml_q4_1 || type == ggml_q5_1) {  // d, m, (qh[4],) qs[16]
        if (m) *m = fp16(block + 2);
        nibbles(block + (type == ggml_q5_1 ? 8 : 4), type == ggml_q5_1 ? block + 4 : nullptr, 0, q);
        return fp16(block);
    }
    if (type == ggml_q8_0) {
        std::memcpy(q, block + 2, qk);
    } else if (type == ggml_q4_0) {
        nibbles(block + 2, nullptr, 8, q);
    } else {  // q5_0: d, qh[4], qs[16]
        nibbles(block + 6, block + 2, 16, q);
    }
    if (m) *m = 0;
    return fp16(block);
}

void k_ints(std::uint32_t type, const std::uint8_t* w_row, std::size_t b, KInts& out) {
    if (type == ggml_q4_K) q4_K_ints(reinterpret_cast<const BlockQ4_K*>(w_row)[b], out);
    else if (type == ggml_q5_K) q5_K_ints(reinterpret_cast<const BlockQ5_K*>(w_row)[b], out);
    else q6_K_ints(reinterpret_cast<const BlockQ6_K*>(w_row)[b], out);
}

void q6_K_ints(const BlockQ6_K& x, KInts& out) {
    const std::uint8_t* ql = x.ql;
    const std::uint8_t* qh = x.qh;
    for (std::size_t n = 0; n < qk_k; n += 128, ql += 64, qh += 32)
        for (std::size_t l = 0; l < 32; ++l) {
            out.q[n + l] = static_cast<std::int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            out.q[n + l + 32] = static_cast<std::int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            out.q[n + l + 64] = static_cast<std::int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            out.q[n + l + 96] = static_cast<std::int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    for (std::size_t j = 0; j < 16; ++j) out.scale[j] = x.scales[j];
    out.d = fp16(x.d);
    out.dmin = 0;
}

namespace {

// ggml_vec_dot_q8_0_q8_0_generic, _q5_0_q8_0_generic: sumf += sumi * (d_w * d_a), block by
// block; _q4_0_q8_0_generic: sumf += sumi * d_w * d_a, i.e. (sumi * d_w) * d_a; _q4_1_q8_1 and
// _q5_1_q8_1: sumf += (d_w * d_a) * sumi + m_w * s_a. Each multiply-add fused as the pinned build
// compiles it (vfmadd231ss, vfmadd132ss: GCC contracts them, -ffp-contract=fast).
float dot_small(std::uint32_t type, const std::uint8_t* w_row, const QuantizedActs& acts, std::size_t j) {
    const std::size_t blocks = acts.k / qk, block_bytes = ggml_block_bytes(type);
    float sumf = 0;
    std::int8_t q[qk];
    for (std::size_t b = 0; b < blocks; ++b) {
        float m;
        const float d = small_ints(type, w_row + b * block_bytes, q, &m);
        const std::int8_t* a = act_qs(acts, j, b);
        int sumi = 0;
        for (std::size_t l = 0; l < qk; ++l) sumi += q[l] * a[l];
        const float da = acts.d_at[j * blocks + b];
        if (acts.dot_type == ggml_q8_1)
            sumf += std::fma(d * da, static_cast<float>(sumi), m * acts.s_at[j * blocks + b]);
        else if (type == ggml_q4_0)
            sumf = std::fma(static_cast<float>(sumi) * d, da, sumf);
        else
            sumf = std::fma(static_cast<float>(sumi), d * da, sumf);
    }
    return sumf;
}

// ggml_vec_dot_q4_K_q8_K_generic / _q6_K_q8_K_generic: 8 lanes of integer sums per super-block
// (element l of every group of 8), scaled into 8 float lanes; q4_K's mins subtracted from the
// total super-block by super-block; the lanes added last. Both multiply-adds fused, as the
// pinned build compiles them (vfmadd231ps, vfnmadd231ss).
float dot_K(std::uint32_t type, const std::uint8_t* w_row, const QuantizedActs& acts, std::size_t j) {
    const std::size_t sub = type == ggml_q6_K ? 16 : 32, blocks = acts.k / qk_k;
    float sums[8] = {}, sumf = 0;
    KInts x;
    for (std::size_t i = 0; i < blocks; ++i) {
        k_ints(type, w_row, i, x);
        const std::int8_t* q8 = act_qs(acts, j, i);
        std::int32_t aux32[8] = {};
        for (std::size_t e = 0; e < qk_k; ++e) aux32[e % 8] += x.scale[e / sub] * (q8[e] * x.q[e]);
        const float d = x.d * acts.d_at[j * blocks + i];
        for (std::size_t l = 0; l < 8; ++l) sums[l] = std::fma(d, static_cast<float>(aux32[l]), sums[l]);
        if (type != ggml_q6_K) {  // the mins
            int sumi = 0;
            for (std::size_t s = 0; s < 16; ++s) sumi += acts.sums_at[(j * blocks + i) * 16 + s] * x.min[s / 2];
            sumf = std::fma(-(x.dmin * acts.d_at[j * blocks + i]), static_cast<float>(sumi), sumf);
        }
    }
    for (float s : sums) sumf += s;
    return sumf;
}

void tile_scalar(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                 const QuantizedActs& acts, float* out, std::size_t ldo) {
    for (std::size_t j = 0; j < acts.m; ++j)
        for (std::size_t i = 0; i < rows; ++i)
            out[j * ldo + i] = acts.dot_type != ggml_q8_K ? dot_small(type, w + i * row_bytes, acts, j)
                                                          : dot_K(type, w + i * row_bytes, acts, j);
}

}  // namespace
}  // namespace ggml

namespace {

using ggml::QuantizedActs;

// Whether X[0, N) holds no NaN or infinity. A block that does gets a NaN scale, so every product
// it enters is NaN (ggml's quantizers make finite bytes of it, whatever they happen to be).
bool all_finite(const float* x, std::size_t n) {
    bool finite = true;
    for (std::size_t i = 0; i < n; ++i) finite &= std::isfinite(x[i]);
    return finite;
}

void check_blocks(std::size_t k, std::size_t block, const char* what) {
    if (k % block != 0)
        throw InputError(std::string(what) + ": a row of " + std::to_string(k) +
                         " elements is not a whole number of blocks of " + std::to_string(block));
}


// Whether the AMX kernel will want ACTS' rows in tiles (tile_amx): 16 rows or more.
bool wants_tiles(const QuantizedActs& acts) { return acts.m >= ggml::amx_group && gemm_kernel() == GemmKernel::amx; }

// Row J of ACTS (quantized, its d and s set) copied into ACTS' tiles.
void tile_row(QuantizedActs& acts, std::size_t j) {
    const std::size_t pieces = acts.k / ggml::qk, per = acts.block == ggml::qk ? 0 : 3;  // 32-element pieces; log2 of those per block
    const std::size_t blocks = acts.k / acts.block, head = acts.dot_type == ggml_q8_0 ? 2 : 4;
    const std::size_t g = j / ggml::amx_group, r = j % ggml::amx_group;
    const std::uint8_t* row = acts.bytes.data() + j * acts.row_bytes;
    const std::size_t wide = acts.tile_k == ggml::qk ? 0 : 1;  // log2 of the pieces in a tile row
    std::int8_t* group = acts.tiles.data() + g * pieces * ggml::amx_group * ggml::qk;
    for (std::size_t u = 0; u < pieces; ++u)
        std::memcpy(group + ((u >> wide) * ggml::amx_group + r) * acts.tile_k + (u & wide) * ggml::qk,
                    row + (u >> per) * acts.block_bytes + head + (u & ((1u << per) - 1)) * ggml::qk, ggml::qk);
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t at = (g * blocks + b) * ggml::amx_group + r;
        acts.tile_d[at] = acts.d[j * blocks + b];
        if (!acts.tile_s.empty()) acts.tile_s[at] = acts.s[j * blocks + b];
        if (!acts.tile_bsums.empty())  // q8_K: int16 bsums[16] after the 256 quants
            std::memcpy(acts.tile_bsums.data() + at * 16, row + b * acts.block_bytes + head + ggml::qk_k, 32);
    }
}

// Row J of ACTS quantized from X (K floats), its blocks' d (and s) and quant sums (q8_K: bsums) set.
void quantize_act_row(QuantizedActs& acts, const float* x, std::size_t j) {
    const bool small = acts.dot_type != ggml_q8_K;
    const std::size_t k = acts.k, blocks = k / acts.block, head = acts.dot_type == ggml_q8_0 ? 2 : 4;
    std::uint8_t* row = acts.bytes.data() + j * acts.row_bytes;
    if (acts.dot_type == ggml_q8_0) quantize_row_q8_0(x, row, k);
    else if (acts.dot_type == ggml_q8_1) quantize_row_q8_1(x, row, k);
    else quantize_row_q8_K(x, row, k);
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = row + b * acts.block_bytes;
        if (small) {
            acts.d[j * blocks + b] = ggml::fp16(block);
            if (acts.dot_type == ggml_q8_1) acts.s[j * blocks + b] = ggml::fp16(block + 2);
            std::int32_t sum = 0;
            for (std::size_t l = 0; l < ggml::qk; ++l) sum += static_cast<std::int8_t>(block[head + l]);
            acts.sums[j * blocks + b] = sum;
        } else {
            std::memcpy(&acts.d[j * blocks + b], block, 4);
            std::int16_t bsums[16];
            std::memcpy(bsums, block + head + ggml::qk_k, sizeof bsums);
            std::copy(bsums, bsums + 16, acts.sums.begin() + static_cast<std::ptrdiff_t>((j * blocks + b) * 16));
        }
    }
}

QuantizedActs quantize_acts(std::uint32_t type, const float* a, std::size_t m, std::size_t k, std::size_t threads = 1) {
    QuantizedActs acts;
    acts.dot_type = quantized_dot_type(type);
    const bool small = acts.dot_type != ggml_q8_K;  // blocks of 32: q8_0 (fp16 d), q8_1 (fp16 d, s)
    acts.m = m, acts.k = k;
    acts.block = small ? ggml::qk : ggml::qk_k;
    const std::size_t blocks = k / acts.block;
    acts.block_bytes = ggml_block_bytes(acts.dot_type);
    acts.tile_k = small ? ggml::qk : 2 * ggml::qk;  // q8_K: tile_amx's K4 tiles
    acts.row_bytes = blocks * acts.block_bytes;
    acts.bytes.resize(m * acts.row_bytes);
    acts.d.resize(m * blocks);
    acts.s.resize(acts.dot_type == ggml_q8_1 ? m * blocks : 0);
    acts.sums.resize(m * (small ? blocks : blocks * 16));
    const bool tiled = wants_tiles(acts);
    if (tiled) {  // (ceil(M / 16) * 16, K) quants, (ceil(M / 16) * 16, K / BLOCK) d, s and bsums: the padding rows zero
        const std::size_t padded = (m + ggml::amx_group - 1) / ggml::amx_group * ggml::amx_group;
        acts.tiles.resize(padded * k);
        acts.tile_d.resize(padded * blocks);
        acts.tile_s.resize(acts.s.empty() ? 0 : padded * blocks);
        acts.tile_bsums.resize(small ? 0 : padded * blocks * 16);
    }
    // a group of 16 rows a task (a task a row spent half its time on the shared task counter)
    parallel_for((m + ggml::amx_group - 1) / ggml::amx_group, threads, [&](std::size_t g, std::size_t) {
        for (std::size_t j = g * ggml::amx_group; j < std::min(m, (g + 1) * ggml::amx_group); ++j) {
            quantize_act_row(acts, a + j * k, j);
            if (tiled) tile_row(acts, j);
        }
    });
    acts.bytes_at = acts.bytes.data(), acts.d_at = acts.d.data(), acts.sums_at = acts.sums.data();
    acts.s_at = acts.s.data();
    if (tiled) {
        acts.tiles_at = acts.tiles.data(), acts.tile_d_at = acts.tile_d.data(), acts.tile_s_at = acts.tile_s.data();
        acts.tile_bsums_at = acts.tile_bsums.data();
    }
    return acts;
}

std::atomic<GemmKernel> chosen{GemmKernel::best};

constexpr std::pair<GemmKernel, const char*> kGemmNames[] = {
    {GemmKernel::best, "best"}, {GemmKernel::scalar, "scalar"}, {GemmKernel::avx2, "avx2"},
    {GemmKernel::avx512_vnni, "avx512_vnni"}, {GemmKernel::amx, "amx"}};


}  // namespace

std::uint32_t quantized_dot_type(std::uint32_t type) {
    if (type == ggml_q8_0 || type == ggml_q4_0 || type == ggml_q5_0) return ggml_q8_0;
    if (type == ggml_q4_1 || type == ggml_q5_1) return ggml_q8_1;
    return ggml_q8_K;
}

QuantizedRows quantize_rows(std::uint32_t weight_type, const float* a, std::size_t m, std::size_t k,
                            std::size_t threads) {
    if (!quantized_gemm_supported(weight_type))
        throw InputError("quantized product: ggml type " + ggml_type_name(weight_type) + " is not one it takes");
    check_blocks(k, ggml_block_size(weight_type), "quantized product");
    QuantizedRows rows;
    auto acts = std::make_shared<QuantizedActs>(quantize_acts(weight_type, a, m, k, threads));
    rows.view_ = acts;
    rows.owner_ = std::move(acts);
    return rows;
}

std::uint32_t QuantizedRows::dot_type() const { return view_->dot_type; }
std::size_t QuantizedRows::rows() const { return view_->m; }
std::size_t QuantizedRows::cols() const { return view_->k; }

QuantizedRows QuantizedRows::range(std::size_t r0, std::size_t r1) const {
    const QuantizedActs& a = *view_;
    auto view = std::make_shared<QuantizedActs>();
    view->dot_type = a.dot_type, view->m = r1 - r0, view->k = a.k, view->row_bytes = a.row_bytes;
    view->block = a.block, view->block_bytes = a.block_bytes, view->tile_k = a.tile_k;
    const std::size_t blocks = a.k / a.block, sums = a.dot_type == ggml_q8_K ? blocks * 16 : blocks;
    view->bytes_at = a.bytes_at + r0 * a.row_bytes, view->d_at = a.d_at + r0 * blocks;
    view->sums_at = a.sums_at + r0 * sums, view->s_at = a.dot_type == ggml_q8_1 ? a.s_at + r0 * blocks : a.s_at;
    if (a.tiles_at && r0 % ggml::amx_group == 0) {  // whole tiles: from tile r0 / 16 on
        view->tiles_at = a.tiles_at + r0 * a.k, view->tile_d_at = a.tile_d_at + r0 * blocks;
        view->tile_s_at = a.dot_type == ggml_q8_1 ? a.tile_s_at + r0 * blocks : a.tile_s_at;
        view->tile_bsums_at = a.dot_type == ggml_q8_K ? a.tile_bsums_at + r0 * blocks * 16 : a.tile_bsums_at;
    }
    QuantizedRows out;
    out.owner_ = owner_;
    out.view_ = std::move(view);
    return out;
}

namespace {

// The largest |X[l]| of N floats as its bits: every float's |x| compared as an integer, which orders
// them as floats do; at least 0x7f800000 when one is an infinity or a NaN. (A loop the compiler
// vectorizes, unlike std::max over floats; compiled for AVX-512 and AVX2 too, picked at load:
// integer operations, the same on each.)
#if ATTNTRACE_GGML_X86
[[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
std::uint32_t abs_max_bits(const float* x, std::size_t n) {
    std::uint32_t most = 0;
    for (std::size_t l = 0; l < n; ++l) {
        std::uint32_t bits;
        std::memcpy(&bits, x + l, 4);
        bits &= 0x7fffffffu;
        most = bits > most ? bits : most;
    }
    return most;
}

constexpr std::uint32_t nonfinite_bits = 0x7f800000u;

// ggml's nearest_int of X[l] * SCALE for N floats (|X[l] * SCALE| <= 2^22), each clamped to
// [-128, 127], into Q: the same integers as lrint in the default rounding mode (half to even), in
// a loop the compiler vectorizes (for AVX-512 and AVX2 too: one multiply and one add, not fused
// under -ffp-contract=off, so the same integers on each).
#if ATTNTRACE_GGML_X86
[[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
void scaled_nearest(const float* x, float scale, std::size_t n, std::int8_t* q) {
    for (std::size_t l = 0; l < n; ++l) {
        const float v = x[l] * scale + 12582912.f;
        std::int32_t i;
        std::memcpy(&i, &v, 4);
        i = (i & 0x007fffff) - 0x00400000;
        i = i < -128 ? -128 : i > 127 ? 127 : i;
        q[l] = static_cast<std::int8_t>(i);
    }
}

}  // namespace

void quantize_row_q8_0(const float* x, std::uint8_t* y, std::size_t k) {
    check_blocks(k, ggml::qk, "q8_0 activations");
    for (std::size_t b = 0; b < k / ggml::qk; ++b, x += ggml::qk, y += sizeof(ggml::BlockQ8_0)) {
        const std::uint32_t bits = abs_max_bits(x, ggml::qk);
        float amax;
        std::memcpy(&amax, &bits, 4);
        const bool finite = bits < nonfinite_bits;
        const float id = finite && amax != 0.0f ? 127.f / amax : 0.0f;
        const float d = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
        const std::uint16_t h = float_to_half(d);
        std::memcpy(y, &h, 2);
        std::int8_t q[ggml::qk];  // half to even, as _mm256_round_ps(_MM_ROUND_NEAREST); zeros for a non-finite block
        scaled_nearest(x, id, ggml::qk, q);
        std::memcpy(y + 2, q, ggml::qk);
    }
}

void quantize_row_q8_1(const float* x, std::uint8_t* y, std::size_t k) {
    check_blocks(k, ggml::qk, "q8_1 activations");
    std::uint8_t q8_0[sizeof(ggml::BlockQ8_0)];
    for (std::size_t b = 0; b < k / ggml::qk; ++b, x += ggml::qk, y += 36) {
        quantize_row_q8_0(x, q8_0, ggml::qk);  // the same d and quants
        float amax = 0;
        for (std::size_t l = 0; l < ggml::qk; ++l) amax = std::max(amax, std::fabs(x[l]));
        int sum = 0;
        for (std::size_t l = 0; l < ggml::qk; ++l) sum += static_cast<std::int8_t>(q8_0[2 + l]);
        // s = d * sum with d before its rounding to fp16
        const float d = all_finite(x, ggml::qk) ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
        const std::uint16_t s = float_to_half(d * static_cast<float>(sum));
        std::memcpy(y, q8_0, 2);
        std::memcpy(y + 2, &s, 2);
        std::memcpy(y + 4, q8_0 + 2, ggml::qk);
    }
}

void quantize_row_q8_K(const float* x, std::uint8_t* y, std::size_t k) {
    check_blocks(k, ggml::qk_k, "q8_K activations");
    for (std::size_t b = 0; b < k / ggml::qk_k; ++b, x += ggml::qk_k, y += ggml::q8_K_bytes) {
        const std::uint32_t bits = abs_max_bits(x, ggml::qk_k);
        std::int8_t qs[ggml::qk_k] = {};
        std::int16_t bsums[16] = {};
        float d = 0;
        if (bits != 0 && bits < nonfinite_bits) {
            std::size_t at = 0;  // max: the first value of the largest magnitude, as ggml's strict > keeps it
            for (std::uint32_t v = 0; at + 1 < ggml::qk_k; ++at) {
                std::memcpy(&v, x + at, 4);
                if ((v & 0x7fffffffu) == bits) break;
            }
            const float iscale = -127.f / x[at];
            scaled_nearest(x, iscale, ggml::qk_k, qs);  // (ggml's min(127, .): |iscale x| <= 127, so no other clamp bites)
            for (std::size_t s = 0; s < 16; ++s)
                for (std::size_t l = 0; l < 16; ++l) bsums[s] = static_cast<std::int16_t>(bsums[s] + qs[16 * s + l]);
            d = 1 / iscale;
        }
        if (bits >= nonfinite_bits) d = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(y, &d, 4);
        std::memcpy(y + 4, qs, sizeof qs);
        std::memcpy(y + 4 + sizeof qs, bsums, sizeof bsums);
    }
}

bool quantized_gemm_supported(std::uint32_t type) {
    return type == ggml_q8_0 || type == ggml_q4_0 || type == ggml_q5_0 || type == ggml_q4_1 || type == ggml_q5_1 ||
           type == ggml_q4_K || type == ggml_q5_K || type == ggml_q6_K;
}

namespace {

// OUT (ACTS.m, N) at LDO := ACTS . W(N, K)ᵀ, tiles of 16 weight rows (AMX: 32) spread over the workers.
void multiply(std::uint32_t type, std::string_view w, std::size_t n, std::size_t k, const QuantizedActs& acts,
              float* out, std::size_t ldo, std::size_t threads) {
    const std::size_t row_bytes = ggml_row_bytes(type, k);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(w.data());
    const GemmKernel kernel = gemm_kernel();
    const std::size_t tile = kernel == GemmKernel::amx ? 32 : 16;  // AMX: two B tiles a task (tile_amx)
    const std::size_t workers = std::max<std::size_t>(threads, 1);
#if ATTNTRACE_GGML_X86
    const ggml::TileFn simd = kernel == GemmKernel::amx           ? ggml::tile_amx
                            : kernel == GemmKernel::avx512_vnni ? ggml::tile_avx512_vnni
                            : kernel == GemmKernel::avx2        ? ggml::tile_avx2
                                                                : nullptr;
    const std::size_t pack_bytes = !simd                         ? 0
                                 : kernel == GemmKernel::avx2 ? ggml::tile_avx2_bytes(type, k)
                                 : kernel == GemmKernel::amx  ? ggml::tile_amx_bytes(type, k)
                                                              : ggml::tile_avx512_vnni_bytes(type, k);
#else
    const ggml::TileFn simd = nullptr;
    const std::size_t pack_bytes = 0;
#endif
    // Each worker claims its next task before it runs the one in hand, so that the kernel can ask
    // for the next one's weights while it works (ggml::Ahead); the tasks still go to whichever
    // worker is free. (The kernels do not throw.)
    const std::size_t tasks = (n + tile - 1) / tile;
    if (tasks == 0) return;
    std::atomic<std::size_t> claimed{0};
    run_workers(std::min(workers, tasks), [&](std::size_t) {
        // the thread's packing buffer, kept from product to product (not cleared: the packs write
        // every byte the kernels read)
        thread_local std::vector<std::uint8_t> pack;
        if (pack.size() < pack_bytes) pack.resize(pack_bytes);
        for (std::size_t t = claimed.fetch_add(1, std::memory_order_relaxed); t < tasks;) {
            const std::size_t next = claimed.fetch_add(1, std::memory_order_relaxed);
            const std::size_t i0 = t * tile, rows = std::min(tile, n - i0);
            const ggml::Ahead ahead = next < tasks ? ggml::Ahead{bytes + next * tile * row_bytes, std::min(tile, n - next * tile) * row_bytes}
                                                   : ggml::Ahead{};
            if (simd)
                simd(type, bytes + i0 * row_bytes, row_bytes, rows, acts, out + i0, ldo, pack.data(), ahead);
            else
                ggml::tile_scalar(type, bytes + i0 * row_bytes, row_bytes, rows, acts, out + i0, ldo);
            t = next;
        }
    });
}

}  // namespace

void quantized_gemm(std::uint32_t type, std::string_view w, std::size_t n, std::size_t k, const float* a,
                    std::size_t m, float* out, std::size_t threads) {
    quantized_gemm(type, w, n, k, a, m, out, n, threads);
}

QuantizedMatrix QuantizedMatrix::row_range(std::size_t r0, std::size_t r1) const {
    const std::size_t row = ggml_row_bytes(type, cols);
    return {type, bytes.substr(r0 * row, (r1 - r0) * row), r1 - r0, cols};
}

void quantized_product(const QuantizedMatrix& w, const float* a, std::size_t m, float* y, std::size_t ldy,
                       std::size_t threads) {
    quantized_gemm(w.type, w.bytes, w.rows, w.cols, a, m, y, ldy, threads);
}

void quantized_gemm(std::uint32_t type, std::string_view w, std::size_t n, std::size_t k, const float* a,
                    std::size_t m, float* out, std::size_t ldo, std::size_t threads) {
    if (ldo < n) throw std::logic_error("quantized_gemm: a leading dimension less than N");
    if (!quantized_gemm_supported(type))
        throw InputError("quantized product: ggml type " + ggml_type_name(type) + " is not one it takes (q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K, q6_K)");
    const std::size_t row_bytes = ggml_row_bytes(type, k);
    if (row_bytes != 0 && n > w.size() / row_bytes)
        throw InputError("quantized product: " + std::to_string(n) + " rows of " + std::to_string(k) + " " +
                         ggml_type_name(type) + " need " + std::to_string(row_bytes) + " bytes each, " +
                         std::to_string(w.size()) + " given");
    multiply(type, w, n, k, quantize_acts(type, a, m, k), out, ldo, threads);
}

void quantized_product(const QuantizedMatrix& w, const QuantizedRows& a, float* y, std::size_t ldy,
                       std::size_t threads) {
    if (quantized_dot_type(w.type) != a.dot_type() || w.cols != a.cols())
        throw std::logic_error("quantized_product: activations quantized for another weight");
    const std::size_t row_bytes = ggml_row_bytes(w.type, w.cols);
    if (row_bytes != 0 && w.rows > w.bytes.size() / row_bytes)
        throw InputError("quantized product: " + std::to_string(w.rows) + " rows of " + ggml_type_name(w.type) +
                         " need " + std::to_string(row_bytes) + " bytes each, " + std::to_string(w.bytes.size()) + " given");
    multiply(w.type, w.bytes, w.rows, w.cols, *a.view_, y, ldy, threads);
}


bool gemm_kernel_runs(GemmKernel kernel) {
#if ATTNTRACE_GGML_X86
    __builtin_cpu_init();
    if (kernel == GemmKernel::avx512_vnni)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    if (kernel == GemmKernel::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (kernel == GemmKernel::amx) {
        static const bool amx = amx_usable(AmxFeature::int8);  // asked once: CPUID traps in a VM
        return amx && gemm_kernel_runs(GemmKernel::avx512_vnni);
    }
#endif
    return kernel == GemmKernel::scalar || kernel == GemmKernel::best;
}

void set_gemm_kernel(GemmKernel kernel) {
    if (!gemm_kernel_runs(kernel))
        throw UsageError("quantized product kernel: this CPU cannot run the " + gemm_kernel_name(kernel) + " kernel");
    chosen = kernel;
}

GemmKernel gemm_kernel() {
    const GemmKernel k = chosen;
    if (k != GemmKernel::best) return k;
    for (GemmKernel best : {GemmKernel::amx, GemmKernel::avx512_vnni, GemmKernel::avx2})
        if (gemm_kernel_runs(best)) return best;
    return GemmKernel::scalar;
}

std::string gemm_kernel_name(GemmKernel kernel) {
    for (const auto& [k, name] : kGemmNames)
        if (k == kernel) return name;
    return "";
}

}  // namespace attntrace
