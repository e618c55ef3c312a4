#!/usr/bin/python3
"""The seed notebooks' models (../shared/seeds, summarised in data/README.md), each run with its own
code and its own parameter names, with the notebooks' bugs fixed (the INTENDED math):

  bloem    Peter Bloem's SelfAttention(6, heads=2); scores / sqrt(k) with k the embedding dim (his
           choice, kept: attntrace gets it through --scale); the ignored `mask` argument dropped.
  atcold   scaled_dot_product on the notebook's test Q/K/V (d_k = 64, so scale 0.125), and the
           MultiHeadAttention module with K and V projected by W_k and W_v (the notebook uses W_q
           for all three) and a .contiguous() before group_heads' view.
  blog     per-head W_Q[h] (dim, dim_k), W_K[h], W_V[h] (dim, dim_v), W_O (h*dim_v, dim); the heads
           are appended and concatenated, each head is weights @ V_proj (the blog never appends and
           sums over the wrong axis).
  d2l      MultiHeadAttention(num_hiddens, num_heads, dropout, bias=False) with LazyLinear and
           valid_lens masking (d2l's masked_softmax with its -1e6 fill), 1-D and 2-D valid_lens.
  seed004  multi-head self-attention on a 2-D (t, k) input, heads concatenated with no output
           projection; heads split as (t, h, s) (the notebook reshapes to (t, s, h)), weights @ V
           (the notebook multiplies by X), scale 1/sqrt(s); and its single-head model (1/sqrt(k)).

Run:  /usr/bin/python3 data/make_seed_examples.py
Writes the inputs and params under data/<seed>/ and the expected outputs / per-head weights under
tests/goldens/seeds/<example>_{out,weights}.npy; tests/e2e/seeds.sh runs every command of
data/README.md and compares.
"""
import math
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
GOLDEN = REPO / "tests" / "goldens" / "seeds"
sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(REPO / "tests" / "goldens"))
import reference  # noqa: E402
import st  # noqa: E402

written = []


def save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array))
    written.append(path)


def golden(name, out, weights=None):
    save(GOLDEN / f"{name}_out.npy", out.detach().numpy() if torch.is_tensor(out) else out)
    if weights is not None:
        save(GOLDEN / f"{name}_weights.npy", weights.detach().numpy() if torch.is_tensor(weights) else weights)


def write_params(path, tensors):
    st.write(path, {k: (v.detach().numpy() if torch.is_tensor(v) else v).astype(np.float32) for k, v in tensors.items()})
    written.append(path)


def check(name, out, ref_out, weights, ref_weights):
    """The seed's own code against reference.py (float64): both are the same math."""
    for what, a, b in (("out", out, ref_out), ("weights", weights, ref_weights)):
        a = a.detach().numpy() if torch.is_tensor(a) else a
        if not np.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{name}: {what} differs from the numpy reference by {np.abs(a - b).max()}")


# ---- 000: Peter Bloem ---------------------------------------------------------------------------

class BloemSelfAttention(nn.Module):
    def __init__(self, k, heads=4, mask=False):
        super().__init__()
        assert k % heads == 0
        self.k, self.heads = k, heads
        self.tokeys = nn.Linear(k, k, bias=False)
        self.toqueries = nn.Linear(k, k, bias=False)
        self.tovalues = nn.Linear(k, k, bias=False)
        self.unifyheads = nn.Linear(k, k)

    def forward(self, x):
        b, t, k = x.size()
        h = self.heads
        queries = self.toqueries(x)
        keys = self.tokeys(x)
        values = self.tovalues(x)
        s = k // h
        keys = keys.view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries.view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        values = values.view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        dot = torch.bmm(queries, keys.transpose(1, 2))
        dot = dot / (k ** (1 / 2))
        dot = F.softmax(dot, dim=2)
        self.weights = dot.view(b, h, t, t)
        out = torch.bmm(dot, values).view(b, h, t, s)
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)
        return self.unifyheads(out)


def bloem():
    torch.manual_seed(0)
    x = torch.randn(2, 10, 6)
    model = BloemSelfAttention(6, 2)
    out = model(x)
    save(DATA / "bloem" / "x.npy", x.numpy())
    sd = model.state_dict()
    write_params(DATA / "bloem" / "params.safetensors", sd)
    golden("bloem", out, model.weights)
    scale = 1 / math.sqrt(6)
    assert repr(scale) == "0.4082482904638631"
    r_out, r_w = reference.mha(x.numpy(), w_q=sd["toqueries.weight"].numpy(), w_k=sd["tokeys.weight"].numpy(),
                               w_v=sd["tovalues.weight"].numpy(), w_o=sd["unifyheads.weight"].numpy(),
                               b_o=sd["unifyheads.bias"].numpy(), heads=2, scale=scale)
    check("bloem", out, r_out, model.weights, r_w)


