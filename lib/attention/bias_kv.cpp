// torch's add_bias_kv for the seeded random init (see params.hpp); the loaded bias_k / bias_v come
// from the torch scheme in params.cpp and are appended to k / v in mha.cpp.
#include <cmath>

#include "attntrace/attention/params.hpp"
#include "attntrace/tensor/random.hpp"

namespace attntrace {
namespace {

// (1, 1, WIDTH) drawn xavier-normal: fan_in = fan_out = WIDTH for torch's (1, 1, E), std sqrt(1 / WIDTH).
template <class T>
Array<T> xavier_normal_row(Rng& rng, std::size_t width) {
    Array<T> a = Array<T>::from_shape({1, 1, width});
    const double std = std::sqrt(1.0 / static_cast<double>(width));
    for (auto& x : a) x = static_cast<T>(std * rng.normal());
    return a;
}

}  // namespace

template <class T>
void add_random_bias_kv(MhaParams<T>& params, std::uint64_t seed) {
    Rng rng(seed + 1);
    params.bias_k = xavier_normal_row<T>(rng, params.w_k.shape()[0]);
    params.bias_v = xavier_normal_row<T>(rng, params.w_v.shape()[0]);
}

template void add_random_bias_kv(MhaParams<float>&, std::uint64_t);
template void add_random_bias_kv(MhaParams<double>&, std::uint64_t);

}  // namespace attntrace
