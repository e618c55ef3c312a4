#!/usr/bin/python3
"""Cross-checks of hf_model.py (the float64 whole-model transcription) that can fail. Exit 1 on any
mismatch, 0 with a summary line per check otherwise. Run: /usr/bin/python3 tests/goldens/check_hf_model.py

For every case of tests/fixtures/models/full_cases.json (make_model_goldens.py):
  goldens      hf_model.forward still gives the committed golden/*.npy (the transcription did not drift)
  numpy        an independent numpy forward (this file: embeddings, MLPs, norms, heads, residuals
               written from the papers' / model cards' equations; the attention is
               make_checkpoint_goldens.numpy_reference: explicit slicing, complex rotary, paper ALiBi)
  layer_attn   the attention of block N inside the forward equals hf_attention on hidden_states[N]
               (so hidden_states[N] is what enters block N)
  torch        PyTorch modules with the checkpoint's weights: nn.TransformerEncoderLayer
               (norm_first=False, gelu) for every BERT / RoBERTa block (it is BERT's post-norm block);
               nn.TransformerEncoderLayer(norm_first=True, tanh gelu, causal mask) for every GPT-2
               block; nn.MultiheadAttention for the GPT-2 / BERT / RoBERTa / BLOOM attention weights;
               nn.LayerNorm for every final and embedding LayerNorm
  bf16         bf16 weights read back equal an exact bit-level upcast (uint16 << 16)
  text         golden/text.json (tokenize_texts.mjs) agrees with tokenizer.json: every token's id is its
               vocabulary id, every id is below vocab_size
Then: the activations against F.gelu (exact and approximate="tanh", BLOOM's constant within 1e-9)
and the erf formula; and every one-layer golden of tests/fixtures/models/cases.json through the
configs as hf_model.with_defaults completes them.
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_attention as hf  # noqa: E402
import hf_model  # noqa: E402
import make_checkpoint_goldens as mcg  # noqa: E402

ROOT = mcg.ROOT
TOL = dict(rtol=1e-9, atol=1e-10)  # two float64 computations of the same thing
failures = []
worst = {}


def compare(case, what, got, want, tol=TOL):
    """Record the max abs difference of WHAT; a failure when not allclose (or shapes differ)."""
    got = np.asarray(got.detach().numpy() if torch.is_tensor(got) else got, dtype=np.float64)
    want = np.asarray(want.detach().numpy() if torch.is_tensor(want) else want, dtype=np.float64)
    if got.shape != want.shape:
        failures.append(f"{case}: {what}: shape {got.shape} vs {want.shape}")
        return
    diff = float(np.abs(got - want).max()) if got.size else 0.0
    key = what.split(" ")[0]
    worst[key] = max(worst.get(key, 0.0), diff)
    if not np.allclose(got, want, **tol):
        where = np.unravel_index(np.argmax(np.abs(got - want)), got.shape)
        failures.append(f"{case}: {what}: max abs diff {diff:.3g} at {where}")


# ---------------------------------------------------------------------- independent numpy forward
def np_gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def np_gelu_tanh(x, c=math.sqrt(2.0 / math.pi)):
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x ** 3)))


NP_ACT = {"gelu": np_gelu, "gelu_new": np_gelu_tanh, "gelu_pytorch_tanh": np_gelu_tanh,
          "silu": lambda x: x / (1.0 + np.exp(-x))}


def np_config(cfg):
    """The keys mcg.semantics / numpy_reference read, from config.json as the hub spells it."""
    c = dict(cfg)
    kind = c["model_type"]
    c.setdefault("hidden_size", c.get("n_embd", c.get("n_embed")))
    if kind == "bloom" and "n_embed" in cfg:
        c["hidden_size"] = cfg["n_embed"]
    c.setdefault("num_attention_heads", c.get("n_head"))
    c.setdefault("num_hidden_layers", c.get("n_layer"))
    if kind == "gpt_neox":
        rp = c.get("rope_parameters") or {}
        c["rotary_pct"] = rp.get("partial_rotary_factor", c.get("rotary_pct", 0.25))
        c["rotary_emb_base"] = rp.get("rope_theta", c.get("rotary_emb_base", 10000))
    return c


def np_window(cfg, n):
    """Mistral: sliding_window on every layer; Qwen2/3: only with use_sliding_window, from layer
    max_window_layers on."""
    if cfg["model_type"] == "mistral":
        return cfg.get("sliding_window")
    if cfg["model_type"] in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
        return cfg["sliding_window"] if n >= cfg["max_window_layers"] else None
    return None


def np_attention(kind, t, c, x, n):
    """-> (normed, weights (H, L, L), attention output (L, E)) on x (L, E)."""
    spec = {"kind": "bert" if kind == "roberta" else kind}
    if kind == "gpt2" and c.get("scale_attn_by_inverse_layer_idx"):
        e = c["hidden_size"]
        t = dict(t)  # q k^T / (n + 1): the query columns of c_attn scaled
        scale = np.concatenate([np.full(e, 1.0 / (n + 1)), np.ones(2 * e)])
        t["attn.c_attn.weight"], t["attn.c_attn.bias"] = t["attn.c_attn.weight"] * scale, t["attn.c_attn.bias"] * scale
    spec["semantics"] = mcg.semantics(spec["kind"], c, np_window(c, n))
    normed, _, _, weights, out, _ = mcg.numpy_reference(spec, t, c, x[None], None)
    return (None if normed is None else normed[0]), weights[0], out[0]


def np_block(kind, t, c, x, n):
    """One block on x (L, E) -> (output, attention weights)."""
    ln = mcg.np_layer_norm
    normed, w, a = np_attention(kind, t, c, x, n)
    act = NP_ACT[c.get("activation_function", c.get("hidden_act", "gelu"))]
    if kind == "gpt2":
        h = x + a
        m = ln(h, t["ln_2.weight"], t["ln_2.bias"], c["layer_norm_epsilon"]) @ t["mlp.c_fc.weight"] + t["mlp.c_fc.bias"]
        return h + act(m) @ t["mlp.c_proj.weight"] + t["mlp.c_proj.bias"], w
    if kind in ("bert", "roberta"):
        eps = c["layer_norm_eps"]
        h = ln(x + a, t["attention.output.LayerNorm.weight"], t["attention.output.LayerNorm.bias"], eps)
        i = act(h @ t["intermediate.dense.weight"].T + t["intermediate.dense.bias"])
        o = i @ t["output.dense.weight"].T + t["output.dense.bias"]
        return ln(h + o, t["output.LayerNorm.weight"], t["output.LayerNorm.bias"], eps), w
    if kind == "gpt_neox":
        def mlp(y):
            y = ln(y, t["post_attention_layernorm.weight"], t["post_attention_layernorm.bias"], c["layer_norm_eps"])
            y = act(y @ t["mlp.dense_h_to_4h.weight"].T + t["mlp.dense_h_to_4h.bias"])
            return y @ t["mlp.dense_4h_to_h.weight"].T + t["mlp.dense_4h_to_h.bias"]
        return (x + a + mlp(x), w) if c.get("use_parallel_residual", True) else (x + a + mlp(x + a), w)
    if kind == "bloom":
        post = c.get("apply_residual_connection_post_layernorm", False)
        h = (normed if post else x) + a
        h_ln = ln(h, t["post_attention_layernorm.weight"], t["post_attention_layernorm.bias"], c["layer_norm_epsilon"])
        m = h_ln @ t["mlp.dense_h_to_4h.weight"].T + t["mlp.dense_h_to_4h.bias"]
        m = np_gelu_tanh(m, 0.79788456) @ t["mlp.dense_4h_to_h.weight"].T + t["mlp.dense_4h_to_h.bias"]
        return (h_ln if post else h) + m, w
    h = x + a  # llama, mistral, qwen2, qwen3: SwiGLU
    m = mcg.np_rms_norm(h, t["post_attention_layernorm.weight"], c["rms_norm_eps"])
    gate = m @ t["mlp.gate_proj.weight"].T
    return h + (act(gate) * (m @ t["mlp.up_proj.weight"].T)) @ t["mlp.down_proj.weight"].T, w


def np_bf16(v):
    """V rounded to bfloat16 (round to nearest even on the float32 bits), as a float."""
    b = np.array([v], dtype=np.float32).view(np.uint32)
    return float(((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).view(np.float32)[0])


def np_moe(t, c, y):
    """The MoE MLP row by row (-> out (L, E), chosen (L, K), weights (L, K)): softmax over the router's
    scores, the K largest by argsort, their sum divided out where the config says, each row the
    weighted sum of its experts; the shared expert times sigmoid of its gate."""
    kind, act = c["model_type"], NP_ACT[c["hidden_act"]]
    stem = "block_sparse_moe." if kind == "mixtral" else "mlp."
    names = ("w1", "w3", "w2") if kind == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    k = c["num_experts_per_tok"]

    def mlp(pre, v):
        return (act(v @ t[pre + names[0] + ".weight"].T) * (v @ t[pre + names[1] + ".weight"].T)) @ t[pre + names[2] + ".weight"].T

    out, chosen, weights = np.zeros_like(y), [], []
    for r, row in enumerate(y):
        z = row @ t[stem + "gate.weight"].T
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        top = np.argsort(-p, kind="stable")[:k]
        w = p[top] / (p[top].sum() if kind == "mixtral" or c.get("norm_topk_prob") else 1.0)
        for j, wj in zip(top, w):
            out[r] += wj * mlp(f"{stem}experts.{j}.", row)
        chosen.append(top)
        weights.append(w)
    if kind == "qwen2_moe":
        g = y @ t["mlp.shared_expert_gate.weight"].T
        shared = (act(y @ t["mlp.shared_expert.gate_proj.weight"].T) * (y @ t["mlp.shared_expert.up_proj.weight"].T))
        out += 1 / (1 + np.exp(-g)) * (shared @ t["mlp.shared_expert.down_proj.weight"].T)
    return out, np.array(chosen), np.array(weights)


def np_new_block(t, c, x, n, routing):
    """One block of issue 36's families on x (L, E) -> (output, attention weights); a MoE layer's
    routing appended to ROUTING."""
    kind, eps = c["model_type"], c["rms_norm_eps"]
    one = 1.0 if kind.startswith("gemma") else 0.0
    rms = lambda v, name: mcg.np_rms_norm(v, t[name + ".weight"] + one, eps)  # noqa: E731
    _, _, _, w, a, _ = mcg.numpy_new_reference(t, c, x[None], n)
    a, w = a[0], w[0]
    act = NP_ACT[c.get("hidden_activation") or c["hidden_act"]] if kind.startswith("gemma") else NP_ACT[c["hidden_act"]]

    def mlp(v, pre="mlp."):
        return (act(v @ t[pre + "gate_proj.weight"].T) * (v @ t[pre + "up_proj.weight"].T)) @ t[pre + "down_proj.weight"].T

    if kind in ("gemma2", "gemma3_text"):
        h = x + rms(a, "post_attention_layernorm")
        return h + rms(mlp(rms(h, "pre_feedforward_layernorm")), "post_feedforward_layernorm"), w
    if kind == "olmo2":
        h = x + rms(a, "post_attention_layernorm")
        return h + rms(mlp(h), "post_feedforward_layernorm"), w
    h = x + a
    y = rms(h, "post_attention_layernorm")
    if kind == "phi3":
        gate, up = np.split(y @ t["mlp.gate_up_proj.weight"].T, 2, axis=-1)
        return h + (up * act(gate)) @ t["mlp.down_proj.weight"].T, w
    if kind in ("gemma", "phi3") or "mlp.gate_proj.weight" in t:  # a dense layer
        return h + mlp(y), w
    m, chosen, weights = np_moe(t, c, y)
    routing.append((chosen, weights))
    return h + m, w


def np_new_forward(T, c, ids):
    """issue 36's families in numpy: -> hidden_states, attentions, logits, routing [(chosen, weights)]."""
    kind = c["model_type"]
    gem = kind.startswith("gemma")
    x = T["embed_tokens.weight"][ids]
    if gem:  # sqrt(E) as float32, then bfloat16 for a bf16 checkpoint
        scale = float(np.float32(math.sqrt(c["hidden_size"])))
        x = x * (np_bf16(scale) if c.get("torch_dtype") == "bfloat16" else scale)
    hidden, attn, routing = [x], [], []
    for n in range(c["num_hidden_layers"]):
        pre = f"layers.{n}."
        x, w = np_new_block({k[len(pre):]: v for k, v in T.items() if k.startswith(pre)}, c, x, n, routing)
        hidden.append(x)
        attn.append(w)
    hidden[-1] = x = mcg.np_rms_norm(x, T["norm.weight"] + (1.0 if gem else 0.0), c["rms_norm_eps"])
    out = T["embed_tokens.weight"] if c.get("tie_word_embeddings", gem) else T["lm_head.weight"]
    logits = x @ out.T
    cap = c.get("final_logit_softcapping") if kind in ("gemma2", "gemma3_text") else None
    if cap:
        logits = np.tanh(logits / cap) * cap
    return np.stack(hidden), np.stack(attn), logits, routing