# ---- 001: atcold -----------------------------------------------------------------------------------

class AtcoldMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_xq = self.d_xk = self.d_xv = self.d_model
        assert self.d_model % self.num_heads == 0
        self.d_k = self.d_model // self.num_heads
        self.W_q = nn.Linear(self.d_xq, self.d_model, bias=False)
        self.W_k = nn.Linear(self.d_xk, self.d_model, bias=False)
        self.W_v = nn.Linear(self.d_xv, self.d_model, bias=False)
        self.W_h = nn.Linear(self.d_model, self.d_model, bias=False)

    def scaled_dot_product(self, Q, K, V):
        Q = Q / np.sqrt(self.d_k)
        scores = torch.matmul(Q, K.transpose(2, 3))
        A = nn.Softmax(dim=-1)(scores)
        H = torch.matmul(A, V)
        return H, A

    def split_heads(self, x):
        batch_size = x.size(0)
        return x.view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)

    def group_heads(self, x):
        batch_size = x.size(0)
        return x.transpose(1, 2).contiguous().view(batch_size, -1, self.num_heads * self.d_k)

    def forward(self, X_q, X_k, X_v):
        Q = self.split_heads(self.W_q(X_q))
        K = self.split_heads(self.W_k(X_k))   # the notebook: self.W_q
        V = self.split_heads(self.W_v(X_v))   # the notebook: self.W_q
        H_cat, A = self.scaled_dot_product(Q, K, V)
        H_cat = self.group_heads(H_cat)
        H = self.W_h(H_cat)
        return H, A


def atcold():
    mha512 = AtcoldMultiHeadAttention(d_model=512, num_heads=8)   # only for its d_k = 64
    test_K = torch.tensor([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]]).float()[None, None]
    test_V = torch.tensor([[1, 0, 0], [10, 0, 0], [100, 5, 0], [1000, 6, 0]]).float()[None, None]
    q1 = torch.tensor([[0, 10, 0]]).float()[None, None]
    q2 = torch.tensor([[0, 0, 10]])[None, None].float()
    for name, t in (("q1", q1), ("q2", q2), ("k", test_K), ("v", test_V)):
        save(DATA / "atcold" / f"{name}.npy", t.numpy())
    h1, a1 = mha512.scaled_dot_product(q1, test_K, test_V)
    h2, a2 = mha512.scaled_dot_product(q2, test_K, test_V)
    # The values the notebook printed.
    assert np.allclose(a1.squeeze().numpy(), [3.7266e-06, 9.9999e-01, 3.7266e-06, 3.7266e-06], rtol=1e-4)
    assert np.allclose(h1.squeeze().numpy(), [1.0004e+01, 4.0993e-05, 0.0], rtol=1e-4, atol=1e-9)
    assert np.allclose(a2.squeeze().numpy(), [1.8633e-06, 1.8633e-06, 5.0000e-01, 5.0000e-01], rtol=1e-4)
    assert np.allclose(h2.squeeze().numpy(), [549.9979, 5.5, 0.0], rtol=1e-5)  # as printed (4 decimals)
    golden("atcold_q1", h1, a1)
    golden("atcold_q2", h2, a2)
    for q, h, a in ((q1, h1, a1), (q2, h2, a2)):
        r_out, r_w = reference.sdpa(q.numpy(), test_K.numpy(), test_V.numpy(), scale=0.125)
        check("atcold sdpa", h, r_out, a, r_w)

    torch.manual_seed(1)
    model = AtcoldMultiHeadAttention(d_model=12, num_heads=3)
    x_q = torch.randn(2, 4, 12)
    x_kv = torch.randn(2, 6, 12)
    H, A = model(x_q, x_kv, x_kv)
    save(DATA / "atcold" / "x_q.npy", x_q.numpy())
    save(DATA / "atcold" / "x_kv.npy", x_kv.numpy())
    sd = model.state_dict()
    assert sorted(sd) == ["W_h.weight", "W_k.weight", "W_q.weight", "W_v.weight"]
    write_params(DATA / "atcold" / "params.safetensors", sd)
    golden("atcold_mha", H, A)
    r_out, r_w = reference.mha(x_q.numpy(), x_kv.numpy(), w_q=sd["W_q.weight"].numpy(), w_k=sd["W_k.weight"].numpy(),
                               w_v=sd["W_v.weight"].numpy(), w_o=sd["W_h.weight"].numpy(), heads=3)
    check("atcold mha", H, r_out, A, r_w)


# ---- 002: the blog ---------------------------------------------------------------------------------

