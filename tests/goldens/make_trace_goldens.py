#!/usr/bin/python3
"""Golden text traces for the seed examples, computed in PyTorch (not by attntrace).

Run from anywhere:  /usr/bin/python3 tests/goldens/make_trace_goldens.py
Writes tests/goldens/traces/NAME.values.txt (`--trace values`) and NAME.shapes.txt (the default
`--trace shapes`) for every `attntrace ...  # expect: NAME` line of data/README.md; with --check it
writes nothing and exits 1 when a committed golden is stale: its layout differs from what it would
write, or a number differs beyond float32 rounding (numtext.py: torch's own sums round differently
on another CPU, so the text it writes today is not compared byte for byte).
tests/e2e/trace_goldens.sh runs each command (stdout a pipe: plain ASCII, no colour) and compares
it with the golden the same way (numtext.py).

How each golden is made:
  - the command's flags are parsed here (-q -k -v --heads --params --scale --valid-lens
    --no-out-proj), the data files and params are read with numpy / st.py;
  - every stage is computed in torch float32 with the intended math, stage by stage:
      mha:  q = F.linear(query, W_q, b_q) (k, v likewise), split into heads with
            .view(B, L, H, P).transpose(1, 2), scores = q_heads @ k_headsᵀ * scale,
            masked_scores = scores with -inf where a mask forbids the key, weights =
            softmax(masked_scores) (an empty row is all zeros), context = weights @ v_heads,
            merged = context.transpose(1, 2).reshape(B, Lq, H*Pv), output = F.linear(merged, W_o, b_o)
            or merged with --no-out-proj; a 2-D input drops the B axis from every stage;
      sdpa: scores = q @ kᵀ * scale, masked_scores, weights = softmax, output = weights @ v;
  - each tensor is printed with torch's own str();
  - the header, notes and head statistics follow attntrace's layout (lib/attention/trace.cpp,
    lib/attention/stage_report.cpp, app/cmd_mha.cpp, app/cmd_sdpa.cpp): the header's scale is the shortest
    form of the float32 scale (std::to_chars: fixed or scientific, whichever is shorter), the head
    statistics come from torch's weights (mean entropy over the non-empty rows of every batch in
    nats, 3 decimals; for the first 8 queries of batch 0 the first key with the most weight and
    that weight, 2 decimals).

LAYOUT_FIXES: where attntrace's current layout reads wrong, the goldens hold the proposed text
instead (so trace_goldens.sh fails, naming the fix, until the C++ follows). Each entry says what
attntrace prints today; set it to False to regenerate with today's text.
"""
import argparse
import math
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "goldens" / "traces"
sys.dont_write_bytecode = True
sys.path.insert(0, str(REPO / "tests" / "goldens"))
import numtext  # noqa: E402
import st  # noqa: E402

LAYOUT_FIXES = {
    # "mha: 1 heads", "split into 1 heads of 8": a count of one takes the singular.
    "singular_head": True,
    # "valid lens --valid-lens" for `--valid-lens 3,2`: the note names the flag instead of the
    # lengths. Proposed: "valid lens 3,2" (a file keeps its path: "valid lens data/d2l/x.npy").
    "inline_valid_lens": True,
}

TOP_QUERIES = 8  # TextStyle::top_queries
def head_stats_title(batched):
    return ("head statistics: mean entropy of the weight rows (nats); per query" +
            (" of batch 0" if batched else "") + ", the key with the most weight")


DETECTORS_TITLE = ("head detectors: means over batch and query rows of w[i, i-1], w[i, i], w[i, 0] and the "
                   "row maximum; a head is named when its score reaches 0.5")
ROLE_THRESHOLD = 0.5  # kRoleThreshold in lib/include/attntrace/attention/detectors.hpp


def weight_text(w):
    """2 decimals, or 2 significant digits below 0.01 (attntrace's weight_text)."""
    return f"{w:.2f}" if w >= 0.01 or w == 0 else f"{w:.1e}"


# ---- numbers and shapes as attntrace writes them -----------------------------------------------

def shortest_float32(x):
    """std::to_chars(float) with no format: the shortest round-trip digits, fixed or scientific,
    whichever is shorter (fixed on a tie)."""
    f = np.float32(x)
    if np.isnan(f):
        return "nan"
    if np.isinf(f):
        return "inf" if f > 0 else "-inf"
    fixed = np.format_float_positional(f, unique=True, trim="-")
    sci = np.format_float_scientific(f, unique=True, trim="-", exp_digits=2)
    return fixed if len(fixed) <= len(sci) else sci


