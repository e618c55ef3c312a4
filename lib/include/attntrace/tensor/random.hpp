#pragma once
// Seeded random numbers that are the same on every machine and compiler: std::mt19937_64 for the
// bits (its sequence is fixed by the standard), and our own transforms on top, because the
// standard's distributions are implementation-defined.
//   uniform(): the top 53 bits of one draw, times 2^-53: [0, 1)
//   normal():  Box-Muller on two uniforms u1, u2: sqrt(-2 ln(1 - u1)) * cos(2 pi u2)
//              (one draw per pair is used; simple, and documented in docs/files.md)
#include <cstdint>
#include <random>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class Rng {
public:
    explicit Rng(std::uint64_t seed) : engine_(seed) {}
    double uniform();                     // [0, 1)
    double uniform(double low, double high);  // [low, high)
    double normal();                      // mean 0, std 1

private:
    std::mt19937_64 engine_;
};

enum class Distribution { normal, uniform };

// A SHAPE tensor of draws from DIST, filled in row-major order from Rng(SEED).
template <class T>
Array<T> random_tensor(const Shape& shape, Distribution dist, std::uint64_t seed);

}  // namespace attntrace
