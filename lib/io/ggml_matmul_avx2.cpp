// quantized_gemm's AVX2 kernel, for CPUs without AVX-512 VNNI: ggml_matmul_tile.hpp over 8 lanes,
// vpmaddubsw + vpmaddwd for the 4-byte dot products (as ggml's AVX2 vec_dots do: no pair can
// saturate, the weights being at most 63 or, for q8_0, |w| <= 128 against the sign-moved
// activations, |a| <= 127), vpmaddwd for the offsets.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ggml_matmul_tile.hpp"

namespace attntrace::ggml {
namespace {

struct Avx2 {
    using I = __m256i;
    using F = __m256;
    static constexpr std::size_t lanes = 8, bytes = 32, mr = 4;
    static constexpr bool offset_q8_0 = false;  // + 128 could saturate vpmaddubsw
    // (no q8_0 packing of its own: pack_small's loop)
    static bool pack_q8_0(const std::uint8_t*, std::size_t, std::size_t, std::size_t, std::uint8_t*, int) { return false; }
    static bool pack_q4_K(const std::uint8_t*, std::size_t, std::size_t, std::size_t, std::uint8_t*) { return false; }
    static I izero() { return _mm256_setzero_si256(); }
    static F fzero() { return _mm256_setzero_ps(); }
    static I load(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    static F loadf(const std::uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
    static I set1(std::int32_t v) { return _mm256_set1_epi32(v); }
    static F set1f(float v) { return _mm256_set1_ps(v); }
    static I bcast4(const void* p) {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return _mm256_set1_epi32(v);
    }
    static I dot4(I acc, I w, I a) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
    }
    // signed weights: |w| times a with w's sign
    static I dot4_signed(I acc, I w, I a) { return dot4(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)); }
    static I dot_pairs(I acc, I pairs, I b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, b)); }
    static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
    static I add(I a, I b) { return _mm256_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
    static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static void store(float* p, F v, std::size_t rows) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rows)), lane), v);
    }
};

}  // namespace

std::size_t tile_avx2_bytes(std::uint32_t type, std::size_t k) { return tile_pack_bytes<Avx2>(type, k); }

void tile_avx2(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
               const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead) {
    tile<Avx2>(type, w, row_bytes, rows, acts, out, ldo, pack);
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
