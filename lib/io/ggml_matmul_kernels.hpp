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

// M activation rows quantized to the weight type's vec_dot_type (q8_0, q8_1 or q8_K), in ggml's bytes,
// with what the kernels want of them at hand.
struct QuantizedActs {
    std::uint32_t dot_type = 0;     // ggml_q8_0, ggml_q8_1 or ggml_q8_K
    std::size_t m = 0, k = 0;
    std::size_t row_bytes = 0;      // of one row of dot_type
    std::size_t block = 0;          // 32 or 256 elements
    std::size_t block_bytes = 0;    // 34 (fp16 d, 32 int8), 36 (fp16 d, s, 32 int8) or 292 (float d, 256 int8, 16 int16)
    std::vector<std::uint8_t> bytes;  // (M, row_bytes)
    std::vector<float> d;             // (M, K / block): each block's scale as a float
    std::vector<std::int32_t> sums;   // q8_0, q8_1: (M, K / 32) each block's quant sum; q8_K: (M, K / 16) its bsums
    std::vector<float> s;             // q8_1: (M, K / 32) each block's s (d * quant sum, as fp16 keeps it)
    // The same as plain pointers, for the kernels compiled for an instruction set (which must not
    // instantiate the standard library's code: ggml_blocks.hpp says why).
    const std::uint8_t* bytes_at = nullptr;
    const float* d_at = nullptr;
    const std::int32_t* sums_at = nullptr;
    const float* s_at = nullptr;
    // The AMX kernel's copy of the rows (made when that kernel runs and M >= 16): the quants tile
    // by tile, (ceil(M / 16), K / 32, 16, 32), so that a tile of 16 rows x 32 bytes (a block, or
    // q8_K's sub-block of 32) is 512 contiguous bytes; each row's d per block (and q8_1's s) beside
    // them, (ceil(M / 16), K / BLOCK, 16); q8_K's bsums, (ceil(M / 16), K / 256, 16, 16) int16;
    // the rows past M zero. Null in a view of rows that does not start at a multiple of 16.
    // q8_K's quants (for tile_amx's K4 tiles) are in tiles of 16 rows x 64 bytes instead, (ceil(M /
    // 16), K / 64, 16, 64): TILE_K 64 (a sub-block of 32 is the left or right half of a tile row).
    std::size_t tile_k = 32;
    std::vector<std::int8_t> tiles;
    std::vector<float> tile_d, tile_s;
    std::vector<std::int16_t> tile_bsums;
    const std::int8_t* tiles_at = nullptr;
    const float* tile_d_at = nullptr;
    const float* tile_s_at = nullptr;
    const std::int16_t* tile_bsums_at = nullptr;
};

inline constexpr std::size_t amx_group = 16;  // the activation rows of an AMX tile

namespace {  // a copy in each file, compiled for its instruction set (ggml_blocks.hpp says why)

// The int8 quants of row J's block B of ACTS.
inline const std::int8_t* act_qs(const QuantizedActs& acts, std::size_t j, std::size_t b) {
    const std::size_t head = acts.dot_type == 8 ? 2 : 4;
    return reinterpret_cast<const std::int8_t*>(acts.bytes_at + j * acts.row_bytes + b * acts.block_bytes + head);
}

}  // namespace

// A K super-block as integers (the quants unpacked as the `_generic` vec_dots unpack them into
// aux8): q4_K: Q in 0..15, q5_K: Q in 0..31, each with SCALE and MIN of the 8 sub-blocks of 32;
// q6_K: Q in -32..31, SCALE of the 16 sub-blocks of 16 (no mins).
struct KInts {
    std::int8_t q[qk_k];
    std::int32_t scale[16];
    std::int32_t min[8];
    float d, dmin;
};
// A 32-element block of q8_0, q4_0, q5_0, q4_1 or q5_1 at BLOCK as its 32 integers Q (q8_0:
// -128..127, q4_0: -8..7, q5_0: -16..15, q4_1: 0..15, q5_1: 0..31, as the generic vec_dots take
// them); returns its d, and its m in M (0 for the types without one) when M is not null.
float small_ints(std::uint32_t type, const std::uint8_t* block, std::int8_t* q, float* m = nullptr);

void q4_K_ints(const BlockQ4_K& x, KInts& out);
void q5_K_ints(const BlockQ5_K& x, KInts& out);
// Super-block B of the K-type row at W_ROW as integers.
void k_ints(std::uint32_t type, const std::uint8_t* w_row, std::size_t b, KInts& out);
void q6_K_ints(const BlockQ6_K& x, KInts& out);

// The weights of the task a worker runs after this one (null and 0 when none): a kernel may ask
// them into L2 while it multiplies (tile_amx does), so that its next packing does not wait on memory.
struct Ahead {
    const std::uint8_t* bytes = nullptr;
    std::size_t size = 0;
};

// A SIMD kernel's products of a tile (tile_avx512_vnni, tile_avx2 below).
using TileFn = void (*)(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                        const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead ahead);

// The bytes tile_avx512_vnni (tile_avx2) packs a tile of TYPE into, for rows of K elements.
std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k);
std::size_t tile_avx2_bytes(std::uint32_t type, std::size_t k);
std::size_t tile_amx_bytes(std::uint32_t type, std::size_t k);  // (two halves of 16 rows)

// Products OUT[j * LDO + i] for the weight rows i in [0, ROWS) at W (ROW_BYTES
// apart) and every activation row j of ACTS; PACK is the worker's buffer of
// tile_avx512_vnni_bytes. (The buffer is the caller's: nothing of the standard library's may be
// instantiated in the AVX-512 file, lest the linker give a baseline file its AVX-512 copy.)
void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead ahead);
// The same with AMX tiles for the 32-element types, q4_K and q5_K, ROWS <= 32 (two B tiles of
// 16), ACTS in tiles of 16 rows (QuantizedActs::tiles; without them, and for q6_K, the AVX-512
// VNNI kernel); its buffer is tile_amx_bytes. AHEAD's bytes are asked into L2 a few
// lines at each tile product (the VNNI and AVX2 kernels leave them).
void tile_amx(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
              const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead ahead);
void tile_avx2(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
               const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead ahead);

}  // namespace attntrace::ggml
