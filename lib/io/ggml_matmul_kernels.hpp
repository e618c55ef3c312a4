#pragma once
// What ggml_matmul.cpp (the driver, the activation quantizers, the scalar kernel) and
// ggml_matmul_avx512.cpp (the AVX-512 VNNI kernel) share: the quantized activations, the
// integers of a K super-block, and the kernels' entry points.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml_blocks.hpp"

namespace attntrace::ggml {

inline constexpr std::size_t q8_K_bytes = 292;  // block_q8_K: float d, int8 qs[256], int16 bsums[16]

// M activation rows quantized to the weight type's vec_dot_type (q8_0 or q8_K), in ggml's bytes,
// with what the kernels want of them at hand.
struct QuantizedActs {
    std::uint32_t dot_type = 0;     // ggml_q8_0 or ggml_q8_K
    std::size_t m = 0, k = 0;
    std::size_t row_bytes = 0;      // of one row of dot_type
    std::size_t block = 0;          // 32 or 256 elements
    std::size_t block_bytes = 0;    // 34 (fp16 d, 32 int8) or 292 (float d, 256 int8, 16 int16)
    std::vector<std::uint8_t> bytes;  // (M, row_bytes)
    std::vector<float> d;             // (M, K / block): each block's scale as a float
    std::vector<std::int32_t> sums;   // q8_0: (M, K / 32) each block's quant sum; q8_K: (M, K / 16) its bsums

    // The int8 quants of row J's block B.
    const std::int8_t* qs(std::size_t j, std::size_t b) const {
        const std::size_t head = dot_type == 8 ? 2 : 4;
        return reinterpret_cast<const std::int8_t*>(bytes.data() + j * row_bytes + b * block_bytes + head);
    }
};

// A K super-block as integers (the quants unpacked as the `_generic` vec_dots unpack them into
// aux8): q4_K: Q in 0..15, SCALE and MIN of the 8 sub-blocks of 32; q6_K: Q in -32..31, SCALE of
// the 16 sub-blocks of 16 (no mins).
struct KInts {
    std::int8_t q[qk_k];
    std::int32_t scale[16];
    std::int32_t min[8];
    float d, dmin;
};
void q4_K_ints(const BlockQ4_K& x, KInts& out);
void q6_K_ints(const BlockQ6_K& x, KInts& out);

// Products OUT[j * LDO + i] for the weight rows i in [0, ROWS) (ROWS <= 16) at W (ROW_BYTES
// apart) and every activation row j of ACTS; SCRATCH is the worker's packing buffer.
void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::vector<std::uint8_t>& scratch);

}  // namespace attntrace::ggml
