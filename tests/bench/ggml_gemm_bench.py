"""attntrace's quantized product (lib/io/ggml_matmul.hpp, quantized_gemm) beside ggml's own
mul_mat, on the same quantized weights and float activations, at prompt-processing shapes.

  /usr/bin/python3 tests/bench/ggml_gemm_bench.py [BUILD_DIR] [--threads 2] [--m 256]

ggml's side is llama.cpp's CPU backend (the libggml-cpu variant libggml loads for this CPU, of the
build pinned in tests/goldens/llama_cpp.py): a ggml graph of one ggml_mul_mat on plain CPU
tensors, computed with ggml_graph_compute_with_ctx (its own threads). That is the mul_mat llama.cpp
runs on weights it has not repacked: llama.cpp's model loader may also repack q4_K for its AVX
kernels or put q8_0 on AMX (its extra buffer types), which this does not measure.
attntrace's side is tests/bench/ggml_gemm (each kernel this CPU runs). The two are measured in
interleaved rounds (ggml once, then attntrace's best of 2 in a fresh process, 7 times) and each
figure is the median of its rounds, so a machine busy with other work slows both alike; the
products are checked against each other (max |diff| / max |ggml|).
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

TYPES = {"q8_0": 8, "q4_0": 2, "q5_0": 6, "q4_1": 3, "q5_1": 7, "q4_K": 12, "q5_K": 13, "q6_K": 14}
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


class GgmlProduct:
    """ggml_mul_mat(W, A) -> (M, N) as a one-node graph; run() times one compute in ms."""

    def __init__(self, base, cpu, type_id, wq, a, n, k, threads):
        self.base, self.cpu, self.threads, self.shape = base, cpu, threads, (a.shape[0], n)
        self.ctx = base.ggml_init(InitParams(len(wq) + a.nbytes * 3 + a.shape[0] * n * 4 + (64 << 20), None, False))
        w_t = base.ggml_new_tensor_2d(self.ctx, type_id, k, n)
        a_t = base.ggml_new_tensor_2d(self.ctx, 0, k, a.shape[0])
        ctypes.memmove(base.ggml_get_data(w_t), wq, len(wq))
        ctypes.memmove(base.ggml_get_data(a_t), a.ctypes.data, a.nbytes)
        self.c_t = base.ggml_mul_mat(self.ctx, w_t, a_t)
        self.graph = base.ggml_new_graph(self.ctx)
        base.ggml_build_forward_expand(self.graph, self.c_t)

    def run(self):
        t0 = time.perf_counter()
        self.cpu.ggml_graph_compute_with_ctx(self.ctx, self.graph, self.threads)
        return (time.perf_counter() - t0) * 1e3

    def out(self):
        data = ctypes.cast(self.base.ggml_get_data(self.c_t), ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(data, self.shape).copy()

    def free(self):
        self.base.ggml_free(self.ctx)


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
          f"ms, median of 7 interleaved rounds (scalar: one); load {Path('/proc/loadavg').read_text().split()[0]}")
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
                ggml = GgmlProduct(base, cpu, type_id, wq.raw, a, n, k, args.threads)
                ggml.run()  # its first compute, untimed
                ref = ggml.out()
                (Path(tmp) / "w").write_bytes(wq.raw)
                (Path(tmp) / "a").write_bytes(a.tobytes())
                kernels = ("avx2", "avx512_vnni") if n * k > 1 << 21 else ("scalar", "avx2", "avx512_vnni")
                for kernel in kernels:
                    command = [str(exe), name, f"{tmp}/w", f"{tmp}/a", str(n), str(k), str(args.m), str(args.threads),
                               kernel, f"{tmp}/out", "2"]
                    rounds = 1 if kernel == "scalar" else 7
                    t_ggml, t_ours, ran = [], [], None
                    for _ in range(rounds):
                        t_ggml.append(ggml.run())
                        run = subprocess.run(command, capture_output=True, text=True)
                        if run.returncode != 0:
                            break  # this CPU does not run it
                        ms, ran = run.stdout.split()
                        t_ours.append(float(ms))
                    if not t_ours:
                        continue
                    out = np.fromfile(f"{tmp}/out", dtype=np.float32).reshape(args.m, n)
                    diff = np.abs(out - ref).max() / np.abs(ref).max()
                    g, o = float(np.median(t_ggml)), float(np.median(t_ours))
                    print(f"{name:5} {n:5} x {k:<5} | {g:8.2f} | {ran:12} {o:9.2f} | {g / o:13.2f}x | {diff:.1e}")
                ggml.free()


if __name__ == "__main__":
    main()
