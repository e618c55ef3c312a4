"""Goldens for ggml's tensor types (lib/io/ggml_types.cpp), taken from ggml itself: libggml-base of
the llama.cpp build pinned in llama_cpp.py, driven with ctypes.

For every type attntrace dequantizes, tests/fixtures/ggml_types/ gets
- NAME.q:   ROWS rows of N_PER_ROW elements in the type's bytes: rows 0-4 quantized by
            ggml_quantize_chunk from seeded float rows (normal; small weights with outliers;
            positive, so the mins matter; zeros; tiny and huge blocks, and for f16/bf16 also NaN,
            infinities and -0), rows 5-6 random bytes (every bit pattern a block can hold:
            scales that are subnormal, infinite or NaN, every quant value);
- NAME.f32: what ggml's to_float (its type traits) makes of them, little-endian float32 bits.
f32 has no to_float in ggml: its expected floats are its bytes.
manifest.tsv lists them, ggml's whole type table (id, name, block size, bytes per block, so
attntrace names every type as ggml does), and for f16 and bf16 the FNV-1a 64 hash of the float32
bits to_float gives for all 65536 16-bit patterns, in order (the unit test converts them all).

Run with /usr/bin/python3 (numpy); it installs llama.cpp's binaries from npm on first use.
"""
import ctypes
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_cpp  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "ggml_types"
N_PER_ROW = 256
TYPE_COUNT = 43  # GGML_TYPE_COUNT of the pinned build
# the types attntrace reads (issue 37): ggml.h's enum ggml_type values
TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10, "q3_K": 11,
         "q4_K": 12, "q5_K": 13, "q6_K": 14, "iq4_nl": 20, "iq4_xs": 23, "bf16": 30}


class TypeTraits(ctypes.Structure):  # ggml.h struct ggml_type_traits
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p), ("from_float_ref", ctypes.c_void_p)]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)


def load_ggml():
    lib = llama_cpp.libggml_base()
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return lib


def source_rows(rng, type_name):
    """Rows 0-4 as float32 (5, N_PER_ROW)."""
    n = N_PER_ROW
    normal = rng.standard_normal(n)
    weights = rng.standard_normal(n) * 0.02
    weights[rng.choice(n, 6, replace=False)] *= 50.0
    positive = rng.uniform(0.5, 3.0, n)
    zeros = np.zeros(n)
    edges = rng.standard_normal(n)
    edges[:64] *= 1e-9      # blocks whose scale is subnormal or zero in fp16
    edges[64:96] *= 1e6     # a block near fp16's largest scale for 8-bit quants
    edges[96:128] = 65504.0 * np.sign(edges[96:128])
    if type_name in ("f16", "bf16"):
        edges[128:136] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -1e-45, 70000.0, -3.4e38]
    return np.stack([normal, weights, positive, zeros, edges]).astype(np.float32)


def quantized_rows(lib, rng, type_id, type_name, row_bytes):
    if type_id == 0:
        quantized = source_rows(rng, type_name).tobytes()
    else:
        src = np.ascontiguousarray(source_rows(rng, type_name))
        dst = ctypes.create_string_buffer(5 * row_bytes)
        written = lib.ggml_quantize_chunk(type_id, src.ctypes.data, dst, 0, 5, N_PER_ROW, None)
        assert written == 5 * row_bytes, (type_name, written)
        quantized = dst.raw
    return quantized + rng.integers(0, 256, 2 * row_bytes, dtype=np.uint8).tobytes()


def to_float(lib, type_id, data, count):
    if type_id == 0:
        return np.frombuffer(data, dtype="<f4").copy()
    traits = lib.ggml_get_type_traits(type_id).contents
    out = np.empty(count, dtype=np.float32)
    src = ctypes.create_string_buffer(data, len(data))
    TO_FLOAT(traits.to_float)(ctypes.cast(src, ctypes.c_void_p), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              count)
    return out


def fnv1a64(words):
    h = 0xcbf29ce484222325
    for byte in words.astype("<u4").tobytes():
        h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
    return h


def main():
    lib = load_ggml()
    OUT.mkdir(parents=True, exist_ok=True)
    lines = ["# made by tests/goldens/make_ggml_type_goldens.py from libggml-base of @node-llama-cpp/linux-x64 "
             + llama_cpp.PIN,
             "# type ID NAME BLOCK_SIZE BYTES_PER_BLOCK: ggml's type table (ggml_type_name, ggml_blck_size, ggml_type_size)"]
    for type_id in range(TYPE_COUNT):
        t = lib.ggml_get_type_traits(type_id).contents
        lines.append(f"type {type_id} {t.type_name.decode().replace(' ', '_')} {t.blck_size} {t.type_size}")
    lines.append("# rows ID NAME ROWS ELEMENTS_PER_ROW: NAME.q holds the rows, NAME.f32 ggml's to_float of them")
    for type_name, type_id in TYPES.items():
        t = lib.ggml_get_type_traits(type_id).contents
        row_bytes = N_PER_ROW // t.blck_size * t.type_size
        rng = np.random.default_rng(3700 + type_id)
        data = quantized_rows(lib, rng, type_id, type_name, row_bytes)
        expected = to_float(lib, type_id, data, 7 * N_PER_ROW)
        (OUT / f"{type_name}.q").write_bytes(data)
        (OUT / f"{type_name}.f32").write_bytes(expected.astype("<f4").tobytes())
        lines.append(f"rows {type_id} {type_name} 7 {N_PER_ROW}")
    lines.append("# exhaustive ID NAME FNV1A64: the hash of to_float's float32 bits for the 16-bit patterns 0..65535")
    for type_name in ("f16", "bf16"):
        type_id = TYPES[type_name]
        every = np.arange(65536, dtype="<u2").tobytes()
        out = to_float(lib, type_id, every, 65536)
        lines.append(f"exhaustive {type_id} {type_name} {fnv1a64(out.view(np.uint32)):016x}")
    (OUT / "manifest.tsv").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(TYPES)} types to {OUT}")


if __name__ == "__main__":
    main()
