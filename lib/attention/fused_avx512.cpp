// The fused attention kernel (fused_kernels.hpp) for AVX-512F: 16 query rows a panel, score tiles
// of 16 keys, context tiles of 16 columns. This file alone is compiled with -mavx512f (and -mfma);
// attend() calls it only on a CPU that has them (fused_attention.cpp).
#if defined(__x86_64__)
#include <immintrin.h>

#include "fused_kernels.hpp"

namespace attntrace::fused {
namespace {

struct Avx512 {
    using V = __m512;
    using Mask = __mmask16;
    static constexpr std::size_t W = 16, NR = 16, NC = 16;

    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float x) { return _mm512_set1_ps(x); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }  // a NaN in A: B
    static Mask greater(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
    static Mask equal(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
    static Mask none() { return 0; }
    static Mask both(Mask a, Mask b) { return a & b; }
    static Mask either(Mask a, Mask b) { return a | b; }
    static Mask and_not(Mask a, Mask b) { return a & static_cast<Mask>(~b); }
    static V select(Mask m, V yes, V no) { return _mm512_mask_blend_ps(m, no, yes); }
    // BEGIN <= KEY < END, lane by lane.
    static Mask allowed(V key, V begin, V end) {
        return _mm512_cmp_ps_mask(begin, key, _CMP_LE_OQ) & _mm512_cmp_ps_mask(key, end, _CMP_LT_OQ);
    }
    static V finite_or_zero(V m) { return select(_mm512_cmp_ps_mask(m, set1(-__builtin_inff()), _CMP_EQ_OQ), zero(), m); }
    static V positive_product(V e, V x) { return _mm512_maskz_mul_ps(greater(e, zero()), e, x); }
    static V select_positive(V l, V yes, V no) { return select(greater(l, zero()), yes, no); }

    // exp(t) for t <= 0, -inf or NaN (the scores less their maximum): the reduction and polynomial
    // of tensor/vector_math.hpp's exp_poly, 2^k by scalef; 0 below -87, NaN stays NaN.
    static V exp(V t) {
        const V c = _mm512_max_ps(t, set1(-87.0f));  // NaN in t: -87, then masked back below
        const V k = _mm512_roundscale_ps(_mm512_mul_ps(c, set1(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        V r = _mm512_fnmadd_ps(k, set1(0.693145752f), c);
        r = _mm512_fnmadd_ps(k, set1(1.42860677e-6f), r);
        V p = set1(1.0f / 720.0f);
        p = fmadd(p, r, set1(1.0f / 120.0f));
        p = fmadd(p, r, set1(1.0f / 24.0f));
        p = fmadd(p, r, set1(1.0f / 6.0f));
        p = fmadd(p, r, set1(0.5f));
        p = fmadd(p, r, set1(1.0f));
        p = fmadd(p, r, set1(1.0f));
        V e = _mm512_scalef_ps(p, k);
        e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(t, set1(-87.0f), _CMP_LT_OQ), zero());
        return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q), t);
    }
};

}  // namespace

std::size_t run_avx512(const Task& task) { return Kernel<Avx512>::run(task); }

void pack_avx512(const float* k, std::size_t ldk, const float* v, std::size_t ldv, std::size_t lk, std::size_t p,
                 std::size_t pv, std::size_t pv_pad, float* kpack, float* vpack) {
    Kernel<Avx512>::pack(k, ldk, v, ldv, lk, p, pv, pv_pad, kpack, vpack);
}

}  // namespace attntrace::fused

#endif  // __x86_64__
