"""Minimal .safetensors writer and reader (there is no python `safetensors` package on Debian 12).

Format: 8 bytes little-endian header length N, N bytes of JSON header
  {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
   "__metadata__": {"format": "pt"}}
padded with spaces so that N is a multiple of 8, then the raw little-endian bytes of every tensor,
contiguous, in name order (offsets are relative to the end of the header).
"""
import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_CODES = {dt: code for code, dt in _DTYPES.items()}


def safetensors_bytes(tensors, metadata=None):
    """The bytes of a .safetensors file holding TENSORS (name -> numpy array), in name order."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        if dtype not in _CODES:
            raise ValueError(f"{name}: dtype {array.dtype} has no safetensors code")
        data = np.ascontiguousarray(array, dtype=dtype).tobytes()
        header[name] = {"dtype": _CODES[dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"} if metadata is None else metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))


def read(path):
    """name -> numpy array (the metadata is dropped)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = _DTYPES[entry["dtype"]]
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(entry["shape"]).copy()
    return out


if __name__ == "__main__":  # self-check: a round trip
    import os
    import tempfile

    t = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.array([1.5, -2.0]),
         "m": np.array([True, False])}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        write(p, t)
        blob = open(p, "rb").read()
        assert struct.unpack("<Q", blob[:8])[0] % 8 == 0
        r = read(p)
        assert sorted(r) == sorted(t) and all(np.array_equal(r[k], t[k]) and r[k].dtype == t[k].dtype for k in t)
    print("st.py round trip ok")