def np_forward(tensors, cfg, ids, prefix):
    """The whole model in numpy: -> hidden_states (N+1, L, E), attentions (N, H, L, L), logits or None."""
    c, kind = np_config(cfg), cfg["model_type"]
    T = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    if kind in mcg.NEW_KINDS:
        T["lm_head.weight"] = tensors.get("lm_head.weight")
        return np_new_forward(T, c, ids)[:3]
    ln, length = mcg.np_layer_norm, len(ids)
    tied = c.get("tie_word_embeddings", kind in ("gpt2", "bert", "roberta", "bloom"))
    if kind == "gpt2":
        x, body, emb = T["wte.weight"][ids] + T["wpe.weight"][:length], "h", "wte.weight"
    elif kind in ("bert", "roberta"):
        if kind == "roberta":  # fairseq make_positions: non-pad tokens numbered from pad + 1
            pad, count, pos = c["pad_token_id"], 0, []
            for i in ids:
                count += int(i != pad)
                pos.append(pad + count if i != pad else pad)
        else:
            pos = list(range(length))
        x = T["embeddings.word_embeddings.weight"][ids] + T["embeddings.position_embeddings.weight"][pos] \
            + T["embeddings.token_type_embeddings.weight"][0]
        x = ln(x, T["embeddings.LayerNorm.weight"], T["embeddings.LayerNorm.bias"], c["layer_norm_eps"])
        body, emb = "encoder.layer", "embeddings.word_embeddings.weight"
    elif kind == "bloom":
        x = ln(T["word_embeddings.weight"][ids], T["word_embeddings_layernorm.weight"],
               T["word_embeddings_layernorm.bias"], c.get("layer_norm_epsilon", 1e-5))
        body, emb = "h", "word_embeddings.weight"
    elif kind == "gpt_neox":
        x, body, emb = T["embed_in.weight"][ids], "layers", "embed_in.weight"
    else:
        x, body, emb = T["embed_tokens.weight"][ids], "layers", "embed_tokens.weight"
    hidden, attn = [x], []
    for n in range(c["num_hidden_layers"]):
        pre = f"{body}.{n}."
        x, w = np_block(kind, {k[len(pre):]: v for k, v in T.items() if k.startswith(pre)}, c, x, n)
        hidden.append(x)
        attn.append(w)
    if kind == "gpt2":
        x = ln(x, T["ln_f.weight"], T["ln_f.bias"], c["layer_norm_epsilon"])
    elif kind == "bloom":
        x = ln(x, T["ln_f.weight"], T["ln_f.bias"], c.get("layer_norm_epsilon", 1e-5))
    elif kind == "gpt_neox":
        x = ln(x, T["final_layer_norm.weight"], T["final_layer_norm.bias"], c["layer_norm_eps"])
    elif kind not in ("bert", "roberta"):
        x = mcg.np_rms_norm(x, T["norm.weight"], c["rms_norm_eps"])
    hidden[-1] = x
    logits = None
    if kind in ("bert", "roberta"):
        head = "cls.predictions." if kind == "bert" else "lm_head."
        dense = head + ("transform.dense" if kind == "bert" else "dense")
        norm = head + ("transform.LayerNorm" if kind == "bert" else "layer_norm")
        if dense + ".weight" in tensors:
            act = NP_ACT[c["hidden_act"]] if kind == "bert" else np_gelu
            y = act(x @ tensors[dense + ".weight"].T + tensors[dense + ".bias"])
            y = ln(y, tensors[norm + ".weight"], tensors[norm + ".bias"], c["layer_norm_eps"])
            logits = y @ T[emb].T + tensors[head + "bias"]
    else:
        out = T[emb] if tied else tensors["embed_out.weight" if kind == "gpt_neox" else "lm_head.weight"]
        logits = x @ out.T
    return np.stack(hidden), np.stack(attn), logits