def shape_str(shape):
    shape = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def plural(n, word):
    if LAYOUT_FIXES["singular_head"]:
        return f"{n} {word}" + ("" if n == 1 else "s")
    return f"{n} {word}s"


def f32(array):
    return torch.from_numpy(np.ascontiguousarray(np.asarray(array, dtype=np.float32)))


# ---- the runs ----------------------------------------------------------------------------------

class Stage:
    def __init__(self, name, tensor, note, same_as=None):
        # SAME_AS: an input that is the same tensor as an earlier one ("query", "key"): its note
        # says so and its values are not printed again.
        self.name, self.tensor, self.same_as = name, tensor, same_as
        self.note = note + (f" (same as {same_as})" if same_as else "")


def projection_note(inp, which, w, b):
    note = f"{inp} @ W_{which}^T"
    if b is not None:
        note += f" + b_{which}"
    return note + f"   W_{which} {shape_str(w.shape)}"


def load_params(path):
    """attntrace's naming schemes for the seed files: (scheme, {w_q, ..., b_o}, ignored names)."""
    t = st.read(REPO / path)
    if "W_q.weight" in t:
        scheme, names = "d2l", {"q": "W_q", "k": "W_k", "v": "W_v", "o": "W_o" if "W_o.weight" in t else "W_h"}
    elif "toqueries.weight" in t:
        scheme, names = "bloem", {"q": "toqueries", "k": "tokeys", "v": "tovalues", "o": "unifyheads"}
    else:
        raise SystemExit(f"{path}: only the seeds' d2l and bloem names are handled here")
    p, used = {}, set()
    for x, base in names.items():
        for kind in ("weight", "bias"):
            name = f"{base}.{kind}"
            p[f"{kind[0]}_{x}"] = f32(t[name]) if name in t else None
            if name in t:
                used.add(name)
    return scheme, p, sorted(set(t) - used)


def empty_rows_and_softmax(masked):
    """softmax over the last axis; a row with every score -inf becomes all zeros (not NaN)."""
    empty = torch.isneginf(masked).all(dim=-1)
    weights = torch.softmax(masked, dim=-1)
    weights = torch.where(empty[..., None], torch.zeros_like(weights), weights)
    return weights, int(empty.sum())


def masks_note(desc, empty):
    return f"{desc or 'no mask'}, {empty} {'row' if empty == 1 else 'rows'} with no allowed key"


