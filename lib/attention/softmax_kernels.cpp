// The softmax kernels (see softmax_kernels.hpp). Each float loop is compiled three times
// (AVX-512, AVX2, baseline) and the loader picks the one the CPU runs; `omp simd` (with
// -fopenmp-simd, no OpenMP runtime) lets the reductions vectorize.
#include "softmax_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attntrace/tensor/vector_math.hpp"

namespace attntrace::kernels {

ATTNTRACE_CLONES float row_max(const float* x, std::size_t n) {
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::size_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
    return m;
}

double row_max(const double* x, std::size_t n) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
    return m;
}

// x[j] := exp(x[j] - shift); returns the sum. exp of -inf (a masked score) is exactly 0.
ATTNTRACE_CLONES float exp_shift_sum(float* x, std::size_t n, float shift) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::size_t j = 0; j < n; ++j) {
        const float t = x[j] - shift;
        const float e = exp_poly(t);
        x[j] = e;
        sum += e;
    }
    return sum;
}

double exp_shift_sum(double* x, std::size_t n, double shift) {
    double sum = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        x[j] = std::exp(x[j] - shift);
        sum += x[j];
    }
    return sum;
}

ATTNTRACE_CLONES float exp_shift_sum_dot(float* x, std::size_t n, float shift, float* dot) {
    float sum = 0.0f, acc = 0.0f;
#pragma omp simd reduction(+ : sum, acc)
    for (std::size_t j = 0; j < n; ++j) {
        const float t = x[j] - shift;
        const float e = exp_poly(t);
        x[j] = e;
        sum += e;
        acc += e > 0.0f ? e * t : 0.0f;
    }
    *dot += acc;
    return sum;
}

double exp_shift_sum_dot(double* x, std::size_t n, double shift, double* dot) {
    double sum = 0.0, acc = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const double t = x[j] - shift;
        x[j] = std::exp(t);
        sum += x[j];
        acc += x[j] > 0.0 ? x[j] * t : 0.0;
    }
    *dot += acc;
    return sum;
}

ATTNTRACE_CLONES void scale_row(float* x, std::size_t n, float s) {
#pragma omp simd
    for (std::size_t j = 0; j < n; ++j) x[j] *= s;
}

void scale_row(double* x, std::size_t n, double s) {
    for (std::size_t j = 0; j < n; ++j) x[j] *= s;
}

}  // namespace attntrace::kernels