# ------------------------------------------------------------------------------ PyTorch modules
def module_layer_norm(w, b, eps):
    m = nn.LayerNorm(w.shape[0], eps=eps, dtype=torch.float64)
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m


def encoder_layer(kind, t, cfg, e, h):
    """nn.TransformerEncoderLayer holding block t: BERT post-norm (norm_first=False) or GPT-2 pre-norm
    (norm_first=True, Conv1D weights transposed)."""
    if kind == "gpt2":
        act = cfg["activation_function"]
        inner, eps = t["mlp.c_fc.weight"].shape[1], cfg["layer_norm_epsilon"]
        names = dict(w_in=t["attn.c_attn.weight"].T, b_in=t["attn.c_attn.bias"], w_out=t["attn.c_proj.weight"].T,
                     b_out=t["attn.c_proj.bias"], w1=t["mlp.c_fc.weight"].T, b1=t["mlp.c_fc.bias"],
                     w2=t["mlp.c_proj.weight"].T, b2=t["mlp.c_proj.bias"], n1="ln_1", n2="ln_2")
    else:
        act = cfg["hidden_act"]
        inner, eps = t["intermediate.dense.weight"].shape[0], cfg["layer_norm_eps"]
        names = dict(w_in=torch.cat([t[f"attention.self.{n}.weight"] for n in ("query", "key", "value")]),
                     b_in=torch.cat([t[f"attention.self.{n}.bias"] for n in ("query", "key", "value")]),
                     w_out=t["attention.output.dense.weight"], b_out=t["attention.output.dense.bias"],
                     w1=t["intermediate.dense.weight"], b1=t["intermediate.dense.bias"],
                     w2=t["output.dense.weight"], b2=t["output.dense.bias"],
                     n1="attention.output.LayerNorm", n2="output.LayerNorm")
    activation = "gelu" if act == "gelu" else (lambda y: nn.functional.gelu(y, approximate="tanh"))
    m = nn.TransformerEncoderLayer(e, h, inner, dropout=0.0, activation=activation, layer_norm_eps=eps,
                                   batch_first=True, norm_first=kind == "gpt2", dtype=torch.float64).eval()
    with torch.no_grad():
        for param, value in ((m.self_attn.in_proj_weight, names["w_in"]), (m.self_attn.in_proj_bias, names["b_in"]),
                             (m.self_attn.out_proj.weight, names["w_out"]), (m.self_attn.out_proj.bias, names["b_out"]),
                             (m.linear1.weight, names["w1"]), (m.linear1.bias, names["b1"]),
                             (m.linear2.weight, names["w2"]), (m.linear2.bias, names["b2"]),
                             (m.norm1.weight, t[names["n1"] + ".weight"]), (m.norm1.bias, t[names["n1"] + ".bias"]),
                             (m.norm2.weight, t[names["n2"] + ".weight"]), (m.norm2.bias, t[names["n2"] + ".bias"])):
            param.copy_(value)
    return m