def run_mha(a):
    query = f32(np.load(REPO / a.query))
    key_path = a.key or a.query
    value_path = a.value or key_path
    key = f32(np.load(REPO / key_path))
    value = f32(np.load(REPO / value_path))
    batched = query.dim() == 3
    if not batched:
        query, key, value = query[None], key[None], value[None]
    scheme, p, ignored = load_params(a.params)
    h = a.heads
    B, Lq, _ = query.shape
    Lk = key.shape[1]
    P = p["w_q"].shape[0] // h
    Pv = p["w_v"].shape[0] // h
    scale = np.float32(a.scale) if a.scale is not None else np.float32(1.0 / math.sqrt(P))

    q = F.linear(query, p["w_q"], p["b_q"])                        # (B, Lq, H*P)
    k = F.linear(key, p["w_k"], p["b_k"])                          # (B, Lk, H*P)
    v = F.linear(value, p["w_v"], p["b_v"])                        # (B, Lk, H*Pv)
    q_heads = q.view(B, Lq, h, P).transpose(1, 2)                  # (B, H, Lq, P)
    k_heads = k.view(B, Lk, h, P).transpose(1, 2)                  # (B, H, Lk, P)
    v_heads = v.view(B, Lk, h, Pv).transpose(1, 2)                 # (B, H, Lk, Pv)
    scores = torch.matmul(q_heads, k_heads.transpose(-1, -2)) * torch.tensor(scale)  # (B, H, Lq, Lk)

    allowed = torch.ones(B, h, Lq, Lk, dtype=torch.bool)
    desc = ""
    if a.valid_lens is not None:
        if re.fullmatch(r"[0-9]+(,[0-9]+)*", a.valid_lens):
            lens = torch.tensor([int(x) for x in a.valid_lens.split(",")])
            name = a.valid_lens if LAYOUT_FIXES["inline_valid_lens"] else "--valid-lens"
        else:
            lens = torch.from_numpy(np.load(REPO / a.valid_lens)).long()
            name = a.valid_lens
        pos = torch.arange(Lk)
        if lens.dim() == 1:                                        # (B,)
            allowed &= (pos[None, :] < lens[:, None])[:, None, None, :]
        else:                                                      # (B, Lq)
            allowed &= (pos[None, None, :] < lens[:, :, None])[:, None, :, :]
        desc = "valid lens " + name
    masked = scores.masked_fill(~allowed, float("-inf"))
    weights, empty = empty_rows_and_softmax(masked)                # (B, H, Lq, Lk)
    context = torch.matmul(weights, v_heads)                       # (B, H, Lq, Pv)
    merged = context.transpose(1, 2).reshape(B, Lq, h * Pv)        # (B, Lq, H*Pv)
    if a.no_out_proj:
        output, out_note = merged, "merged (no output projection)"
    else:
        output = F.linear(merged, p["w_o"], p["b_o"])              # (B, Lq, PO)
        out_note = projection_note("merged", "o", p["w_o"], p["b_o"])

    header = (f"mha: {plural(h, 'head')}, head dim {P}, value head dim {Pv}, scale {shortest_float32(scale)}, "
              f"params {a.params} ({scheme})")
    if ignored:
        header += ", ignored: " + " ".join(ignored)
    header += f", {empty} empty rows"
    split = lambda n, d: f"split into {plural(n, 'head')} of {d}"  # noqa: E731
    stages = [
        Stage("query", query, a.query),
        Stage("key", key, key_path, "query" if key_path == a.query else None),
        Stage("value", value, value_path,
              "query" if value_path == a.query else "key" if value_path == key_path else None),
        Stage("q", q, projection_note("query", "q", p["w_q"], p["b_q"])),
        Stage("k", k, projection_note("key", "k", p["w_k"], p["b_k"])),
        Stage("v", v, projection_note("value", "v", p["w_v"], p["b_v"])),
        Stage("q_heads", q_heads, split(h, P)),
        Stage("k_heads", k_heads, split(h, P)),
        Stage("v_heads", v_heads, split(h, Pv)),
        Stage("scores", scores, f"Q @ K^T * {shortest_float32(scale)}"),
        Stage("masked_scores", masked, masks_note(desc, empty)),
        Stage("weights", weights, "softmax over keys"),
        Stage("context", context, "weights @ V per head"),
        Stage("merged", merged, "heads concatenated"),
        Stage("output", output, out_note),
    ]
    if not batched:  # a 2-D input drops the B axis everywhere
        for s in stages:
            s.tensor = s.tensor[0]
    # head statistics: (batches, H, Lq, Lk)
    return header, stages, weights if batched else weights[0][None], batched


def run_sdpa(a):
    q, k, v = (f32(np.load(REPO / path)) for path in (a.query, a.key, a.value))
    scale = np.float32(a.scale) if a.scale is not None else np.float32(1.0 / math.sqrt(q.shape[-1]))
    scores = torch.matmul(q, k.transpose(-1, -2)) * torch.tensor(scale)   # (..., Lq, Lk)
    masked = scores.clone()
    weights, empty = empty_rows_and_softmax(masked)
    output = torch.matmul(weights, v)                                     # (..., Lq, Ev)
    header = f"sdpa: scale {shortest_float32(scale)}, {empty} empty rows"
    stages = [
        Stage("query", q, a.query),
        Stage("key", k, a.key),
        Stage("value", v, a.value),
        Stage("scores", scores, f"Q @ K^T * {shortest_float32(scale)}"),
        Stage("masked_scores", masked, masks_note("", empty)),
        Stage("weights", weights, "softmax over keys"),
        Stage("output", output, "weights @ V"),
    ]
    # the head axis is the one before Lq; every axis before it is a batch axis
    w = weights if weights.dim() >= 3 else weights[None]
    # attntrace's row statistics have Q's shape without E: batched when that has more than 2 dims
    return header, stages, w.reshape(-1, *w.shape[-3:]), q.dim() >= 4


# ---- head statistics ------------------------------------------------------------------------------

def head_statistics(weights, batched):
    """WEIGHTS (batches, H, Lq, Lk) -> the head statistics lines."""
    w = weights.double()
    ent = -torch.where(w > 0, w * torch.log(w), torch.zeros_like(w)).sum(dim=-1)   # (batches, H, Lq)
    empty = ~(w > 0).any(dim=-1)                                                    # (batches, H, Lq)
    best, arg = w.max(dim=-1)   # torch.max: the first index of the maximum
    lines = [head_stats_title(batched)]
    for h in range(w.shape[1]):
        rows = ~empty[:, h]
        mean = float(ent[:, h][rows].mean()) if rows.any() else 0.0
        line = f"head {h}  entropy {mean:.3f}"
        n_empty = int(empty[:, h].sum())
        if n_empty:
            line += f"  empty rows {n_empty}"
        line += " "
        for i in range(min(w.shape[2], TOP_QUERIES)):
            if empty[0, h, i]:
                line += f" q{i}->none"
            else:
                line += f" q{i}->k{int(arg[0, h, i])} {weight_text(float(best[0, h, i]))}"
        lines.append(line)
    return lines


