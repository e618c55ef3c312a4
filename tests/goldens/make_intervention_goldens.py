#!/usr/bin/python3
"""Goldens of lens, ablate, attribute and patch (docs/interventions.md), in float64.

Regenerate: /usr/bin/python3 tests/goldens/make_intervention_goldens.py
            (writes tests/fixtures/models/full_<case>/golden/interventions.json; about 30 s)
Checked by: tests/e2e/intervention_goldens.sh

The definitions of docs/interventions.md computed with hf_model.py (the float64 transcription of
transformers' eager forward of every family, cross-checked by check_hf_model.py) run with
hf_attention.SITE_HOOK at the sites TransformerLens names (resid_pre, z, attn_out, mlp_out,
resid_final): nothing of attntrace's is used. Each case's metric position P is the last token
(a masked LM's: position 3); the target is the clean run's most likely token at P and `versus`
its second; the corrupted prompt changes the token before P (after, at P = 0) to another token of the
prompt.

interventions.json: {"position", "target", "versus", "corrupt_ids",
  "lens": {"top": (N+1, L) top-1 ids, "top_probability": (N+1, L), "target_probability": (N+1, L),
           "target_rank": (N+1, L)},
  "ablate": {"clean": log p(target), "zero": (N, H), "mean": (N, H)  [metric(ablated) - metric(clean)],
             "list": {"heads": [[l, h], ...], "metric", "kl"}, "list_logdiff": {...same with versus}},
  "attribute": null for post-norm families, else {"value", "constant", "components": [[kind, layer,
               head, value], ...]} for logit[target] - logit[versus],
  "patch": {"clean", "corrupt", "head": (N, H), "resid": (N, L), "attn": (N, L), "mlp": (N, L)}}
"""
import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_attention as hfa  # noqa: E402
import hf_model  # noqa: E402
import make_checkpoint_goldens as mcg  # noqa: E402

ROOT = mcg.ROOT
SANDWICH = ("gemma2", "gemma3_text", "olmo2")  # a norm on the attention's output before the residual


@contextlib.contextmanager
def hooks(table, keep=None):
    """SITE_HOOK for the duration: TABLE {(name, layer): fn(value, project) -> value} edits; KEEP
    (a dict) gets every site's value as the forward reached it, and each z site's projection."""
    def hook(name, layer, value, project):
        if keep is not None:
            keep[(name, layer)] = value.clone()
            if project is not None:
                keep[("project", layer)] = project
        fn = table.get((name, layer))
        return value if fn is None else fn(value, project)
    old, hfa.SITE_HOOK = hfa.SITE_HOOK, hook
    try:
        yield
    finally:
        hfa.SITE_HOOK = old


def run(case, ids, table=None, keep=None):
    with hooks(table or {}, keep), torch.no_grad():
        return hf_model.forward(case["tensors"], case["cfg"], ids)["logits"]


def final_norm_params(case):
    """(kind, weight, bias, eps) of the final norm: LayerNorm or RMSNorm (Gemma's with 1 + w)."""
    cfg, t, prefix = case["full"], case["tensors"], case["prefix"]
    kind = cfg["model_type"]
    if kind in ("gemma", "gemma2", "gemma3_text"):
        return "rms", 1.0 + t[prefix + "norm.weight"], None, cfg["rms_norm_eps"]
    if kind in hf_model.LLAMA_LIKE:
        return "rms", t[prefix + "norm.weight"], None, cfg["rms_norm_eps"]
    name, eps = {"gpt2": ("ln_f", "layer_norm_epsilon"), "bloom": ("ln_f", "layer_norm_epsilon"),
                 "gpt_neox": ("final_layer_norm", "layer_norm_eps")}[kind]
    return "ln", t[prefix + name + ".weight"], t[prefix + name + ".bias"], cfg[eps]


def unembedding(case):
    """(V, E) W_U and the head's bias (V) or None."""
    cfg, t, prefix = case["full"], case["tensors"], case["prefix"]
    untied = "embed_out.weight" if cfg["model_type"] == "gpt_neox" else "lm_head.weight"
    return hf_model.output_embeddings(t, cfg, prefix, untied), None


