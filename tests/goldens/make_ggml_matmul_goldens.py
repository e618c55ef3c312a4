"""Goldens for attntrace's quantized matrix product (lib/io/ggml_matmul.cpp), taken from ggml's CPU
backend as llama.cpp runs it: the libggml-cpu-<variant>.so that libggml loads for this CPU (of
the @node-llama-cpp/linux-x64 build pinned in llama_cpp.py), driven with ctypes.

llama.cpp multiplies a quantized weight W (N rows of K) by float activations A (M rows of K) by
quantizing each activation row to the weight type's `vec_dot_type` (q8_0 for q8_0, q4_0 and q5_0
weights, q8_1 for q4_1 and q5_1, q8_K for the K types) with the CPU backend's `from_float`, then taking `vec_dot(W row, A row)`. For
each weight type, tests/fixtures/ggml_matmul/ gets
- TYPE.w:       W, N rows quantized by ggml_quantize_chunk (seeded normal weights, two rows zero);
- TYPE.a:       A, float32 (M, K): normal rows, a zero row, a row with one huge value, a row of tiny ones;
- TYPE.aq:      A quantized by the CPU backend's from_float (the bytes must be equal);
- TYPE.generic: (M, N) float32, ggml_vec_dot_<type>_<vec_dot_type>_generic (the reference
                definition in plain C, summing in the order attntrace's scalar kernel does);
- TYPE.ggml:    (M, N) float32, the CPU backend's own vec_dot for this CPU (SIMD, its own order of
                float sums).
manifest.tsv lists them with the variant that made TYPE.ggml.

Run with /usr/bin/python3 (numpy).
"""
import ctypes
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_cpp  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "ggml_matmul"
M, N, K = 5, 20, 512
# weight type: (id, vec_dot_type name, vec_dot_type id)
TYPES = {"q8_0": (8, "q8_0", 8), "q4_0": (2, "q8_0", 8), "q5_0": (6, "q8_0", 8), "q4_1": (3, "q8_1", 9),
         "q5_1": (7, "q8_1", 9), "q4_K": (12, "q8_K", 15), "q5_K": (13, "q8_K", 15), "q6_K": (14, "q8_K", 15)}
VEC_DOT = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_void_p,
                           ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def cpu_backend():
    """The libggml-cpu variant libggml loads for this CPU, as a CDLL, and its name."""
    llama_cpp.libllama()  # loads the best variant into this process
    maps = Path("/proc/self/maps").read_text().split()
    path = next(p for p in maps if "libggml-cpu-" in p)
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return lib, Path(path).name


def activations(rng):
    a = rng.standard_normal((M, K))
    a[1] = 0.0
    a[2] = rng.standard_normal(K) * 1e-3
    a[2, 77] = 3e4
    a[3] = rng.standard_normal(K) * 1e-30
    return a.astype(np.float32)


def weights(rng, base, type_id, row_bytes):
    w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    w[3] = 0.0
    w[17] = 0.0
    dst = ctypes.create_string_buffer(N * row_bytes)
    base.ggml_quantize_chunk(type_id, w.ctypes.data, dst, 0, N, K, None)
    return dst.raw


def products(fn, wq, row_bytes, aq, arow_bytes):
    out = np.zeros((M, N), dtype=np.float32)
    s = ctypes.c_float()
    for m in range(M):
        for n in range(N):
            wp = ctypes.cast(ctypes.c_char_p(wq[n * row_bytes:(n + 1) * row_bytes]), ctypes.c_void_p)
            ap = ctypes.cast(ctypes.c_char_p(aq[m * arow_bytes:(m + 1) * arow_bytes]), ctypes.c_void_p)
            fn(K, ctypes.byref(s), 0, wp, 0, ap, 0, 1)
            out[m, n] = s.value
    return out


def main():
    base = llama_cpp.libggml_base()
    base.ggml_quantize_chunk.restype = ctypes.c_size_t
    base.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    base.ggml_row_size.restype = ctypes.c_size_t
    base.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    cpu, variant = cpu_backend()
    OUT.mkdir(parents=True, exist_ok=True)
    lines = [f"# made by tests/goldens/make_ggml_matmul_goldens.py, {variant} of @node-llama-cpp/linux-x64 {llama_cpp.PIN}",
             "# product TYPE VEC_DOT_TYPE M N K: TYPE.w (N rows), TYPE.a (M, K) float32, TYPE.aq, TYPE.generic, TYPE.ggml (M, N)"]
    for name, (type_id, dot_name, dot_id) in TYPES.items():
        rng = np.random.default_rng(3800 + type_id)
        row_bytes, arow_bytes = base.ggml_row_size(type_id, K), base.ggml_row_size(dot_id, K)
        wq = weights(rng, base, type_id, row_bytes)
        a = activations(rng)
        quantize = getattr(cpu, f"quantize_row_{dot_name}")
        quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        aq = ctypes.create_string_buffer(M * arow_bytes)
        for m in range(M):
            quantize(a[m].ctypes.data, ctypes.addressof(aq) + m * arow_bytes, K)
        aq = aq.raw
        generic = VEC_DOT(ctypes.cast(getattr(cpu, f"ggml_vec_dot_{name}_{dot_name}_generic"), ctypes.c_void_p).value)
        fast = VEC_DOT(ctypes.cast(getattr(cpu, f"ggml_vec_dot_{name}_{dot_name}"), ctypes.c_void_p).value)
        (OUT / f"{name}.w").write_bytes(wq)
        (OUT / f"{name}.a").write_bytes(a.tobytes())
        (OUT / f"{name}.aq").write_bytes(aq)
        (OUT / f"{name}.generic").write_bytes(products(generic, wq, row_bytes, aq, arow_bytes).tobytes())
        (OUT / f"{name}.ggml").write_bytes(products(fast, wq, row_bytes, aq, arow_bytes).tobytes())
        lines.append(f"product {name} {dot_name} {M} {N} {K}")
    (OUT / "manifest.tsv").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(TYPES)} weight types to {OUT} ({variant})")


if __name__ == "__main__":
    main()
