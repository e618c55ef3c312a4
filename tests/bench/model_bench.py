"""The whole-model case of bench.py (issue 27): a GPT-2-small-shaped random float32 checkpoint
(12 layers, E 768, 12 heads, vocabulary 50257, n_positions 1024; 124M parameters, 498 MB), L = 256,
every layer and the (L, V) logits.

  attntrace  the WHOLE process: `attntrace model DIR --ids ids.npy --logits logits.npy --threads T`
             (reading the 498 MB checkpoint from the page cache, the head statistics of every layer,
             the top 5 next tokens, the 51 MB logits file written)
  PyTorch    the same forward in float32 eager with torch modules (nn.Embedding, nn.LayerNorm,
             nn.Linear for GPT-2's Conv1D, F.gelu(approximate="tanh"), the eager attention with its
             weights (B, H, L, L) as output_attentions returns them, the tied LM head), warm: the
             model in memory, one warm-up call, torch.set_num_threads(T); the median of REPS calls.
             A reference for timing only; it also checks attntrace's logits (max |difference|).

GFLOP of the forward: per layer 2L(3E^2 + E^2 + 8E^2) for the projections and the MLP, 4L^2E for
Q.K^T and weights.V (every key, as both compute them), and 2LEV for the head: 65.7 GFLOP at L 256.
Its share of the sgemm ceiling: the median over the REPS runs of GFLOP / (each run's seconds x the
ceiling measured right before it, back to back).
"""
import json
import os
import subprocess
import time

import numpy as np

LAYERS, E, HEADS, VOCAB, POSITIONS, L = 12, 768, 12, 50257, 1024, 256


def gflop(length=L):
    per_layer = 2 * length * 12 * E * E + 4 * length * length * E
    return (LAYERS * per_layer + 2 * length * E * VOCAB) / 1e9


def make_checkpoint(folder, seed=0):
    """config.json and model.safetensors of a random GPT-2 small (GPT2Model names, N(0, 0.02^2)
    weights, norm gains 1 and biases 0), written tensor by tensor; ids.npy (L random ids)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    shapes = {"wte.weight": (VOCAB, E), "wpe.weight": (POSITIONS, E), "ln_f.weight": (E,), "ln_f.bias": (E,)}
    for n in range(LAYERS):
        for name, shape in {"ln_1.weight": (E,), "ln_1.bias": (E,), "attn.c_attn.weight": (E, 3 * E),
                            "attn.c_attn.bias": (3 * E,), "attn.c_proj.weight": (E, E), "attn.c_proj.bias": (E,),
                            "ln_2.weight": (E,), "ln_2.bias": (E,), "mlp.c_fc.weight": (E, 4 * E),
                            "mlp.c_fc.bias": (4 * E,), "mlp.c_proj.weight": (4 * E, E), "mlp.c_proj.bias": (E,)}.items():
            shapes[f"h.{n}.{name}"] = shape
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(shapes):
        size = 4 * int(np.prod(shapes[name]))
        header[name] = {"dtype": "F32", "shape": list(shapes[name]), "data_offsets": [at, at + size]}
        at += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for name in sorted(shapes):
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                data = np.ones(shapes[name], np.float32)
            elif name.endswith(".bias"):
                data = np.zeros(shapes[name], np.float32)
            else:
                data = (rng.standard_normal(shapes[name], dtype=np.float32) * 0.02).astype(np.float32)
            f.write(data.tobytes())
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": E, "n_head": HEADS,
              "n_layer": LAYERS, "n_positions": POSITIONS, "vocab_size": VOCAB, "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "bos_token_id": 50256, "eos_token_id": 50256}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    np.save(os.path.join(folder, "ids.npy"), rng.integers(0, VOCAB - 1, L).astype(np.int64))


# The checkpoint DIR = folder read into torch tensors t[name] and cfg, with read_npy, conv1d and
# layer_norm (shared with interventions_bench.py's scripts, which set folder and threads first).
TORCH_LOAD = r"""
import ast, json, math, statistics, struct, sys, time
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(threads)

def read_npy(path):
    data = open(path, "rb").read()
    n, start = (struct.unpack("<H", data[8:10])[0], 10) if data[6] == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + n].decode("latin1"))
    dtype = {"<f4": torch.float32, "<i8": torch.int64}[header["descr"]]
    return torch.frombuffer(bytearray(data[start + n:]), dtype=dtype).reshape(header["shape"])

