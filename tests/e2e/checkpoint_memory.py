"""The memory-map claim of `attntrace mha --model`: a 24-layer llama checkpoint of more than 2 GB
(a sparse file: only the measured layer's bytes are written), one layer run, peak RSS compared
with that layer's bytes. Called by tests/e2e/checkpoints.sh with the binary and a scratch folder.

Prints "layer bytes B, peak RSS R (ratio X)" and exits 1 when R > 2 * B.
"""
import json
import os
import resource
import struct
import subprocess
import sys

import numpy as np

E, HEADS, LAYERS, MEASURED = 3072, 24, 24, 12
ROLES = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
         "self_attn.v_proj.weight", "self_attn.o_proj.weight"]


def shape_of(role):
    return [E] if role.endswith("layernorm.weight") else [E, E]


def main(attntrace, work):
    header, offset, where = {}, 0, {}
    for n in range(LAYERS):
        for role in ROLES:
            name = f"model.layers.{n}.{role}"
            nbytes = 4 * int(np.prod(shape_of(role)))
            header[name] = {"dtype": "F32", "shape": shape_of(role), "data_offsets": [offset, offset + nbytes]}
            where[name] = offset
            offset += nbytes
    text = json.dumps(header)
    text += " " * ((8 - len(text) % 8) % 8)
    start = 8 + len(text)
    path = os.path.join(work, "model.safetensors")
    rng = np.random.default_rng(0)
    layer_bytes = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode())
        f.truncate(start + offset)  # a hole: the other layers take no disk
        for role in ROLES:
            name = f"model.layers.{MEASURED}.{role}"
            values = (rng.standard_normal(shape_of(role), dtype=np.float32) * 0.02)
            if role.endswith("layernorm.weight"):
                values += 1
            f.seek(start + where[name])
            f.write(values.astype("<f4").tobytes())
            layer_bytes += values.nbytes
    config = {"model_type": "llama", "hidden_size": E, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
              "num_hidden_layers": LAYERS, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "max_position_embeddings": 64}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    hidden = os.path.join(work, "hidden.npy")
    np.save(hidden, rng.standard_normal((1, 8, E)).astype(np.float32))
    total = os.path.getsize(path)
    run = subprocess.run([attntrace, "mha", "--model", work, "--layer", str(MEASURED), "-q", hidden, "-o",
                          os.path.join(work, "out.npy"), "--trace", "none"], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"attntrace failed ({run.returncode}): {run.stderr.strip()}")
        return 1
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    out = np.load(os.path.join(work, "out.npy"))
    print(f"checkpoint {total / 2**30:.2f} GiB, {LAYERS} layers; layer {MEASURED} holds {layer_bytes / 2**20:.1f} MiB; "
          f"peak RSS {peak / 2**20:.1f} MiB (ratio {peak / layer_bytes:.2f}, limit 2); output {out.shape}")
    ok = total >= 2 * 10**9 and peak <= 2 * layer_bytes and np.isfinite(out).all()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
