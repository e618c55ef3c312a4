#!/usr/bin/python3
"""Prompt processing of GGUF files (issue 37; issue 38 wants attntrace >= 1.0x llama.cpp): a random
Llama of GPT-2-small size (12 layers, E 768, 12 heads, I 2048, vocabulary 32000, untied: 134M
parameters) written in F32 by make_big_gguf.py and quantized by llama.cpp itself
(llama_model_quantize, pure) to Q8_0 and to Q4_K; L = 256 random ids; the logits of every position;
2 threads each.

  attntrace  the WHOLE process: `attntrace model FILE --ids ... --logits logits.npy --top 0
             --threads 2` (mapping the file, every head's statistics, the 32 MB logits file
             written), with its default quantized products (docs/gguf.md) and, as the `before`
             column, with ATTNTRACE_GGUF_PRODUCTS=float32 (each layer dequantized, sgemm)
  llama.cpp  libllama (@node-llama-cpp/linux-x64, tests/goldens/llama_cpp.py) on the same file,
             warm: the model loaded and a context made once, then llama_decode of the L tokens with
             every position an output (the KV cache cleared between calls), llama.cpp's defaults
             otherwise (flash attention as it picks, F16 KV cache, its repacked CPU weights); for a
             like-for-like line the model's load added once

REPS rounds, interleaved (attntrace quantized, attntrace float32, llama.cpp in each round, so a
busy spell of the machine hits all three); the medians printed. Prints the times and the ratios
llama.cpp / attntrace (above 1: attntrace is faster) per type, the CPU named, and the max
|difference| of the logits (docs/gguf.md). Needs llama.cpp from npm (llama_cpp.py) and about 1 GB
in the scratch dir.

  /usr/bin/python3 tests/bench/gguf_bench.py [--attntrace build/attntrace] [--reps 5] [--keep DIR]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "goldens"))
import llama_cpp_model  # noqa: E402

LAYERS, E, HEADS, I, VOCAB, L, THREADS = 12, 768, 12, 2048, 32000, 256, 2


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def make_files(folder):
    f32 = folder / "model-f32.gguf"
    if not f32.exists():
        subprocess.run([sys.executable, str(ROOT / "tests" / "goldens" / "make_big_gguf.py"), str(f32), "--layers",
                        str(LAYERS), "--hidden", str(E), "--intermediate", str(I), "--heads", str(HEADS), "--kv-heads",
                        str(HEADS), "--vocab", str(VOCAB), "--f32", "--vocabulary"], check=True, stdout=subprocess.DEVNULL)
    files = {}
    for name, ftype in (("Q8_0", "q8_0"), ("Q4_K", "q4_k_s")):
        files[name] = folder / f"model-{name.lower()}.gguf"
        if not files[name].exists():
            llama_cpp_model.quantize(f32, files[name], ftype, pure=True, threads=THREADS)
    return files


def run_attntrace(binary, path, ids, out, products):
    env = dict(os.environ, ATTNTRACE_GGUF_PRODUCTS=products)
    start = time.perf_counter()
    subprocess.run([binary, "model", str(path), "--ids", ids, "--logits", str(out), "--top", "0", "--threads",
                    str(THREADS)], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


class LlamaCpp:
    """The model loaded once (its load timed), then decodes of IDS with the KV cache cleared."""

    def __init__(self, path, length):
        start = time.perf_counter()
        self.m = llama_cpp_model.Model(path, length, THREADS, exact=False)
        self.load = time.perf_counter() - start
        self.lib = llama_cpp_model.lib()
        self.lib.llama_get_memory.argtypes = [ctypes.c_void_p]
        self.lib.llama_get_memory.restype = ctypes.c_void_p
        self.lib.llama_memory_clear.argtypes = [ctypes.c_void_p, ctypes.c_bool]

    def decode(self, ids):
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.m.ctx), True)
        return self.m.logits(ids)  # (logits, seconds)

    def close(self):
        self.m.close()


def rounds(binary, path, ids, ids_text, folder, reps):
    """REPS interleaved rounds: the medians of attntrace (quantized, float32) and llama.cpp, its load,
    and the logits of each."""
    times = {"quantized": [], "float32": [], "llama.cpp": []}
    llama = LlamaCpp(path, len(ids))
    logits = {}
    try:
        for _ in range(reps):
            for products in ("quantized", "float32"):
                out = folder / f"logits-{products}.npy"
                times[products].append(run_attntrace(binary, path, ids_text, out, products))
            logits["llama.cpp"], seconds = llama.decode(ids)
            times["llama.cpp"].append(seconds)
    finally:
        llama.close()
    for products in ("quantized", "float32"):
        logits[products] = np.load(folder / f"logits-{products}.npy")
    return {k: float(np.median(v)) for k, v in times.items()}, llama.load, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attntrace", default=str(ROOT / "build" / "attntrace"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", help="a folder to keep the model files in (made once)")
    a = ap.parse_args()
    folder = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="gguf_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    files = make_files(folder)
    ids = np.random.default_rng(0).integers(300, VOCAB, size=L)
    ids_text = ",".join(map(str, ids))
    print(f"GGUF prompt processing, L {L}, logits of every position, {THREADS} threads, {cpu_name()}")
    print(f"model: Llama, {LAYERS} layers, E {E}, {HEADS} heads, I {I}, vocabulary {VOCAB} (134M parameters)")
    print(f"medians of {a.reps} interleaved rounds; ratio = llama.cpp / attntrace (> 1: attntrace is faster)")
    print(f"{'type':6} {'file':>8} {'attntrace':>10} {'float32':>10} {'llama.cpp':>10} {'ratio':>6} {'before':>6} "
          f"{'+load':>8} {'ratio':>6}  max |logits diff| quantized, float32")
    for name, path in files.items():
        t, load, logits = rounds(a.attntrace, path, list(ids), ids_text, folder, a.reps)
        ours, before, theirs = t["quantized"], t["float32"], t["llama.cpp"]
        diff = [float(np.abs(logits[p] - logits["llama.cpp"]).max()) for p in ("quantized", "float32")]
        print(f"{name:6} {path.stat().st_size / 2**20:6.0f}MB {ours:9.3f}s {before:9.3f}s {theirs:9.3f}s "
              f"{theirs / ours:5.2f}x {theirs / before:5.2f}x {theirs + load:7.3f}s {(theirs + load) / ours:5.2f}x  "
              f"{diff[0]:.3g}, {diff[1]:.3g} (of |logits| <= {float(np.abs(logits['llama.cpp']).max()):.3g})")
    if not a.keep:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
