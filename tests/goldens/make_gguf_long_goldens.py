#!/usr/bin/python3
"""llama.cpp's logits on 40 positions of the GGUF cases whose weights quantized_gemm multiplies,
for tests/e2e/gguf_goldens.sh: the cases' own ids.npy hold 12 positions, fewer than the 16 rows
of an AMX tile, so only these longer inputs run the AMX kernels (ATTNTRACE_GEMM_KERNEL=amx, the
default on a CPU with AMX) against llama.cpp itself, besides the scalar, AVX2 and VNNI kernels.

Regenerate: /usr/bin/python3 tests/goldens/make_gguf_long_goldens.py   (needs llama.cpp from npm
            through tests/goldens/llama_cpp.py; run after make_gguf_goldens.py, whose files it reads)

Per case, tests/fixtures/gguf/<case>/golden/:
  ids_long.npy              (40,) int64: seeded random ids in [3, vocabulary)
  llama_cpp_logits_long.npy (40, V) float32: llama.cpp's logits, one llama_decode of all 40
                            positions, no flash attention and an F32 KV cache (as make_gguf_goldens.py),
                            on llama.cpp's icelake CPU variant (AVX-512 VNNI; $ATTNTRACE_LLAMA_CPP_CPU
                            overrides it): its sapphirerapids variant's AMX kernels write NaN for the
                            first 32 rows of these E = 32 models
"""
import sys
from pathlib import Path

import os

import numpy as np

os.environ.setdefault("ATTNTRACE_LLAMA_CPP_CPU", "icelake")
sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import llama_cpp_model  # noqa: E402

CASES = HERE.parent / "fixtures" / "gguf"
# one file of each type quantized_gemm multiplies: q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K, q6_K
NAMES = ["llama_q8_0", "llama_q4_0", "qwen3_q5_0", "qwen2_q4_1", "mistral_q5_1", "llama256_q4_k", "llama256_q5_k",
         "llama256_q6_k", "llama256_q4_k_m"]
LENGTH = 40


def main():
    for seed, name in enumerate(NAMES):
        model = CASES / name / "model.gguf"
        m = llama_cpp_model.Model(model, LENGTH, exact=True)
        try:
            ids = np.random.default_rng(seed).integers(3, m.vocab, LENGTH).astype(np.int64)
            logits, _ = m.logits(list(ids))
        finally:
            m.close()
        np.save(CASES / name / "golden" / "ids_long.npy", ids)
        np.save(CASES / name / "golden" / "llama_cpp_logits_long.npy", logits.astype(np.float32))
        print(name, logits.shape, f"max |logit| {np.abs(logits).max():.3f}")


if __name__ == "__main__":
    main()
