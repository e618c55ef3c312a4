// quantized_gemm's AVX-512 VNNI kernel: ggml_matmul_tile.hpp over 16 lanes, vpdpbusd for the
// 4-byte dot products (the weights made unsigned, q8_0's by + 128), vpdpwssd for the offsets.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ggml_matmul_tile.hpp"

namespace attntrace::ggml {
namespace {

struct Avx512 {
    using I = __m512i;
    using F = __m512;
    static constexpr std::size_t lanes = 16, bytes = 64, mr = 8;
    static constexpr bool offset_q8_0 = true;
    static I izero() { return _mm512_setzero_si512(); }
    static F fzero() { return _mm512_setzero_ps(); }
    static I load(const std::uint8_t* p) { return _mm512_loadu_si512(p); }
    static F loadf(const std::uint8_t* p) { return _mm512_loadu_ps(p); }
    static I set1(std::int32_t v) { return _mm512_set1_epi32(v); }
    static F set1f(float v) { return _mm512_set1_ps(v); }
    static I bcast4(const void* p) {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return _mm512_set1_epi32(v);
    }
    static I dot4(I acc, I w, I a) { return _mm512_dpbusd_epi32(acc, w, a); }
    static I dot4_signed(I acc, I, I) { return acc; }  // unused: q8_0 is offset
    static I dot_pairs(I acc, I pairs, I b) { return _mm512_dpwssd_epi32(acc, pairs, b); }
    static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
    static I add(I a, I b) { return _mm512_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
    static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* p, F v, std::size_t rows) {
        _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << rows) - 1u), v);
    }
};

}  // namespace

std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k) { return tile_pack_bytes<Avx512>(type, k); }

void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