def torch_checks(name, tensors, cfg, prefix, out, ids, last_block):
    """Block by block against PyTorch's own modules, on the forward's hidden_states."""
    full = hf_model.with_defaults(cfg)
    kind = full["model_type"]
    layers, e, h = hf_model.sizes(full)
    hs, length = out["hidden_states"], out["hidden_states"].shape[1]
    for n in range(layers):
        t = hf_model.block_tensors(tensors, kind, prefix, n)
        x = hs[n][None]
        inverse_layer_scale = kind == "gpt2" and full["scale_attn_by_inverse_layer_idx"] and n > 0
        if kind in ("gpt2", "bert", "roberta") and not inverse_layer_scale:  # no such flag in PyTorch
            m = encoder_layer(kind, t, full, e, h)
            causal = torch.ones(length, length, dtype=torch.bool).triu(1) if kind == "gpt2" else None
            with torch.no_grad():
                y = m(x, src_mask=causal)[0]
            if n == layers - 1 and kind == "gpt2":
                y = module_layer_norm(tensors[prefix + "ln_f.weight"], tensors[prefix + "ln_f.bias"], full["layer_norm_epsilon"])(y)
            compare(name, f"torch TransformerEncoderLayer block {n}", y, hs[n + 1])
        if kind in ("gpt2", "bert", "roberta", "bloom"):
            spec = {"kind": "bert" if kind == "roberta" else kind,
                    "semantics": mcg.semantics("bert" if kind == "roberta" else kind, np_config(cfg), None)}
            x_in = x if kind in ("bert", "roberta") else hf.FAMILIES[kind](t, full, x, n)["normed"]
            if not inverse_layer_scale:
                weights, _ = mcg.mha_reference(spec, t, x_in, None)
                compare(name, f"torch MultiheadAttention weights {n}", weights[0], out["attentions"][n])
    eps = full.get("layer_norm_epsilon", full.get("layer_norm_eps"))
    final = {"gpt2": "ln_f", "bloom": "ln_f", "gpt_neox": "final_layer_norm"}.get(kind)
    if final:  # the last hidden state is the final LayerNorm of the last block's output
        m = module_layer_norm(tensors[prefix + final + ".weight"], tensors[prefix + final + ".bias"], eps)
        with torch.no_grad():
            compare(name, "torch LayerNorm final", m(last_block), hs[-1])
    first = {"bert": "embeddings.LayerNorm", "roberta": "embeddings.LayerNorm",
             "bloom": "word_embeddings_layernorm"}.get(kind)
    if first:  # hidden_states[0] is a LayerNorm of the embedding sum
        emb = tensors[prefix + hf_model.ANCHORS[kind][0]][ids]
        if kind != "bloom":
            pos = hf_model.roberta_position_ids(ids, full["pad_token_id"]) if kind == "roberta" else torch.arange(length)
            emb = emb + tensors[prefix + "embeddings.token_type_embeddings.weight"][0] \
                + tensors[prefix + "embeddings.position_embeddings.weight"][pos]
        m = module_layer_norm(tensors[prefix + first + ".weight"], tensors[prefix + first + ".bias"], eps)
        with torch.no_grad():
            compare(name, "torch LayerNorm embeddings", m(emb), hs[0])


