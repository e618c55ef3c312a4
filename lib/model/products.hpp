#pragma once
// The linear layers of a forward pass as GEMMs split over the worker threads (tensor/gemm.hpp,
// tensor/threads.hpp), what follows each product (the bias) done by the worker on its block while
// it is in cache. Internal to lib/model.
#include <cstddef>

#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "model_tensors.hpp"

namespace attntrace {

// A weight as the products read it: (out, in), or GPT-2's Conv1D (in, out); its bias (out) or null.
template <class T>
struct WeightView {
    const T* w = nullptr;
    std::size_t out = 0, in = 0;
    bool conv1d = false;
    const T* bias = nullptr;
};

template <class T>
WeightView<T> view_of(const Linear<T>& l) {
    return {l.weight(), l.out(), l.in(), l.conv1d, l.b ? l.b->data() : nullptr};
}

// Y[r0:r1, c0:c1] := X[r0:r1] (rows of W.in) · W[c0:c1]ᵀ + beta · Y, Y with leading dim LDY.
template <class T>
void product(const T* x, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1, const WeightView<T>& w,
             T* y, std::size_t ldy, T beta) {
    const T* b = w.conv1d ? w.w + c0 : w.w + c0 * w.in;
    gemm<T>(false, !w.conv1d, r1 - r0, c1 - c0, w.in, T(1), x + r0 * w.in, w.in, b, w.conv1d ? w.out : w.in, beta,
            y + r0 * ldy + c0, ldy);
}

// Y (rows, out) at LDY := X · Wᵀ + b + beta · Y.
template <class T>
void linear(const T* x, std::size_t rows, const WeightView<T>& w, T* y, std::size_t ldy, T beta, std::size_t threads) {
    split_product(rows, w.out, threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        product(x, r0, r1, c0, c1, w, y, ldy, beta);
        if (!w.bias) return;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) y[r * ldy + c] += w.bias[c];
    });
}

}  // namespace attntrace
