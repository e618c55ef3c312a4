#pragma once
// The linear layers of a forward pass as GEMMs split over the worker threads (tensor/gemm.hpp,
// tensor/threads.hpp), what follows each product (the bias) done by the worker on its block while
// it is in cache. Internal to lib/model.
#include <cstddef>
#include <optional>
#include <type_traits>
#include <vector>

#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/weight_gemm.hpp"
#include "model_tensors.hpp"

namespace attntrace {

// A weight as the products read it: (out, in), or GPT-2's Conv1D (in, out); its bias (out) or null.
// With QUANTIZED (float32 only), W is those bytes (out, in) and w is null.
template <class T>
struct WeightView {
    const T* w = nullptr;
    std::size_t out = 0, in = 0;
    bool conv1d = false;
    const T* bias = nullptr;
    const QuantizedMatrix* quantized = nullptr;
};

template <class T>
WeightView<T> view_of(const Linear<T>& l) {
    return {l.weight(), l.out(), l.in(), l.conv1d, l.b ? l.b->data() : nullptr, l.quantized ? &*l.quantized : nullptr};
}

// X (ROWS, W.in) quantized for W's products when W is kept quantized (float32; else nullopt), once
// for all the blocks a product is split into: SHARED when it holds X already for W's dot type.
template <class T>
std::optional<QuantizedRows> quantized_input(const T* x, std::size_t rows, const WeightView<T>& w, std::size_t threads,
                                             const std::optional<QuantizedRows>& shared = std::nullopt) {
    if constexpr (std::is_same_v<T, float>) {
        if (!w.quantized) return std::nullopt;
        if (shared && shared->dot_type() == quantized_dot_type(w.quantized->type)) return shared;
        return quantize_rows(w.quantized->type, x, rows, w.in, threads);
    }
    return std::nullopt;
}

// Y[r0:r1, c0:c1] := XQ[r0:r1] · W[c0:c1]ᵀ + beta · Y, Y with leading dim LDY, on this thread:
// llama.cpp's quantized product (XQ: the rows quantized as ggml does).
inline void quantized_block(const QuantizedRows& xq, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1,
                            const QuantizedMatrix& w, float* y, std::size_t ldy, float beta) {
    const QuantizedMatrix rows = w.row_range(c0, c1);
    const QuantizedRows x = xq.range(r0, r1);
    y += r0 * ldy + c0;
    if (beta == 0.0f) return quantized_product(rows, x, y, ldy, 1);
    thread_local std::vector<float> staged;  // (r1 - r0, c1 - c0), added to beta · Y
    staged.resize((r1 - r0) * (c1 - c0));
    quantized_product(rows, x, staged.data(), c1 - c0, 1);
    for (std::size_t r = 0; r < r1 - r0; ++r)
        for (std::size_t c = 0; c < c1 - c0; ++c) y[r * ldy + c] = beta * y[r * ldy + c] + staged[r * (c1 - c0) + c];
}

// Y[r0:r1, c0:c1] := X[r0:r1] (rows of W.in) · W[c0:c1]ᵀ + beta · Y, Y with leading dim LDY; a
// quantized W multiplies XQ (quantized_input of all of X's rows).
template <class T>
void product(const T* x, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1, const WeightView<T>& w,
             T* y, std::size_t ldy, T beta, const std::optional<QuantizedRows>& xq = std::nullopt) {
    if constexpr (std::is_same_v<T, float>)
        if (w.quantized) {
            if (xq) return quantized_block(*xq, r0, r1, c0, c1, *w.quantized, y, ldy, beta);
            const QuantizedRows rows = quantize_rows(w.quantized->type, x + r0 * w.in, r1 - r0, w.in, 1);
            return quantized_block(rows, 0, r1 - r0, c0, c1, *w.quantized, y + r0 * ldy, ldy, beta);
        }
    const T* b = w.conv1d ? w.w + c0 : w.w + c0 * w.in;
    multiply_weight(x + r0 * w.in, w.in, r1 - r0, w.in, b, w.conv1d ? w.out : w.in, w.conv1d, c1 - c0, beta,
                    y + r0 * ldy + c0, ldy);
}

// Y (rows, out) at LDY := X · Wᵀ + b + beta · Y.
template <class T>
void linear(const T* x, std::size_t rows, const WeightView<T>& w, T* y, std::size_t ldy, T beta, std::size_t threads) {
    const std::optional<QuantizedRows> xq = quantized_input(x, rows, w, threads);
    split_product(rows, w.out, threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        product(x, r0, r1, c0, c1, w, y, ldy, beta, xq);
        if (!w.bias) return;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) y[r * ldy + c] += w.bias[c];
    });
}

}  // namespace attntrace