data = open(folder + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = {}
for name, meta in json.loads(data[8:8 + n]).items():
    if name != "__metadata__":
        b, e = meta["data_offsets"]
        t[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(meta["shape"])
del data
cfg = json.load(open(folder + "/config.json"))
E, H, N = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
P = E // H

def conv1d(w, b):  # GPT-2's Conv1D (in, out) as an nn.Linear
    m = nn.Linear(w.shape[0], w.shape[1])
    m.weight.data, m.bias.data = w.t().contiguous(), b
    return m

def layer_norm(prefix):
    m = nn.LayerNorm(E, eps=cfg["layer_norm_epsilon"])
    m.weight.data, m.bias.data = t[prefix + ".weight"], t[prefix + ".bias"]
    return m
"""

# Run by --python in a fresh interpreter; argv: DIR logits.npy threads reps. Prints one JSON object.
TORCH_SCRIPT = r"""
import sys
folder, logits_path, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
""" + TORCH_LOAD + r"""
class Block(nn.Module):  # transformers' GPT2Block, eager attention
    def __init__(self, i):
        super().__init__()
        p = f"h.{i}."
        self.ln_1, self.ln_2 = layer_norm(p + "ln_1"), layer_norm(p + "ln_2")
        self.c_attn = conv1d(t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"])
        self.c_proj = conv1d(t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"])
        self.c_fc = conv1d(t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"])
        self.mlp_proj = conv1d(t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"])

    def forward(self, x, mask):
        L = x.shape[0]
        q, k, v = self.c_attn(self.ln_1(x)).view(L, 3, H, P).permute(1, 2, 0, 3)
        scores = torch.where(mask, (q @ k.transpose(-1, -2)) / math.sqrt(P), torch.finfo(x.dtype).min)
        weights = scores.softmax(-1)
        x = x + self.c_proj((weights @ v).transpose(0, 1).reshape(L, E))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")), weights

wte, wpe = nn.Embedding.from_pretrained(t["wte.weight"]), nn.Embedding.from_pretrained(t["wpe.weight"])
blocks = [Block(i).eval() for i in range(N)]
ln_f = layer_norm("ln_f")
ids = read_npy(folder + "/ids.npy")
L = ids.shape[0]
mask = torch.ones(L, L, dtype=torch.bool).tril()

def forward():
    x = wte(ids) + wpe(torch.arange(L))
    attentions = []
    for b in blocks:
        x, w = b(x, mask)
        attentions.append(w)
    return ln_f(x) @ wte.weight.t(), attentions

with torch.no_grad():
    first = forward()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        forward()
        times.append(time.perf_counter() - t0)
ours = read_npy(logits_path)
print(json.dumps({"torch": torch.__version__, "seconds": statistics.median(times),
                  "max_diff": float((first[0] - ours).abs().max())}))
"""


def sgemm_gflops(build, threads, env=None):
    """OpenBLAS's sgemm GFLOP/s at 2048^3 on THREADS threads (build/tests/sgemm_ceiling)."""
    return float(subprocess.check_output([os.path.join(build, "tests", "sgemm_ceiling"), "2048", str(threads)],
                                         env=env).split()[0])


def median_process(cmd, reps, env, before_each=None):
    """Median wall seconds of REPS runs of CMD (after one warm-up run), and the CPU seconds of the
    median-time run's neighbourhood (user + system of the children, per run); with BEFORE_EACH, it
    is called right before each timed run (a ceiling measured back to back with it)."""
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    times, cpu = [], []
    for _ in range(reps):
        if before_each:
            before_each()
        before = os.times()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t0)
        after = os.times()
        cpu.append(after.children_user - before.children_user + after.children_system - before.children_system)
    return sorted(times)[len(times) // 2], sorted(cpu)[len(cpu) // 2], times


def torch_layouts(threads, torch_envs):
    """The ways PyTorch can use THREADS cores, each (label, torch.set_num_threads, environment):
    for each of TORCH_ENVS, its own threads and its BLAS's at THREADS, and, on more than one thread,
    its own at 1 with the BLAS's at THREADS. Debian's PyTorch calls a pthreads OpenBLAS that
    torch.set_num_threads does not reach: left alone it runs on every core whatever the thread count
    (a 1-thread row would be timed on all of them), and with PyTorch's OpenMP workers beside
    OpenBLAS's own on two cores the eager forward is 2-3x slower than with one of them. Benches take
    the fastest layout: the strongest baseline that stays within THREADS cores."""
    layouts = []
    for label, env in torch_envs.items():
        blas = dict(env, OPENBLAS_NUM_THREADS=str(threads))
        layouts.append((f"{label}, {threads} + BLAS {threads}", threads, blas))
        if threads > 1:
            layouts.append((f"{label}, 1 + BLAS {threads}", 1, blas))
    return layouts


def model_bench(build, work, threads, python, reps, torch_envs, torch_version):
    """Rows {threads, attntrace, busy, torch, torch_env, ratio, share, rounds, gflop, max_diff} of
    the whole-model case at each thread count. Each attntrace run follows its own sgemm ceiling
    measurement, back to back, and the share is the median of those rounds' shares. PyTorch is
    timed in each of torch_layouts(TORCH_ENVS) (bench.py's environments: as installed, and with
    attntrace's OPENBLAS_CORETYPE when it calls OpenBLAS); the fastest counts."""
    folder = os.path.join(work, "gpt2_small")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        make_checkpoint(folder)
    logits = os.path.join(work, "model_logits.npy")
    rows = []
    for t in threads:
        cmd = [os.path.join(build, "attntrace"), "model", folder, "--ids", os.path.join(folder, "ids.npy"),
               "--logits", logits, "--threads", str(t)]
        # each run right after a ceiling measurement: the share is the median of those rounds' shares
        round_ceilings = []
        seconds, cpu, times = median_process(cmd, reps, dict(os.environ),
                                             lambda: round_ceilings.append(sgemm_gflops(build, t)))
        shares = sorted(gflop() / s / c for s, c in zip(times, round_ceilings))
        row = {"threads": t, "attntrace": seconds, "busy": cpu / seconds, "gflop": gflop(), "torch": None,
               "torch_env": None, "ratio": None, "max_diff": None, "share": shares[len(shares) // 2],
               "rounds": [{"sgemm_gflops": c, "seconds": s} for s, c in zip(times, round_ceilings)]}
        for label, intra, env in (torch_layouts(t, torch_envs) if torch_version else []):
            out = json.loads(subprocess.check_output([python, "-c", TORCH_SCRIPT, folder, logits, str(intra), str(reps)],
                                                     env=env))
            row.setdefault("torch_by_layout", {})[label] = out["seconds"]
            if intra == t and (row.get("torch_plain") is None or out["seconds"] < row["torch_plain"]):
                row["torch_plain"] = out["seconds"]  # set_num_threads(t), the issue's own reading
            if row["torch"] is None or out["seconds"] < row["torch"]:
                row.update(torch=out["seconds"], torch_env=label, max_diff=out["max_diff"])
        if row["torch"]:
            row["ratio"] = row["torch"] / seconds
        rows.append(row)
        print(f"model gpt2-small L={L} at {t} thread(s): attntrace {1000 * seconds:.0f} ms (busy cores {row['busy']:.2f})"
              + (f", PyTorch {1000 * row['torch']:.0f} ms ({row['torch_env']}), ratio {row['ratio']:.2f}x, logits max "
                 f"|diff| {row['max_diff']:.1e}" if row["torch"] else ", no PyTorch")
              + (f", {100 * row['share']:.0f}% of the sgemm ceiling" if row["share"] else ""), flush=True)
    return rows


RATIO_GOAL, SHARE_GOAL = 1.0, 0.85  # issue 38, on 2 threads: >= 1.0x PyTorch's fastest layout, >= 85% of sgemm


def markdown(rows):
    """The whole-model table: one row per thread count, each figure next to issue 38's goals (set
    for 2 threads; shown on every row). The ratio is to PyTorch's fastest layout on those cores
    (torch_layouts); the next column gives the ratio to torch.set_num_threads(threads) with its BLAS
    on as many, the plain reading of "PyTorch on N threads", and PyTorch's own share of the ceiling
    shows how far any ratio can go."""
    lines = [f"Whole model: GPT-2-small shape (12 layers, E {E}, vocabulary {VOCAB}), L = {L}, every layer and the "
             f"logits, {gflop():.1f} GFLOP, float32",
             "",
             f"| threads | attntrace (whole process) | busy cores | PyTorch eager, fastest layout (warm) | ratio | "
             f"goal ≥ {RATIO_GOAL:.1f}× | ratio to set_num_threads(N) | share of sgemm ceiling | goal ≥ {100 * SHARE_GOAL:.0f}% |",
             "|---|---|---|---|---|---|---|---|---|"]
    met = lambda ok, value: "n/a" if value is None else ("met" if ok else "not met")
    for r in rows:
        torch, plain = "n/a", "n/a"
        if r["torch"]:
            torch_share = f", {100 * r['share'] * r['attntrace'] / r['torch']:.0f}% of the ceiling" if r["share"] else ""
            torch = f"{1000 * r['torch']:.0f} ms ({r['torch_env']}{torch_share})"
            same = r.get("torch_plain")
            plain = f"{same / r['attntrace']:.2f}× ({1000 * same:.0f} ms)" if same else "n/a"
        ratio = f"{r['ratio']:.2f}×" if r["ratio"] else "n/a"
        share = f"{100 * r['share']:.0f}%" if r["share"] else "n/a"
        lines.append(f"| {r['threads']} | {1000 * r['attntrace']:.0f} ms | {r['busy']:.2f} | {torch} | {ratio} | "
                     f"{met(r['ratio'] is not None and r['ratio'] >= RATIO_GOAL, r['ratio'])} | {plain} | {share} | "
                     f"{met(r['share'] is not None and r['share'] >= SHARE_GOAL, r['share'])} |")
    return "\n".join(lines)