def head_detectors(weights):
    """WEIGHTS (batches, H, Lq, Lk) -> the head detector lines: per head the means, over every
    batch and non-empty query row, of w[i, i-1] (i >= 1), w[i, i] (Lq == Lk only), w[i, 0] and the
    row maximum, 3 decimals ("-" when no row has that key), then the role the first score past the
    threshold names (previous-token, sink, diagonal)."""
    w = weights.double()
    lq, lk = w.shape[-2:]
    i = torch.arange(lq)
    nonempty = (w > 0).any(dim=-1)                                                    # (batches, H, Lq)
    prev = w[..., i, (i - 1).clamp(min=0, max=lk - 1)]                                # (batches, H, Lq)
    diag = w[..., i, i.clamp(max=lk - 1)]
    first, top = w[..., 0], w.max(dim=-1).values
    has_prev = (i >= 1) & (i - 1 < lk)
    lines = [DETECTORS_TITLE]
    for h in range(w.shape[1]):
        rows = nonempty[:, h]
        mean = lambda v, ok: float(v[:, h][ok].mean()) if ok.any() else math.nan
        scores = [mean(prev, rows & has_prev), mean(diag, rows) if lq == lk else math.nan,
                  mean(first, rows), mean(top, rows)]
        text = lambda v: "-" if math.isnan(v) else f"{v:.3f}"
        line = f"head {h}  " + "  ".join(f"{n} {text(v)}" for n, v in
                                         zip(("previous_token", "diagonal", "first_token", "max_weight"), scores))
        for role, v in (("previous-token", scores[0]), ("sink", scores[2]), ("diagonal", scores[1])):
            if not math.isnan(v) and v >= ROLE_THRESHOLD:
                line += "  " + role
                break
        lines.append(line)
    return lines


def render(header, stages, weights, values, batched):
    name_w = max(len(s.name) for s in stages)
    shape_w = max(len(shape_str(s.tensor.shape)) for s in stages)
    out = [header]
    for s in stages:
        out.append(f"{s.name.ljust(name_w)}  {shape_str(s.tensor.shape).ljust(shape_w)}  {s.note}")
        if values and not s.same_as:
            out.append(str(s.tensor))
    out += head_statistics(weights, batched)
    out += head_detectors(weights)
    return "\n".join(out) + "\n"


# ---- the seed commands ----------------------------------------------------------------------------

def parse(command):
    words = shlex.split(command)
    assert words[0] == "attntrace" and words[1] in ("mha", "sdpa"), command
    ap = argparse.ArgumentParser(prog=f"attntrace {words[1]}", add_help=False)
    ap.add_argument("-q", "--query", required=True)
    ap.add_argument("-k", "--key")
    ap.add_argument("-v", "--value")
    ap.add_argument("--scale", type=float)
    if words[1] == "mha":
        ap.add_argument("--heads", type=int, required=True)
        ap.add_argument("--params", required=True)
        ap.add_argument("--valid-lens")
        ap.add_argument("--no-out-proj", action="store_true")
    return words[1], ap.parse_args(words[2:])


def seed_commands():
    pattern = re.compile(r"^(attntrace .*[^ ]) +# expect: ([A-Za-z0-9_]+)$")
    for line in (REPO / "data" / "README.md").read_text().splitlines():
        m = pattern.match(line)
        if m:
            yield m.group(2), m.group(1)


def main():
    check = "--check" in sys.argv[1:]
    torch.set_printoptions(profile="default")
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, command in seed_commands():
        which, args = parse(command)
        header, stages, weights, batched = (run_mha if which == "mha" else run_sdpa)(args)
        for kind, values in (("values", True), ("shapes", False)):
            path = OUT / f"{name}.{kind}.txt"
            text = render(header, stages, weights, values, batched)
            if check:
                same, why = numtext.compare(path.read_text(), text) if path.exists() else (False, "missing")
                if not same:
                    stale.append(f"{path.relative_to(REPO)}: {why}")
            else:
                path.write_text(text)
                print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print("stale:", *stale, sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    main()