def unembed(case, x, capped=True):
    """Logits (R, V) of residual rows X (R, E): the final norm afresh, then the head."""
    cfg = dict(case["cfg"])
    if not capped:
        cfg["final_logit_softcapping"] = None
    full = hf_model.with_defaults(cfg)
    with torch.no_grad():
        return hf_model.lm_head(case["tensors"], full, case["prefix"],
                                hf_model.final_norm(case["tensors"], full, case["prefix"], x))


# -------------------------------------------------------------------------------------- analyses
def lens(case, ids, target):
    keep = {}
    run(case, ids, keep=keep)
    n = case["layers"]
    rows = [keep[("resid_pre", l)][0] for l in range(n)] + [keep[("resid_final", n)][0]]
    probs = torch.stack([unembed(case, r).softmax(-1) for r in rows])  # (N+1, L, V)
    top = probs.argmax(-1)
    target_p = probs[..., target]
    rank = 1 + (probs > target_p[..., None]).sum(-1)
    return {"top": top.tolist(), "top_probability": probs.max(-1).values.tolist(),
            "target_probability": target_p.tolist(), "target_rank": rank.tolist()}


def zero_head(h, p):
    return zero_heads([h], p)


def zero_heads(hs, p):
    def fn(z, project):
        z = z.clone()
        for h in hs:
            z[..., h * p:(h + 1) * p] = 0
        return z
    return fn


def mean_head(h, p, clean_z):
    def fn(z, project):
        z = z.clone()
        z[..., h * p:(h + 1) * p] = clean_z[..., h * p:(h + 1) * p].mean(dim=1, keepdim=True)
        return z
    return fn


def log_prob(logits, pos, target):
    return float(logits[pos].log_softmax(-1)[target])


def ablate(case, ids, pos, target, versus):
    keep = {}
    clean = run(case, ids, keep=keep)
    n, heads = case["layers"], case["heads"]
    p = keep[("z", 0)].shape[-1] // heads
    m_clean = log_prob(clean, pos, target)
    out = {"clean": m_clean}
    for mode in ("zero", "mean"):
        values = np.zeros((n, heads))
        for layer in range(n):
            for h in range(heads):
                fn = zero_head(h, p) if mode == "zero" else mean_head(h, p, keep[("z", layer)])
                values[layer, h] = log_prob(run(case, ids, {("z", layer): fn}), pos, target) - m_clean
        out[mode] = values.tolist()
    chosen = [[0, 1 % heads], [n - 1, 0]]
    layers = sorted({layer for layer, _ in chosen})
    table = {("z", layer): zero_heads([h for l, h in chosen if l == layer], p) for layer in layers}
    ablated = run(case, ids, table)
    lp, lq = clean[pos].log_softmax(-1), ablated[pos].log_softmax(-1)
    kl = float((lp.exp() * (lp - lq)).sum())
    out["list"] = {"heads": chosen, "metric": log_prob(ablated, pos, target), "kl": kl,
                   "logit_diff": float(ablated[pos][target] - ablated[pos][versus]),
                   "clean_logit_diff": float(clean[pos][target] - clean[pos][versus])}
    return out


def attribute(case, ids, pos, target, versus):
    kind = case["full"]["model_type"]
    if kind in ("bert", "roberta") or (kind == "bloom" and case["full"]["apply_residual_connection_post_layernorm"]):
        return None
    keep = {}
    run(case, ids, keep=keep)
    n, heads = case["layers"], case["heads"]
    norm, w, b, eps = final_norm_params(case)
    w_u, head_bias = unembedding(case)
    d = w_u[target] - w_u[versus]
    x = keep[("resid_final", n)][0, pos]
    if norm == "ln":
        scale = torch.sqrt(((x - x.mean()) ** 2).mean() + eps)
    else:
        scale = torch.sqrt((x * x).mean() + eps)

    def through(c):
        c = c - c.mean() if norm == "ln" else c
        return float((c / scale * w * d).sum())

    comps = [["embed", None, None, through(keep[("resid_pre", 0)][0, pos])]]
    for layer in range(n):
        if kind in SANDWICH:
            comps.append(["attn", layer, None, through(keep[("attn_out", layer)][0, pos])])
        else:
            z, project = keep[("z", layer)], keep[("project", layer)]
            p = z.shape[-1] // heads
            bias = project(torch.zeros_like(z))[0, pos]
            for h in range(heads):
                only = torch.zeros_like(z)
                only[..., h * p:(h + 1) * p] = z[..., h * p:(h + 1) * p]
                comps.append(["head", layer, h, through(project(only)[0, pos] - bias)])
            if float(bias.abs().max()) > 0:
                comps.append(["attn_bias", layer, None, through(bias)])
        comps.append(["mlp", layer, None, through(keep[("mlp_out", layer)][0, pos])])
    constant = float((b * d).sum()) if b is not None else 0.0
    if head_bias is not None:
        constant += float(head_bias[target] - head_bias[versus])
    comps.append(["constant", None, None, constant])
    raw = unembed(case, keep[("resid_final", n)][0], capped=False)[pos]
    return {"value": float(raw[target] - raw[versus]), "constant": constant, "components": comps}


