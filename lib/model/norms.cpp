// Residual adds fused with the next norm (norms.hpp).
#include "attntrace/model/norms.hpp"

#include <cmath>

#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/vector_math.hpp"

namespace attntrace {

namespace {

// One row of E: x += delta + bias (each optional).
template <class T>
[[gnu::always_inline]] inline void add_row(T* x, const T* delta, const T* bias, std::size_t e) {
    if (delta && bias) {
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) x[i] += delta[i] + bias[i];
    } else if (delta) {
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) x[i] += delta[i];
    } else if (bias) {
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) x[i] += bias[i];
    }
}

// One row: y := LayerNorm(x) or RMSNorm(x).
template <class T>
[[gnu::always_inline]] inline void norm_row(const T* x, T* y, std::size_t e, const NormWeights<T>& n) {
    const T* w = n.weight;
    if (n.kind == NormKind::rms_norm) {
        double sq = 0;
#pragma omp simd reduction(+ : sq)
        for (std::size_t i = 0; i < e; ++i) sq += double(x[i]) * double(x[i]);
        const T inv = T(1.0 / std::sqrt(sq / double(e) + n.eps));
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) y[i] = w[i] * (x[i] * inv);
        return;
    }
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < e; ++i) sum += double(x[i]);
    const double mean = sum / double(e);
    double var = 0;
#pragma omp simd reduction(+ : var)
    for (std::size_t i = 0; i < e; ++i) var += (double(x[i]) - mean) * (double(x[i]) - mean);
    const T inv = T(1.0 / std::sqrt(var / double(e) + n.eps)), m = T(mean);
    if (n.bias) {
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) y[i] = (x[i] - m) * inv * w[i] + n.bias[i];
    } else {
#pragma omp simd
        for (std::size_t i = 0; i < e; ++i) y[i] = (x[i] - m) * inv * w[i];
    }
}

template <class T>
[[gnu::always_inline]] inline void add_and_norm_rows(T* x, const T* delta, const T* bias, T* y, std::size_t r0,
                                                     std::size_t r1, std::size_t e, const NormWeights<T>& norm) {
    for (std::size_t r = r0; r < r1; ++r) {
        T* xr = x + r * e;
        add_row(xr, delta ? delta + r * e : nullptr, bias, e);
        if (!y) continue;
        if (norm.kind == NormKind::none) {
            if (y != x) std::copy(xr, xr + e, y + r * e);
        } else {
            norm_row(xr, y + r * e, e, norm);
        }
    }
}

ATTNTRACE_CLONES void rows_f(float* x, const float* delta, const float* bias, float* y, std::size_t r0,
                             std::size_t r1, std::size_t e, const NormWeights<float>& norm) {
    add_and_norm_rows(x, delta, bias, y, r0, r1, e, norm);
}

void rows_f(double* x, const double* delta, const double* bias, double* y, std::size_t r0, std::size_t r1,
            std::size_t e, const NormWeights<double>& norm) {
    add_and_norm_rows(x, delta, bias, y, r0, r1, e, norm);
}

}  // namespace

template <class T>
void add_and_norm(T* x, const std::type_identity_t<T>* delta, const std::type_identity_t<T>* bias,
                  std::type_identity_t<T>* y, std::size_t rows, std::size_t e, const NormWeights<T>& norm,
                  std::size_t threads) {
    constexpr std::size_t min_values = 1 << 15;  // below this a block is not worth a thread
    const std::size_t blocks = std::max<std::size_t>(1, std::min(threads, rows * e / min_values));
    const std::size_t per = (rows + blocks - 1) / blocks;
    parallel_for(blocks, blocks, [&](std::size_t b, std::size_t) {
        rows_f(x, delta, bias, y, b * per, std::min(rows, (b + 1) * per), e, norm);
    });
}

template void add_and_norm(float*, const float*, const float*, float*, std::size_t, std::size_t,
                           const NormWeights<float>&, std::size_t);
template void add_and_norm(double*, const double*, const double*, double*, std::size_t, std::size_t,
                           const NormWeights<double>&, std::size_t);

}  // namespace attntrace
