#include "attntrace/tensor/random.hpp"

#include <cmath>
#include <numbers>

namespace attntrace {

double Rng::uniform() {
    // the top 53 bits of one 64-bit draw: every double k * 2^-53, k in [0, 2^53)
    return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double Rng::uniform(double low, double high) { return low + (high - low) * uniform(); }

double Rng::normal() {
    // Box-Muller: 1 - u1 is in (0, 1], so the log is finite
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

template <class T>
Array<T> random_tensor(const Shape& shape, Distribution dist, std::uint64_t seed) {
    Rng rng(seed);
    auto out = Array<T>::from_shape(shape);
    // drawn in double, then rounded to T, so float and double tensors share their values
    for (T& v : out) {
        v = static_cast<T>(dist == Distribution::normal ? rng.normal() : rng.uniform());
    }
    return out;
}

template Array<float> random_tensor<float>(const Shape&, Distribution, std::uint64_t);
template Array<double> random_tensor<double>(const Shape&, Distribution, std::uint64_t);

}  // namespace attntrace
