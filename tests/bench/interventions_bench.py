#!/usr/bin/python3
"""The interventions' sweeps against the same sweeps as TransformerLens runs them (issues 34, 35, 38).

On model_bench.py's GPT-2-small-shaped random float32 checkpoint (12 layers, 12 heads, E 768,
vocabulary 50257), one run of this script prints, side by side:

  ablate   `attntrace ablate DIR --ids ... --heads each` at L = 32 (zero ablation, the clean top-1
           token's log-probability at the last position), the whole process;
  patch    `attntrace patch DIR --clean-ids ... --corrupt-ids ... --site head` and `--site resid` at
           L = 16 (the logit difference of two tokens at the last position; the prompts differ in one
           token), the whole process;
  PyTorch  the same sweeps as TransformerLens runs them (HookedTransformer + a hook on
           blocks.n.attn.hook_z / hook_resid_pre: utils.test_prompt-style ablation loops and
           patching.py's get_act_patch_attn_head_out_all_pos / get_act_patch_resid_pre): one whole
           float32 eager forward per ablated head or patched site, the logits of every position, a
           hook replacing the activation, the clean run's activations cached once; the model in
           memory, warm (one warm-up sweep). Timed in PyTorch's fastest layout on the same cores
           (model_bench.torch_layouts), the fastest counting.
  and the largest |difference| between the two sweeps' values (they must agree).

Usage: /usr/bin/python3 tests/bench/interventions_bench.py [--build build] [--threads 2] [--work DIR]
       [--reps 1] [--python /usr/bin/python3]
Goal (issues 34 and 35): attntrace >= 5x the TransformerLens-style loop, with equal values.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_bench  # noqa: E402

# Run by --python; argv: DIR mode clean_ids corrupt_ids target versus threads reps out.npy. Prints JSON.
TORCH_SWEEP = r"""
import sys
folder, mode, clean_ids, corrupt_ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
target, versus, threads, reps, out_path = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
""" + model_bench.TORCH_LOAD + r"""
import numpy as np

