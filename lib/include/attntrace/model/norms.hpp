#pragma once
// The residual adds and the norms of a transformer block, fused into one pass over each row of
// the activations: x := x + delta + bias (the residual), then y := norm(x) (the next norm's
// input), while the row is in cache. LayerNorm is torch.nn.LayerNorm (biased variance), RMSNorm
// is LlamaRMSNorm; the mean and variance are accumulated in double.
//
// Legend: rows of E values, leading dim E.
#include <cstddef>
#include <type_traits>

#include "attntrace/attention/positions.hpp"

namespace attntrace {

template <class T>
struct NormWeights {
    NormKind kind = NormKind::none;  // none: y is a copy of x
    const T* weight = nullptr;       // (E)
    const T* bias = nullptr;         // (E), LayerNorm only (may be null)
    double eps = 0;
};

// x (rows, E) := x + delta + bias, then y (rows, E) := norm(x). DELTA (rows, E) and BIAS (E) may
// be null (nothing added); Y may be null (no norm) or X itself (normed in place, the residual
// then lost). The rows are split over THREADS workers when there are enough of them.
template <class T>
void add_and_norm(T* x, const std::type_identity_t<T>* delta, const std::type_identity_t<T>* bias,
                  std::type_identity_t<T>* y, std::size_t rows, std::size_t e, const NormWeights<T>& norm,
                  std::size_t threads);

}  // namespace attntrace
