#pragma once
// The softmax's inner loops, vectorized: a row maximum, exp(x - shift) with its sum, and a row
// scale. float uses a polynomial exp (Cody-Waite reduction to [-ln2/2, ln2/2], degree-6
// polynomial, 2^n from exponent bits; within 2.5e-7 relative of exp over [-87, 88]) that the
// compiler vectorizes, built for AVX-512, AVX2 and plain x86-64 and picked at load time.
// Masked scores (-inf) give exactly 0. double uses std::exp.
#include <cstddef>

namespace attntrace::kernels {

float row_max(const float* x, std::size_t n);
double row_max(const double* x, std::size_t n);

// x[j] := exp(x[j] - shift); returns the sum.
float exp_shift_sum(float* x, std::size_t n, float shift);
double exp_shift_sum(double* x, std::size_t n, double shift);

// x[j] := exp(x[j] - shift); returns the sum, and adds sum_j x[j] * (old x[j] - shift) (over the
// nonzero results) to *dot: what the entropy of the row needs.
float exp_shift_sum_dot(float* x, std::size_t n, float shift, float* dot);
double exp_shift_sum_dot(double* x, std::size_t n, double shift, double* dot);

// x[j] *= s
void scale_row(float* x, std::size_t n, float s);
void scale_row(double* x, std::size_t n, double s);

}  // namespace attntrace::kernels