class Block(nn.Module):  # GPT2Block, eager attention, with TransformerLens's hook points
    def __init__(self, i):
        super().__init__()
        p = f"h.{i}."
        self.ln_1, self.ln_2 = layer_norm(p + "ln_1"), layer_norm(p + "ln_2")
        self.c_attn = conv1d(t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"])
        self.c_proj = conv1d(t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"])
        self.c_fc = conv1d(t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"])
        self.mlp_proj = conv1d(t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"])

    def forward(self, x, mask, hook_resid_pre, hook_z):
        x = hook_resid_pre(x)
        L = x.shape[0]
        q, k, v = self.c_attn(self.ln_1(x)).view(L, 3, H, P).permute(1, 2, 0, 3)
        scores = torch.where(mask, (q @ k.transpose(-1, -2)) / math.sqrt(P), torch.finfo(x.dtype).min)
        z = hook_z((scores.softmax(-1) @ v).transpose(0, 1))  # (L, H, P): blocks.n.attn.hook_z
        x = x + self.c_proj(z.reshape(L, E))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

wte, wpe = nn.Embedding.from_pretrained(t["wte.weight"]), nn.Embedding.from_pretrained(t["wpe.weight"])
blocks = [Block(i).eval() for i in range(N)]
ln_f = layer_norm("ln_f")
ident = lambda a: a

def run(ids, hooks={}, cache=None):
    L = ids.shape[0]
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    x = wte(ids) + wpe(torch.arange(L))
    for i, b in enumerate(blocks):
        def keep(kind):
            def f(a):
                if cache is not None: cache[(kind, i)] = a.clone()
                return hooks.get((kind, i), ident)(a)
            return f
        x = b(x, mask, keep("resid_pre"), keep("z"))
    return ln_f(x) @ wte.weight.t()  # (L, V): every position's logits, as HookedTransformer returns them

def ids_of(text):
    return torch.tensor([int(v) for v in text.split(",")], dtype=torch.int64)

def metric_of(logits):
    last = logits[-1]
    if mode == "ablate":
        return float(last.log_softmax(-1)[target])
    return float(last[target] - last[versus])

def sweep():
    clean = ids_of(clean_ids)
    if mode == "ablate":
        base = metric_of(run(clean))
        out = np.zeros((N, H))
        for n in range(N):
            for h in range(H):
                def zero(z, h=h):
                    z = z.clone(); z[:, h] = 0; return z
                out[n, h] = metric_of(run(clean, {("z", n): zero})) - base
        return out
    corrupt = ids_of(corrupt_ids)
    cache = {}
    m_clean = metric_of(run(clean, cache=cache))
    m_corrupt = metric_of(run(corrupt))
    per = H if mode == "head" else clean.shape[0]
    out = np.zeros((N, per))
    for n in range(N):
        for k in range(per):
            if mode == "head":
                def patch(z, n=n, k=k):
                    z = z.clone(); z[:, k] = cache[("z", n)][:, k]; return z
                hooks = {("z", n): patch}
            else:
                def patch(x, n=n, k=k):
                    x = x.clone(); x[k] = cache[("resid_pre", n)][k]; return x
                hooks = {("resid_pre", n): patch}
            out[n, k] = (metric_of(run(corrupt, hooks)) - m_corrupt) / (m_clean - m_corrupt)
    return out

with torch.no_grad():
    values = sweep()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sweep()
        times.append(time.perf_counter() - t0)
np.save(out_path, values)
print(json.dumps({"seconds": statistics.median(times)}))
"""


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def ours(build, folder, args, reps):
    cmd = [os.path.join(build, "attntrace"), *args]
    seconds = model_bench.median_process(cmd, reps, dict(os.environ))[0]
    return seconds


def fastest_torch(python, folder, mode, clean, corrupt, target, versus, threads, reps, work):
    best = None
    envs = {"torch": dict(os.environ)}
    core = os.environ.get("OPENBLAS_CORETYPE")
    if not core and "Xeon" in cpu_name():
        envs["torch, OPENBLAS_CORETYPE=SkylakeX"] = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
    for label, intra, env in model_bench.torch_layouts(threads, envs):
        out = os.path.join(work, f"torch_{mode}.npy")
        res = json.loads(subprocess.check_output(
            [python, "-c", TORCH_SWEEP, folder, mode, clean, corrupt, str(target), str(versus), str(intra), str(reps), out],
            env=env))
        if best is None or res["seconds"] < best[0]:
            best = (res["seconds"], label, np.load(out))
    return best


def case(build, python, folder, work, threads, reps, mode, length):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, model_bench.VOCAB - 1, length)
    clean = ",".join(map(str, ids))
    corrupt_ids = ids.copy()
    corrupt_ids[length // 2] = (corrupt_ids[length // 2] + 1) % (model_bench.VOCAB - 1)
    corrupt = ",".join(map(str, corrupt_ids))
    values = os.path.join(work, f"ours_{mode}.npy")
    common = ["--threads", str(threads), "-o", values]
    if mode == "ablate":
        # the target TransformerLens's loop uses: the clean run's top-1 (attntrace picks the same by default)
        doc = json.loads(subprocess.check_output([os.path.join(build, "attntrace"), "ablate", folder, "--ids", clean,
                                                  "--heads", "0.0", "--format", "json", "--threads", str(threads)]))
        target, versus = doc["metric"]["target"], 0
        args = ["ablate", folder, "--ids", clean, "--heads", "each", *common]
    else:
        target, versus = 11, 12
        args = ["patch", folder, "--clean-ids", clean, "--corrupt-ids", corrupt, "--target-id", str(target),
                "--versus-id", str(versus), "--site", mode, *common]
    seconds = ours(build, folder, args, reps)
    torch_s, label, torch_values = fastest_torch(python, folder, mode, clean, corrupt, target, versus, threads, reps, work)
    diff = float(np.abs(np.load(values) - torch_values).max())
    scale = float(np.abs(torch_values).max())
    return {"case": f"{'ablate --heads each' if mode == 'ablate' else 'patch --site ' + mode}, L = {length}",
            "attntrace": seconds, "torch": torch_s, "torch_layout": label, "ratio": torch_s / seconds,
            "max_diff": diff, "scale": scale}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "attntrace_bench"))
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    folder = os.path.join(a.work, "gpt2_small")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        model_bench.make_checkpoint(folder)
    print(f"CPU: {cpu_name()}, {a.threads} thread(s); OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}",
          flush=True)
    rows = []
    for mode, length in (("ablate", 32), ("head", 16), ("resid", 16)):
        r = case(a.build, a.python, folder, a.work, a.threads, a.reps, mode, length)
        rows.append(r)
        print(f"{r['case']}: attntrace {r['attntrace']:.2f} s, TransformerLens-style PyTorch {r['torch']:.2f} s "
              f"({r['torch_layout']}), ratio {r['ratio']:.1f}x (goal >= 5x), values max |diff| {r['max_diff']:.1e} "
              f"(of {r['scale']:.2g})", flush=True)
    print("\n| sweep | attntrace (whole process) | TransformerLens-style PyTorch (warm) | ratio | goal ≥ 5× | values max |diff| |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['attntrace']:.2f} s | {r['torch']:.2f} s ({r['torch_layout']}) | {r['ratio']:.1f}× | "
              f"{'met' if r['ratio'] >= 5 else 'not met'} | {r['max_diff']:.1e} |")


if __name__ == "__main__":
    main()