# ------------------------------------------------------------------------------------- checks
def bf16_exact(name, folder, tensors):
    """Every BF16 tensor read back equals its bits << 16 as float32, then float64."""
    for path in sorted(folder.glob("*.safetensors")):
        blob = path.read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        for key, entry in header.items():
            if key == "__metadata__" or entry["dtype"] != "BF16":
                continue
            lo, hi = (8 + n + o for o in entry["data_offsets"])
            bits = np.frombuffer(blob[lo:hi], dtype="<u2").astype(np.uint32) << 16
            want = bits.view(np.float32).astype(np.float64).reshape(entry["shape"])
            compare(name, "bf16 upcast", tensors[key], want, dict(rtol=0, atol=0))


def check_text(name, folder, vocab_size):
    """golden/text.json's tokens and ids agree with tokenizer.json's vocabulary."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = dict(tokenizer["model"]["vocab"], **{a["content"]: a["id"] for a in tokenizer["added_tokens"]})
    if len(vocab) != vocab_size:
        failures.append(f"{name}: tokenizer.json has {len(vocab)} tokens, config vocab_size {vocab_size}")
    for t in json.loads((folder / "golden" / "text.json").read_text())["texts"]:
        if [vocab.get(tok) for tok in t["tokens"]] != t["ids"] or max(t["ids"]) >= vocab_size:
            failures.append(f"{name}: text.json {t['text']!r}: ids do not match tokenizer.json")
    worst["text"] = 0.0


def check_case(entry):
    name = entry["name"]
    folder = ROOT / name
    cfg = json.loads((folder / "config.json").read_text())
    tensors = mcg.read_checkpoint(folder)
    ids = torch.from_numpy(np.load(folder / "ids.npy"))
    kind = cfg["model_type"]
    full = hf_model.with_defaults(cfg)
    prefix = hf_model.base_prefix(tensors, kind)

    block_outputs = []

    def hook(n, x, y, weights):  # block N's attention = hf_attention on hidden_states[N]
        block_outputs.append(y[0])
        t = hf_model.block_tensors(tensors, kind, prefix, n)
        family = hf.bert if kind == "roberta" else hf.FAMILIES[kind]
        compare(name, f"layer_attn {n}", weights, family(t, full, x, n)["weights"], dict(rtol=0, atol=0))

    with torch.no_grad():
        out = hf_model.forward(tensors, cfg, ids, block_hook=hook)
    for what in ("hidden_states", "attentions", "logits"):
        path = folder / "golden" / f"{what}.npy"
        if (out[what] is None) != (not path.exists()):
            failures.append(f"{name}: {what}: golden presence differs from the forward")
        elif out[what] is not None:
            compare(name, f"goldens {what}", out[what], np.load(path), dict(rtol=0, atol=1e-12))
    np_tensors = {k: v.numpy() for k, v in tensors.items()}
    np_hidden, np_attn, np_logits = np_forward(np_tensors, cfg, ids.numpy(), prefix)
    if kind in hf_model.MOE:  # the routing: the same experts, the same weights
        T = {k[len(prefix):]: v for k, v in np_tensors.items() if k.startswith(prefix)}
        T["lm_head.weight"] = np_tensors.get("lm_head.weight")
        routing = np_new_forward(T, np_config(cfg), ids.numpy())[3]
        compare(name, "numpy experts", out["experts"], np.stack([r[0] for r in routing]), dict(rtol=0, atol=0))
        compare(name, "numpy expert_weights", out["expert_weights"], np.stack([r[1] for r in routing]))
        for what in ("experts", "expert_weights"):
            compare(name, f"goldens {what}", out[what], np.load(folder / "golden" / f"{what}.npy"), dict(rtol=0, atol=1e-12))
    compare(name, "numpy hidden_states", out["hidden_states"], np_hidden)
    compare(name, "numpy attentions", out["attentions"], np_attn)
    if (np_logits is None) != (out["logits"] is None):
        failures.append(f"{name}: numpy and torch disagree on whether there are logits")
    elif np_logits is not None:
        compare(name, "numpy logits", out["logits"], np_logits)
    torch_checks(name, tensors, cfg, prefix, out, ids, block_outputs[-1])
    bf16_exact(name, folder, tensors)
    check_text(name, folder, full["vocab_size"])


def check_activations():
    x = torch.linspace(-8.0, 8.0, 4001, dtype=torch.float64)
    compare("activations", "act gelu vs erf formula", hf_model.activation("gelu")(x), np_gelu(x.numpy()), dict(rtol=0, atol=1e-15))
    tanh = nn.functional.gelu(x, approximate="tanh")
    for name in ("gelu_new", "gelu_pytorch_tanh"):
        compare("activations", f"act {name} vs F.gelu(approximate=tanh)", hf_model.activation(name)(x), tanh,
                dict(rtol=0, atol=1e-14))
    compare("activations", "bloom_gelu vs F.gelu(approximate=tanh)", hf_model.bloom_gelu(x), tanh, dict(rtol=0, atol=1e-9))
    compare("activations", "act silu vs x*sigmoid(x)", hf_model.activation("silu")(x), x * torch.sigmoid(x), dict(rtol=0, atol=1e-15))
    w, b = 1 + 0.1 * torch.randn(16, dtype=torch.float64), 0.1 * torch.randn(16, dtype=torch.float64)
    y = torch.randn(5, 16, dtype=torch.float64) * 3
    with torch.no_grad():
        compare("norms", "norm layer_norm vs nn.LayerNorm", hf.layer_norm(y, w, b, 1e-5), module_layer_norm(w, b, 1e-5)(y))
    compare("norms", "norm rms_norm vs numpy", hf.rms_norm(y, w, 1e-6), mcg.np_rms_norm(y.numpy(), w.numpy(), 1e-6))


def check_layer_goldens():
    """The committed one-layer goldens, through with_defaults(config): the defaults it fills in
    (e.g. Mistral's sliding_window) must not change any of them."""
    doc = json.loads((ROOT / "cases.json").read_text())
    for entry in doc["cases"]:
        folder = ROOT / entry["model"]
        cfg = hf_model.with_defaults(json.loads((folder / "config.json").read_text()))
        tensors = mcg.read_checkpoint(folder)
        pre = entry["tensor_prefix"]
        t = {k[len(pre):]: v for k, v in tensors.items() if k.startswith(pre)}
        x = torch.from_numpy(np.load(ROOT / entry["hidden"])).to(torch.float64)
        extra = {}
        if entry["attention_mask"]:
            extra["attention_mask"] = torch.from_numpy(np.load(ROOT / entry["attention_mask"]))
        with torch.no_grad():
            got = hf.FAMILIES[cfg["model_type"]](t, cfg, x, entry["layer"], **extra)
        for what in ("weights", "output"):
            compare(entry["name"], f"layer_goldens {what}", got[what], np.load(ROOT / entry["expected"][what]),
                    dict(rtol=1e-12, atol=1e-13))


def main():
    torch.manual_seed(0)
    check_activations()
    check_layer_goldens()
    cases = json.loads((ROOT / "full_cases.json").read_text())["cases"]
    for entry in cases:
        check_case(entry)
    for key, diff in sorted(worst.items()):
        print(f"{key:12s} max abs diff {diff:.3g}")
    if failures:
        print("\n".join(["FAILED:"] + failures))
        return 1
    print(f"check_hf_model: {len(cases)} whole-model cases ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