def blog():
    torch.manual_seed(2)
    batch_size, seq_len, dim, h, dim_k, dim_v = 2, 4, 10, 2, 7, 5
    X = torch.randn(batch_size, seq_len, dim)
    K = torch.randn(batch_size, seq_len, dim)
    V = torch.randn(batch_size, seq_len, dim)
    # The blog draws torch.randn; divided by sqrt(dim) here so the softmax is not saturated.
    W_Q = torch.randn(h, dim, dim_k) / math.sqrt(dim)
    W_K = torch.randn(h, dim, dim_k) / math.sqrt(dim)
    W_V = torch.randn(h, dim, dim_v) / math.sqrt(dim)
    W_O = torch.randn(h * dim_v, dim) / math.sqrt(h * dim_v)
    attention_outputs = []
    all_weights = []
    for i in range(h):
        X_proj = X.matmul(W_Q[i])
        K_proj = K.matmul(W_K[i])
        V_proj = V.matmul(W_V[i])
        weights = torch.softmax(X_proj.matmul(K_proj.transpose(-2, -1)) / math.sqrt(dim_k), dim=-1)
        head_output = weights.matmul(V_proj)          # the blog: torch.sum(weights.unsqueeze(-1) * V_proj, dim=1)
        attention_outputs.append(head_output)         # the blog never appends
        all_weights.append(weights)
    Y = torch.cat(attention_outputs, dim=-1).matmul(W_O)
    for name, t in (("x", X), ("k", K), ("v", V)):
        save(DATA / "blog" / f"{name}.npy", t.numpy())
    # nn.Linear convention (out_features, in_features): x @ W_Q[i] == x @ (W_Q[i].T).T
    params = {"W_q.weight": torch.cat([W_Q[i].T for i in range(h)], dim=0),   # (h*dim_k, dim)
              "W_k.weight": torch.cat([W_K[i].T for i in range(h)], dim=0),   # (h*dim_k, dim)
              "W_v.weight": torch.cat([W_V[i].T for i in range(h)], dim=0),   # (h*dim_v, dim)
              "W_o.weight": W_O.T}                                            # (dim, h*dim_v)
    write_params(DATA / "blog" / "params.safetensors", params)
    weights = torch.stack(all_weights, dim=1)                                 # (B, h, L, L)
    golden("blog", Y, weights)
    r_out, r_w = reference.mha(X.numpy(), K.numpy(), V.numpy(), **{f"w_{k[2]}": v.numpy() for k, v in params.items()}, heads=h)
    check("blog", Y, r_out, weights, r_w)


# ---- 003: d2l ----------------------------------------------------------------------------------------

def masked_softmax(X, valid_lens):
    """d2l.masked_softmax: softmax over the last axis with elements beyond valid_lens set to -1e6."""
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    """d2l.DotProductAttention."""
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class D2lMultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = self.transpose_output(output)
        return self.W_o(output_concat)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


def d2l():
    warnings.filterwarnings("ignore", message="Lazy modules")
    torch.manual_seed(123)
    num_hiddens, num_heads = 20, 5
    batch_size, num_queries, num_kvpairs = 2, 4, 6
    model = D2lMultiHeadAttention(num_hiddens, num_heads, 0.5)
    model.eval()  # dropout only matters in training
    queries = torch.randn(batch_size, num_queries, 8)
    keys = torch.randn(batch_size, num_kvpairs, 7)
    values = torch.randn(batch_size, num_kvpairs, 7)
    valid_lens_1d = torch.tensor([3, 2])
    valid_lens_2d = torch.tensor([[1, 2, 3, 6], [5, 4, 2, 1]])
    with torch.no_grad():
        out_1d = model(queries, keys, values, valid_lens_1d)
        w_1d = model.attention.attention_weights.reshape(batch_size, num_heads, num_queries, num_kvpairs)
        out_2d = model(queries, keys, values, valid_lens_2d)
        w_2d = model.attention.attention_weights.reshape(batch_size, num_heads, num_queries, num_kvpairs)
    sd = model.state_dict()
    assert {k: tuple(v.shape) for k, v in sd.items()} == {
        "W_q.weight": (20, 8), "W_k.weight": (20, 7), "W_v.weight": (20, 7), "W_o.weight": (20, 20)}
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        save(DATA / "d2l" / f"{name}.npy", t.numpy())
    save(DATA / "d2l" / "valid_lens_2d.npy", valid_lens_2d.numpy().astype(np.int64))
    write_params(DATA / "d2l" / "params.safetensors", sd)
    golden("d2l_valid_lens_1d", out_1d, w_1d)
    golden("d2l_valid_lens_2d", out_2d, w_2d)
    # -1e6 underflows to an exact 0 in float32: the same as masking the keys out.
    assert (w_1d[0, :, :, 3:] == 0).all() and (w_1d[1, :, :, 2:] == 0).all()
    kw = dict(w_q=sd["W_q.weight"].numpy(), w_k=sd["W_k.weight"].numpy(), w_v=sd["W_v.weight"].numpy(),
              w_o=sd["W_o.weight"].numpy(), heads=num_heads)
    for vl, out, w in ((valid_lens_1d, out_1d, w_1d), (valid_lens_2d, out_2d, w_2d)):
        r_out, r_w = reference.mha(queries.numpy(), keys.numpy(), values.numpy(), **kw, valid_lens=vl.numpy())
        check("d2l", out, r_out, w, r_w)


