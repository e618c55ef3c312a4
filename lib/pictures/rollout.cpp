#include "attntrace/pictures/rollout.hpp"

#include <algorithm>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"

namespace attntrace {

namespace {

// A (B, L, L) from layer W: mean over heads, + I, rows renormalised. BATCH, L: the expected sizes.
template <class T>
Array<T> residual_mean(const Array<T>& w, std::size_t batch, std::size_t l) {
    const std::size_t heads = w.dimension() == 2 ? 1 : w.shape()[w.dimension() - 3];
    Array<T> a = Array<T>::from_shape({batch, l, l});
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t i = 0; i < l; ++i) {
            T* row = a.data() + (b * l + i) * l;
            std::fill(row, row + l, T(0));
            for (std::size_t h = 0; h < heads; ++h) {
                const T* src = w.data() + ((b * heads + h) * l + i) * l;
                for (std::size_t j = 0; j < l; ++j) row[j] += src[j] / T(heads);
            }
            row[i] += T(1);
            T sum = 0;
            for (std::size_t j = 0; j < l; ++j) sum += row[j];
            for (std::size_t j = 0; j < l; ++j) row[j] /= sum;  // sum >= 1 for weights >= 0
        }
    return a;
}

// Checks layer W against the first layer's rank, batch and length.
template <class T>
void check_layer(const Array<T>& w, const std::string& name, const Array<T>& first, const std::string& first_name) {
    const std::size_t r = w.dimension();
    if (r < 2 || r > 4 || w.shape()[r - 1] != w.shape()[r - 2])
        throw ShapeError(name + ": shape " + shape_string(w.shape()) +
                         " is not attention weights (B, H, L, L), (H, L, L) or (L, L)");
    for (T x : w)
        if (!(x >= T(0)))
            throw InputError(name + ": has a negative or NaN weight; rollout needs softmax weights");
    const bool batched = r == 4, first_batched = first.dimension() == 4;
    if (batched != first_batched || w.shape()[r - 1] != first.shape()[first.dimension() - 1] ||
        (batched && w.shape()[0] != first.shape()[0]))
        throw ShapeError(name + ": shape " + shape_string(w.shape()) + " does not match " + first_name + "'s " +
                         shape_string(first.shape()) + " (the same batch and length are needed)");
}

}  // namespace

template <class T>
Array<T> attention_rollout(const std::vector<Array<T>>& layers, const std::vector<std::string>& names) {
    if (layers.empty()) throw UsageError("rollout: give at least one layer's weights");
    for (std::size_t i = 0; i < layers.size(); ++i) check_layer(layers[i], names[i], layers[0], names[0]);
    const bool batched = layers[0].dimension() == 4;
    const std::size_t batch = batched ? layers[0].shape()[0] : 1, l = layers[0].shape().back();
    Array<T> rollout = residual_mean(layers[0], batch, l);
    Array<T> next = Array<T>::from_shape({batch, l, l});
    for (std::size_t k = 1; k < layers.size(); ++k) {
        const Array<T> a = residual_mean(layers[k], batch, l);
        for (std::size_t b = 0; b < batch; ++b)  // rollout := A_k · rollout, (L, L) x (L, L)
            gemm<T>(false, false, l, l, l, T(1), a.data() + b * l * l, l, rollout.data() + b * l * l, l, T(0),
                    next.data() + b * l * l, l);
        std::swap(rollout, next);
    }
    if (!batched) rollout.reshape({l, l});
    return rollout;
}

template Array<float> attention_rollout(const std::vector<Array<float>>&, const std::vector<std::string>&);
template Array<double> attention_rollout(const std::vector<Array<double>>&, const std::vector<std::string>&);

}  // namespace attntrace