def patch(case, clean_ids, corrupt_ids, pos, target, versus):
    keep = {}
    metric = lambda logits: float(logits[pos][target] - logits[pos][versus])  # noqa: E731
    m_clean = metric(run(case, clean_ids, keep=keep))
    m_corrupt = metric(run(case, corrupt_ids))
    n, heads, length = case["layers"], case["heads"], clean_ids.shape[0]
    p = keep[("z", 0)].shape[-1] // heads
    out = {"clean": m_clean, "corrupt": m_corrupt}

    def take(name, layer, lo, hi, axis_positions):
        clean = keep[(name, layer)]

        def fn(v, project):
            v = v.clone()
            if axis_positions:
                v[:, lo:hi] = clean[:, lo:hi]
            else:
                v[..., lo:hi] = clean[..., lo:hi]
            return v
        return fn

    for site, name, per in (("head", "z", heads), ("resid", "resid_pre", length), ("attn", "attn_out", length),
                            ("mlp", "mlp_out", length)):
        values = np.zeros((n, per))
        for layer in range(n):
            for k in range(per):
                fn = take(name, layer, k * p, (k + 1) * p, False) if site == "head" else take(name, layer, k, k + 1, True)
                values[layer, k] = (metric(run(case, corrupt_ids, {(name, layer): fn})) - m_corrupt) / (m_clean - m_corrupt)
        out[site] = values.tolist()
    return out


# ------------------------------------------------------------------------------------------ main
def load(folder):
    cfg = json.loads((folder / "config.json").read_text())
    tensors = mcg.read_checkpoint(folder)
    full = hf_model.with_defaults(cfg)
    layers, _, heads = hf_model.sizes(full)
    return {"cfg": cfg, "full": full, "tensors": tensors, "prefix": hf_model.base_prefix(tensors, cfg["model_type"]),
            "layers": layers, "heads": heads}


def make(folder):
    case = load(folder)
    ids = torch.from_numpy(np.load(folder / "ids.npy"))
    masked = case["full"]["model_type"] in ("bert", "roberta")
    pos = 3 if masked else ids.shape[0] - 1
    clean = run(case, ids)
    if clean is None:
        return None
    order = torch.argsort(clean[pos], descending=True)
    target, versus = int(order[0]), int(order[1])
    corrupt = ids.clone()  # the token before P changed: within reach of P through Mistral's window too
    at = pos - 1 if pos > 0 else pos + 1
    corrupt[at] = next(int(v) for v in ids if int(v) != int(ids[at]))
    doc = {"position": pos, "target": target, "versus": versus, "corrupt_ids": corrupt.tolist(),
           "lens": lens(case, ids, target), "ablate": ablate(case, ids, pos, target, versus),
           "attribute": attribute(case, ids, pos, target, versus),
           "patch": patch(case, ids, corrupt, pos, target, versus)}
    (folder / "golden" / "interventions.json").write_text(json.dumps(doc) + "\n")
    return doc


def main():
    names = sys.argv[1:] or sorted(p.name for p in ROOT.glob("full_*") if p.is_dir())
    for name in names:
        doc = make(ROOT / name)
        print(f"{name}: {'no head, skipped' if doc is None else 'ok'}", flush=True)


if __name__ == "__main__":
    main()