# ---- 004 ------------------------------------------------------------------------------------------------

class SingleHeadSelfAttention(nn.Module):
    def __init__(self, k):
        super().__init__()   # the notebook: super.init()
        self.k = k
        self.toqueries = nn.Linear(self.k, self.k, bias=False)
        self.tokeys = nn.Linear(self.k, self.k, bias=False)
        self.tovalues = nn.Linear(self.k, self.k, bias=False)

    def forward(self, X):
        Q = self.toqueries(X)
        K = self.tokeys(X)
        V = self.tovalues(X)
        unscaled_weights = torch.mm(Q, K.transpose(0, 1))   # the notebook: K.transpose()
        scaled_weights = unscaled_weights / (self.k ** (1 / 2))
        self.weights = F.softmax(scaled_weights, dim=1)
        return torch.mm(self.weights, V)                     # the notebook: X


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, k, h=4):
        super().__init__()   # the notebook: super.init()
        assert k % h == 0
        self.k = k
        self.heads = h
        self.s = k // h
        self.toqueries = nn.Linear(self.k, self.k, bias=False)
        self.tokeys = nn.Linear(self.k, self.k, bias=False)
        self.tovalues = nn.Linear(self.k, self.k, bias=False)

    def forward(self, X):
        t, k = X.size()      # the notebook: t, h = X.size()
        h = self.heads
        Q = self.toqueries(X)
        K = self.tokeys(X)
        V = self.tovalues(X)
        queries = Q.reshape(t, h, self.s)     # the notebook: (t, s, h)
        keys = K.reshape(t, h, self.s)
        values = V.reshape(t, h, self.s)
        b_Q = queries.transpose(0, 1)         # (h, t, s)
        b_K = keys.transpose(0, 1)
        b_V = values.transpose(0, 1)
        unscaled_weights = torch.bmm(b_Q, b_K.transpose(1, 2))
        scaled_weights = unscaled_weights / (self.s ** (1 / 2))
        self.weights = F.softmax(scaled_weights, dim=2)
        out = torch.bmm(self.weights, b_V)    # (h, t, s)
        return out.transpose(0, 1).reshape(t, self.s * h)


def seed004():
    torch.manual_seed(4)
    t, k = 5, 8
    X = torch.randn(t, k)
    multi = MultiHeadSelfAttention(k, h=2)
    with torch.no_grad():
        out_multi = multi(X)
    single = SingleHeadSelfAttention(k)
    single.load_state_dict(multi.state_dict())   # the same three matrices, one head
    with torch.no_grad():
        out_single = single(X)
    save(DATA / "seed004" / "x.npy", X.numpy())
    sd = multi.state_dict()
    assert sorted(sd) == ["tokeys.weight", "toqueries.weight", "tovalues.weight"]
    write_params(DATA / "seed004" / "params.safetensors", sd)
    golden("seed004_heads2", out_multi, multi.weights)
    golden("seed004_single_head", out_single, single.weights[None])   # (H=1, t, t) for 2-D input
    kw = dict(w_q=sd["toqueries.weight"].numpy(), w_k=sd["tokeys.weight"].numpy(), w_v=sd["tovalues.weight"].numpy())
    r_out, r_w = reference.mha(X.numpy(), **kw, heads=2)
    check("004 multi", out_multi, r_out, multi.weights, r_w)
    r_out, r_w = reference.mha(X.numpy(), **kw, heads=1)
    check("004 single", out_single, r_out, single.weights[None], r_w)


def main():
    for d in ("bloem", "atcold", "blog", "d2l", "seed004"):
        shutil.rmtree(DATA / d, ignore_errors=True)
    shutil.rmtree(GOLDEN, ignore_errors=True)
    bloem()
    atcold()
    blog()
    d2l()
    seed004()
    total = sum(p.stat().st_size for p in written)
    print(f"{len(written)} files, {total} bytes")


if __name__ == "__main__":
    main()
