"""Dequantizing speed of ggml's types in attntrace (lib/io/ggml_types.hpp) beside ggml's own
to_float (libggml-base of llama.cpp, tests/goldens/llama_cpp.py) and memcpy, one thread, in GB/s
of float32 output.

  /usr/bin/python3 tests/bench/ggml_types_bench.py [BUILD_DIR] [--rows R] [--n N]

For each type, R rows of N elements (a layer: 1024 x 4096 by default) of seeded normal weights are
quantized by ggml_quantize_chunk; then
- ggml:   ggml's to_float over all rows into one float32 array (what llama.cpp's CPU backend calls
          to dequantize; the pinned build compiles it for baseline x86-64);
- attntrace, each kernel this CPU runs: `layer` (all rows into one array, the output going to
          memory as a dequantized layer's does) and `hot` (each row into the same buffer: the
          arithmetic alone);
- memcpy of the same output bytes, both ways, for the ceiling.
Each figure is the best of 7 rounds. The CPU is named in the first line.
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
from make_ggml_type_goldens import TO_FLOAT, TYPES, load_ggml  # noqa: E402

HOT = ["f16", "bf16", "q8_0", "q4_K", "q5_K", "q6_K"]


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def quantize(lib, type_id, x):
    rows, n = x.shape
    traits = lib.ggml_get_type_traits(type_id).contents
    row_bytes = n // traits.blck_size * traits.type_size
    dst = ctypes.create_string_buffer(rows * row_bytes)
    if type_id == 0:
        return x.tobytes()
    lib.ggml_quantize_chunk(type_id, x.ctypes.data, dst, 0, rows, n, None)
    return dst.raw


def ggml_gbs(lib, type_id, data, count):
    out = np.empty(count, dtype=np.float32)
    if type_id == 0:
        return None
    src = ctypes.create_string_buffer(data, len(data))
    fn = TO_FLOAT(lib.ggml_get_type_traits(type_id).contents.to_float)
    ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    best = 1e30
    for _ in range(7):
        t0 = time.perf_counter()
        fn(ctypes.cast(src, ctypes.c_void_p), ptr, count)
        best = min(best, time.perf_counter() - t0)
    return count * 4 / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--types", default=",".join(HOT))
    args = ap.parse_args()
    exe = Path(args.build) / "tests" / "ggml_dequant"
    lib = load_ggml()
    x = np.random.default_rng(38).standard_normal((args.rows, args.n)).astype(np.float32) * 0.02
    print(f"CPU: {cpu_name()}; one thread; {args.rows} rows x {args.n}; GB/s of float32 output, best of 7")
    print(f"{'type':7} {'ggml':>6} | {'kernel':7} {'layer':>6} {'hot':>6} | {'memcpy layer':>12} {'hot':>6} | layer/ggml")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.types.split(","):
            type_id = TYPES[name]
            data = quantize(lib, type_id, x)
            path = Path(tmp) / f"{name}.q"
            path.write_bytes(data)
            ggml = ggml_gbs(lib, type_id, data, x.size)
            for kernel in ("scalar", "avx2"):
                run = subprocess.run([str(exe), name, str(path), str(args.n), kernel], capture_output=True, text=True)
                if run.returncode != 0:
                    continue  # this CPU does not run it
                _, ran, hot, layer, m_hot, m_layer = run.stdout.split()
                ratio = f"{float(layer) / ggml:.2f}x" if ggml else "-"
                ggml_text = f"{ggml:6.2f}" if ggml else "     -"
                print(f"{name:7} {ggml_text} | {ran:7} {float(layer):6.2f} {float(hot):6.2f} | "
                      f"{float(m_layer):12.2f} {float(m_hot):6.2f} | {ratio}")


if __name__ == "__main__":
    main()
