"""attntrace's quantized product (lib/io/ggml_matmul.hpp, quantized_gemm) beside ggml's own
mul_mat, on the same quantized weights and float activations, at prompt-processing shapes.

  /usr/bin/python3 tests/bench/ggml_gemm_bench.py [BUILD_DIR] [--threads 2] [--m 256]

ggml's side is llama.cpp's CPU backend (the libggml-cpu variant libggml loads for this CPU, of the
build pinned in tests/goldens/llama_cpp.py): a ggml graph of one ggml_mul_mat on plain CPU
tensors, computed with ggml_graph_compute_with_ctx (its own threads). That is the mul_mat llama.cpp
runs on weights it has not repacked: llama.cpp's model loader may also repack q4_K for its AVX
kernels or put q8_0 on AMX (its extra buffer types), which this does not measure.
attntrace's side is tests/bench/ggml_gemm (each kernel this CPU runs). Each figure is the best of
5 runs; the products are checked against each other (max |diff| / max |ggml|).
"""
import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "goldens"))
import llama_cpp  # noqa: E402
from make_ggml_matmul_goldens import cpu_backend  # noqa: E402

TYPES = {"q8_0": 8, "q4_0": 2, "q4_K": 12, "q5_K": 13, "q6_K": 14}
# (N, K): a 0.5B-1B model's attention projection, its MLP up and down projections
SHAPES = [(1024, 1024), (4096, 1024), (1024, 4096)]


class InitParams(ctypes.Structure):  # ggml.h struct ggml_init_params
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def libs():
    base = llama_cpp.libggml_base()
    cpu, variant = cpu_backend()
    base.ggml_init.restype = ctypes.c_void_p
    base.ggml_init.argtypes = [InitParams]
    base.ggml_new_tensor_2d.restype = ctypes.c_void_p
    base.ggml_new_tensor_2d.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    base.ggml_mul_mat.restype = ctypes.c_void_p
    base.ggml_mul_mat.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    base.ggml_new_graph.restype = ctypes.c_void_p
    base.ggml_new_graph.argtypes = [ctypes.c_void_p]
    base.ggml_build_forward_expand.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    base.ggml_get_data.restype = ctypes.c_void_p
    base.ggml_get_data.argtypes = [ctypes.c_void_p]
    base.ggml_free.argtypes = [ctypes.c_void_p]
    base.ggml_quantize_chunk.restype = ctypes.c_size_t
    base.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    base.ggml_row_size.restype = ctypes.c_size_t
    base.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    cpu.ggml_cpu_init()
    cpu.ggml_graph_compute_with_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return base, cpu, variant


def ggml_matmul(base, cpu, type_id, wq, a, n, k, threads):
    """ggml_mul_mat(W, A) -> (M, N), and the best of 5 in ms."""
    m = a.shape[0]
    ctx = base.ggml_init(InitParams(len(wq) + a.nbytes * 3 + m * n * 4 + (64 << 20), None, False))
    w_t = base.ggml_new_tensor_2d(ctx, type_id, k, n)
    a_t = base.ggml_new_tensor_2d(ctx, 0, k, m)
    ctypes.memmove(base.ggml_get_data(w_t), wq, len(wq))
    ctypes.memmove(base.ggml_get_data(a_t), a.ctypes.data, a.nbytes)
    c_t = base.ggml_mul_mat(ctx, w_t, a_t)
    graph = base.ggml_new_graph(ctx)
    base.ggml_build_forward_expand(graph, c_t)
    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        cpu.ggml_graph_compute_with_ctx(ctx, graph, threads)
        best = min(best, time.perf_counter() - t0)
    out = np.ctypeslib.as_array(ctypes.cast(base.ggml_get_data(c_t), ctypes.POINTER(ctypes.c_float)), (m, n)).copy()
    base.ggml_free(ctx)
    return out, best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--types", default="q8_0,q4_0,q4_K,q5_K,q6_K")
    args = ap.parse_args()
    exe = Path(args.build) / "tests" / "ggml_gemm"
    base, cpu, variant = libs()
    cpu_name = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                     if l.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu_name}; {args.threads} threads; M = {args.m} activation rows; ggml: {variant}; "
          f"best of 5, ms (GOP/s = 2 M N K / time)")
    print(f"{'type':5} {'N x K':>11} | {'ggml':>8} | {'kernel':12} {'attntrace':>9} | {'ggml/attntrace':>14} | max diff")
    rng = np.random.default_rng(38)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.types.split(","):
            type_id = TYPES[name]
            for n, k in SHAPES:
                w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
                wq = ctypes.create_string_buffer(n * base.ggml_row_size(type_id, k))
                base.ggml_quantize_chunk(type_id, w.ctypes.data, wq, 0, n, k, None)
                a = rng.standard_normal((args.m, k)).astype(np.float32)
                ref, t_ggml = ggml_matmul(base, cpu, type_id, wq.raw, a, n, k, args.threads)
                (Path(tmp) / "w").write_bytes(wq.raw)
                (Path(tmp) / "a").write_bytes(a.tobytes())
                kernels = ("avx2", "avx512_vnni") if n * k > 1 << 21 else ("scalar", "avx2", "avx512_vnni")
                for kernel in kernels:
                    run = subprocess.run([str(exe), name, f"{tmp}/w", f"{tmp}/a", str(n), str(k), str(args.m),
                                          str(args.threads), kernel, f"{tmp}/out"], capture_output=True, text=True)
                    if run.returncode != 0:
                        continue
                    ms, ran = run.stdout.split()
                    out = np.fromfile(f"{tmp}/out", dtype=np.float32).reshape(args.m, n)
                    diff = np.abs(out - ref).max() / np.abs(ref).max()
                    print(f"{name:5} {n:5} x {k:<5} | {t_ggml:8.2f} | {ran:12} {float(ms):9.2f} | "
                          f"{t_ggml / float(ms):13.2f}x | {diff:.1e}")


if __name__ == "__main__":
    main()
