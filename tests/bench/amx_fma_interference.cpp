// What the AMX tile unit's products do to AVX-512 FMAs running beside them on the same core
// (docs/performance.md, "Attention, round 5"): the question behind an AMX attention kernel, whose
// softmax and P·V would run on the FMA unit between the tile products of Q·Kᵀ. One thread, wall
// time, best of several runs each. Prints, in ns:
//   tdp        4 TDPBF16PS into 4 C tiles, and the same into one C tile (a chain)
//   fma        192 FMAs (12 independent chains), alone; with 1 TDPBF16PS; with 2 tile loads and a
//              tile store instead
//   sparse     12,288 FMAs alone and with one TDPBF16PS among them
//   recovery   after 20 ms of tile products alone, slices of 96,000 FMAs: each slice's time over
//              the slice's time before, against the microseconds since the last tile product
// Usage: amx_fma_interference   (exit 77 where the CPU or Linux gives no AMX-BF16; compiled with
// AMX and AVX-512 throughout, so main asks first and does nothing else before it knows)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "attntrace/tensor/amx.hpp"

namespace {

using Clock = std::chrono::steady_clock;

alignas(64) std::uint16_t operand[4][512];  // bfloat16 1.0: A and B tiles
alignas(64) float sums[256];
constexpr attntrace::TileConfig config() {
    attntrace::TileConfig c;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    return c;
}
constexpr attntrace::TileConfig the_config = config();

struct Chains {
    __m512 a[12];
};

// 12 × N FMAs on 12 independent chains (each a register); what the loop around it adds is what
// is measured.
template <int N>
inline void fmas(Chains& c) {
    const __m512 b = _mm512_set1_ps(0.999f), d = _mm512_set1_ps(1e-4f);
    __m512 a0 = c.a[0], a1 = c.a[1], a2 = c.a[2], a3 = c.a[3], a4 = c.a[4], a5 = c.a[5], a6 = c.a[6], a7 = c.a[7],
           a8 = c.a[8], a9 = c.a[9], a10 = c.a[10], a11 = c.a[11];
    for (int i = 0; i < N; ++i) {
        a0 = _mm512_fmadd_ps(a0, b, d), a1 = _mm512_fmadd_ps(a1, b, d), a2 = _mm512_fmadd_ps(a2, b, d);
        a3 = _mm512_fmadd_ps(a3, b, d), a4 = _mm512_fmadd_ps(a4, b, d), a5 = _mm512_fmadd_ps(a5, b, d);
        a6 = _mm512_fmadd_ps(a6, b, d), a7 = _mm512_fmadd_ps(a7, b, d), a8 = _mm512_fmadd_ps(a8, b, d);
        a9 = _mm512_fmadd_ps(a9, b, d), a10 = _mm512_fmadd_ps(a10, b, d), a11 = _mm512_fmadd_ps(a11, b, d);
    }
    c.a[0] = a0, c.a[1] = a1, c.a[2] = a2, c.a[3] = a3, c.a[4] = a4, c.a[5] = a5, c.a[6] = a6, c.a[7] = a7;
    c.a[8] = a8, c.a[9] = a9, c.a[10] = a10, c.a[11] = a11;
}

// The best time in ns of one iteration of WHAT: 1: 4 TDPBF16PS into 4 C tiles; 2: into one; 3: 192
// FMAs; 4: 192 FMAs and 1 TDPBF16PS; 5: 192 FMAs, 2 tile loads, a tile store; 6: 12,288 FMAs;
// 7: 12,288 FMAs and 1 TDPBF16PS.
double iteration_ns(int what, Chains& c) {
    const long n = what >= 6 ? 20000 : 1000000;
    double best = 1e30;
    for (int run = 0; run < 5; ++run) {
        const auto t0 = Clock::now();
        for (long i = 0; i < n; ++i) {
            if (what == 1) {
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            if (what == 2) {
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(0, 4, 7);
                _tile_dpbf16ps(0, 5, 6);
                _tile_dpbf16ps(0, 5, 7);
            }
            if (what >= 3 && what <= 5) fmas<16>(c);
            if (what == 4 || what == 7) _tile_dpbf16ps(0, 4, 6);
            if (what == 5) {
                _tile_loadd(4, operand[0], 64);
                _tile_loadd(5, operand[1], 64);
                _tile_stored(1, sums, 64);
            }
            if (what >= 6) fmas<1024>(c);
        }
        best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(n));
    }
    return best;
}

// After 20 ms of tile products alone: each slice of 96,000 FMAs against the best slice before.
void recovery(Chains& c) {
    auto slice = [&] {
        const auto t0 = Clock::now();
        fmas<8000>(c);
        return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    double base = 1e30;
    for (int i = 0; i < 200; ++i) base = std::min(base, slice());
    for (int trial = 0; trial < 3; ++trial) {
        const auto t0 = Clock::now();
        while (Clock::now() - t0 < std::chrono::milliseconds(20))
            for (int i = 0; i < 64; ++i) _tile_dpbf16ps(0, 4, 6);
        const auto end = Clock::now();
        std::printf("recovery, trial %d (a slice alone: %.1f us):", trial, base);
        for (int s = 0; s < 8; ++s) {
            const double t = slice();
            std::printf(" %.0f us: %.2fx;", std::chrono::duration<double, std::micro>(Clock::now() - end).count(), t / base);
        }
        std::printf("\n");
    }
}

int run() {
    _tile_loadconfig(&the_config);
    for (auto& tile : operand)
        for (auto& x : tile) x = 0x3f80;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, operand[0], 64);
    _tile_loadd(5, operand[1], 64);
    _tile_loadd(6, operand[2], 64);
    _tile_loadd(7, operand[3], 64);
    Chains c;
    for (int i = 0; i < 12; ++i) c.a[i] = _mm512_set1_ps(1.0f + 1e-3f * float(i));
    const double four = iteration_ns(1, c), chain = iteration_ns(2, c);
    std::printf("tdp: 4 TDPBF16PS into 4 C tiles %.1f ns, into one C tile %.1f ns\n", four, chain);
    const double alone = iteration_ns(3, c), with_tdp = iteration_ns(4, c), with_moves = iteration_ns(5, c);
    std::printf("fma: 192 FMAs %.1f ns; with 1 TDPBF16PS %.1f ns (%.2fx); with 2 tile loads and a store %.1f ns (%.2fx)\n",
                alone, with_tdp, with_tdp / alone, with_moves, with_moves / alone);
    const double sparse = iteration_ns(6, c), sparse_tdp = iteration_ns(7, c);
    std::printf("sparse: 12,288 FMAs %.0f ns; with 1 TDPBF16PS %.0f ns (%.2fx)\n", sparse, sparse_tdp, sparse_tdp / sparse);
    recovery(c);
    _tile_stored(0, sums, 64);
    _tile_release();
    float checksum = sums[0];
    for (const __m512& a : c.a) checksum += _mm512_reduce_add_ps(a);
    std::printf("checksum %g (the results used, so nothing above is optimised away)\n", checksum);
    return 0;
}

}  // namespace

int main() {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !attntrace::amx_usable(attntrace::AmxFeature::bf16)) {
        std::puts("no AMX-BF16 here (CPU or Linux): nothing to measure");
        return 77;
    }
    return run();
}
