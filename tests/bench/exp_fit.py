#!/usr/bin/python3
"""The fused AVX-512 kernel's exp polynomial (lib/attention/fused_avx512.cpp, Avx512::exp): a
near-minimax fit of e^r on |r| <= ln2 / 2 by degree, with p(0) = 1 held exact, found by iteratively
reweighted least squares on Chebyshev nodes (weights raised where the relative error peaks), and
each fit's largest relative error when evaluated in float32 by Horner's rule, as the kernel does.

Usage: tests/bench/exp_fit.py   (numpy; prints one line per degree, 4 to 6)
The kernel uses degree 5: 1.7e-7 in float32, with 5 FMAs instead of the 6 of the Taylor polynomial
(1.2e-7) in lib/include/attntrace/tensor/vector_math.hpp."""
import numpy as np


def fit(deg, a=np.log(2) / 2 * 1.0001, nodes=2000, rounds=60):
    r = a * np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    w = np.ones(nodes)
    for _ in range(rounds):  # p(r) = 1 + sum c_i r^i; minimise max |p(r) e^-r - 1|
        A = np.stack([r**i for i in range(1, deg + 1)], 1) / np.exp(r)[:, None]
        b = 1 - 1 / np.exp(r)
        c, *_ = np.linalg.lstsq(A * w[:, None], b * w, rcond=None)
        err = np.abs(A @ c - b)
        w = w * (err / err.max()) ** 0.5 + 1e-3
        w /= w.max()
    return c.astype(np.float32), a


def float32_error(c, a):
    r = np.linspace(-a, a, 200001).astype(np.float32)
    p = np.float32(c[-1])
    for ci in c[-2::-1]:
        p = (p * r + ci).astype(np.float32)
    p = (p * r + np.float32(1)).astype(np.float32)
    return np.abs(p.astype(np.float64) / np.exp(r.astype(np.float64)) - 1).max()


if __name__ == "__main__":
    for deg in (4, 5, 6):
        c, a = fit(deg)
        print(f"degree {deg}: c1..c{deg} = {', '.join(f'{x:.9g}' for x in c)}; "
              f"largest relative error in float32 {float32_error(c, a):.2g}")
