#pragma once
// A float32 product of our own for a layer's weights: Y (rows, out) := X (rows, in) · Wᵀ + beta · Y
// with few rows (a forward's positions) against a large weight, read where it lies, without the
// packing pass OpenBLAS makes over every weight panel (docs/performance.md, "The whole model's
// ceiling"). AMX (weight_gemm_amx.cpp) and AVX-512F kernels (weight_gemm_avx512.cpp) on a CPU that
// has them; elsewhere, or when switched to OpenBLAS, weight_product returns false and the caller
// runs gemm().
#include <cstddef>
#include <string>
#include <type_traits>

#include "attntrace/tensor/gemm.hpp"

namespace attntrace {

// best: the AMX kernel (float32 products at float32 accuracy on the AMX-BF16 unit, each float split
// into three bfloat16: weight_gemm_amx.cpp) where the CPU and Linux allow it and a product has 32
// rows or more; else the AVX-512 kernels where the CPU has AVX-512F and a product has at most 384
// rows (more amortize OpenBLAS's packing, whose sgemm is then the faster); else OpenBLAS. blas:
// always OpenBLAS; avx512: the AVX-512 kernels; amx: the AMX kernel on every product (set_weight_gemm
// refuses either on a CPU without it). A product with beta other than 0 or 1 goes from amx to avx512.
enum class WeightGemm { best, blas, avx512, amx };

// Throws UsageError when this CPU cannot run KERNEL.
void set_weight_gemm(WeightGemm kernel);
// The kernel products run now (best resolved: blas, avx512 or amx).
WeightGemm weight_gemm();
// Whether every product weight_product is asked for runs on a kernel of ours, whatever its rows (so
// OpenBLAS need not be loaded for them): amx, avx512 when chosen, and best on an AMD CPU with
// AVX-512F, where the AVX-512 kernel runs at 0.92-0.99x OpenBLAS's own kernels at 4096 rows (docs/performance.md).
bool weight_gemm_every_row();
std::string weight_gemm_name(WeightGemm kernel);
// The kernel named NAME ("best", "blas", "avx512", "amx"), or false when there is none.
bool weight_gemm_named(const std::string& name, WeightGemm& kernel);

// Y (ROWS, OUT) with leading dim LDY := X (ROWS, IN) at LDX · Wᵀ + BETA · Y (BETA 0: Y is not read),
// on this thread. W is (OUT, IN) at LDW, or with CONV1D (GPT-2's Conv1D) (IN, OUT) at LDW.
// Returns false, having done nothing, when the kernels chosen are OpenBLAS's.
bool weight_product(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy);

// Y (ROWS, OUT) at LDY := X (ROWS, IN) at LDX · Wᵀ + beta · Y, W (OUT, IN) at LDW or with CONV1D
// (IN, OUT), on this thread: float32 by our own kernels where they run (tensor/weight_gemm.hpp:
// no packing pass over the weight), else (and float64) by OpenBLAS.
template <class T>
void multiply_weight(const T* x, std::size_t ldx, std::size_t rows, std::size_t in, const T* w, std::size_t ldw,
                     bool conv1d, std::size_t out, T beta, T* y, std::size_t ldy) {
    if constexpr (std::is_same_v<T, float>)
        if (weight_product(x, ldx, rows, in, w, ldw, conv1d, out, beta, y, ldy)) return;
    gemm<T>(false, !conv1d, rows, out, in, T(1), x, ldx, w, ldw, beta, y, ldy);
}

}  // namespace attntrace
