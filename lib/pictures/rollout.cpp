#include "attntrace/pictures/rollout.hpp"

#include <algorithm>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"

namespace attntrace {

namespace {

constexpr std::size_t kLockStripes = 64;

// A (L, L) := A + I, each row renormalised to sum 1 (>= 1 for weights >= 0).
template <class T>
void add_residual(T* a, std::size_t l) {
    for (std::size_t i = 0; i < l; ++i) {
        T* row = a + i * l;
        row[i] += T(1);
        T sum = 0;
        for (std::size_t j = 0; j < l; ++j) sum += row[j];
        for (std::size_t j = 0; j < l; ++j) row[j] /= sum;
    }
}

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
        }
    for (std::size_t b = 0; b < batch; ++b) add_residual(a.data() + b * l * l, l);
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

template <class T>
RolloutBuilder<T>::RolloutBuilder(std::size_t heads, std::size_t length)
    : heads_(heads), l_(length), mean_(Array<T>::from_shape({length, length})),
      rollout_(Array<T>::from_shape({length, length})), next_(Array<T>::from_shape({length, length})),
      locks_(new std::mutex[kLockStripes]) {
    std::fill(mean_.begin(), mean_.end(), T(0));
}

template <class T>
void RolloutBuilder<T>::add(std::size_t first, const T* weights, std::size_t count) {
    const std::size_t plane = l_ * l_;
    for (std::size_t done = 0; done < count;) {  // one query row of one head at a time
        const std::size_t at = (first + done) % plane, n = std::min(count - done, l_ - at % l_);
        std::lock_guard guard(locks_[(at / l_) % kLockStripes]);
        T* row = mean_.data() + at;
        for (std::size_t j = 0; j < n; ++j) row[j] += weights[done + j] / T(heads_);
        done += n;
    }
}

template <class T>
void RolloutBuilder<T>::finish_layer() {
    add_residual(mean_.data(), l_);
    if (layers_ == 0) {
        std::swap(rollout_, mean_);
    } else {  // rollout := A · rollout
        gemm<T>(false, false, l_, l_, l_, T(1), mean_.data(), l_, rollout_.data(), l_, T(0), next_.data(), l_);
        std::swap(rollout_, next_);
    }
    std::fill(mean_.begin(), mean_.end(), T(0));
    ++layers_;
}

template <class T>
const Array<T>& RolloutBuilder<T>::rollout() const {
    if (layers_ == 0) throw UsageError("rollout: no layer's weights were given");
    return rollout_;
}

template class RolloutBuilder<float>;
template class RolloutBuilder<double>;

template Array<float> attention_rollout(const std::vector<Array<float>>&, const std::vector<std::string>&);
template Array<double> attention_rollout(const std::vector<Array<double>>&, const std::vector<std::string>&);

}  // namespace attntrace
