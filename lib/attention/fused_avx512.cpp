// The fused attention kernel (fused_kernels.hpp) for AVX-512F: 16 query rows a panel, score tiles
// of 16 keys, context tiles of 16 columns. This file alone is compiled with -mavx512f (and -mfma);
// attend() calls it only on a CPU that has them (fused_attention.cpp).
#if defined(__x86_64__)
// GCC 12 takes the intrinsics' own _mm512_undefined_epi32 (a self-initialized variable) inlined into
// the transposes below for an uninitialized read (GCC bug 105593, fixed in GCC 13): not ours.
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "attntrace/tensor/avx512_transpose.hpp"
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

    static void prefetch(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
    // The first N lanes of V at P (N <= 16).
    static void store_n(float* p, V v, std::size_t n) { _mm512_mask_storeu_ps(p, static_cast<Mask>((1u << n) - 1), v); }
    // R[i] lane j := R[j] lane i.
    static void transpose(V (&r)[16]) { weight_kernels::transpose16(r); }

    // exp(t) for t <= 0, -inf or NaN (the scores less their maximum), in 10 vector operations:
    // k = round(t / ln2) by adding and subtracting 1.5 * 2^23, r = t - k ln2 (one FMA; ln2's float
    // error times |k| <= 126 stays below 3e-7 of the result, and only where the result is below
    // 2^-100 of the row's largest), 2^k e^r with e^r a degree-5 polynomial with a relative error of
    // 1.7e-7 on |r| <= ln2 / 2 (a near-minimax fit with p(0) = 1, so the maximum's own weight is
    // exactly 1; tests/bench/exp_fit.py). Keys below -87 (masked ones: -inf) give 0 through
    // scalef's zero mask; a NaN passes through it (the compare is unordered-true) and stays NaN.
    // The exp of tensor/vector_math.hpp (the BLAS kernel's) takes 16 operations for 1.2e-7.
    static V exp(V t) {
        const V magic = set1(12582912.0f);
        const V k = sub(fmadd(t, set1(1.44269504f), magic), magic);
        const V r = _mm512_fnmadd_ps(k, set1(0.693147182f), t);
        V p = set1(0.00829025917f);
        p = fmadd(p, r, set1(0.0418979786f));
        p = fmadd(p, r, set1(0.166676372f));
        p = fmadd(p, r, set1(0.499991506f));
        p = fmadd(p, r, set1(0.999999702f));
        p = fmadd(p, r, set1(1.0f));
        return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(t, set1(-87.0f), _CMP_NLT_UQ), p, k);
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
