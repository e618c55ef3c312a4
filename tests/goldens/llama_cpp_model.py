"""llama.cpp run on a GGUF file through ctypes (libllama and libggml-base from llama_cpp.py), for
the GGUF goldens and the GGUF benchmark:

- quantize(src, dst, ftype): llama_model_quantize, as llama-quantize does (pure: every quantizable
  tensor in FTYPE's type; or ggml's own mix of types for the _S/_M/_L file types).
- logits(path, ids, threads, exact): the (L, V) float32 logits llama.cpp computes for every
  position of IDS in one llama_decode (llama_batch_init, every token an output), the seconds that
  call took.
- to_float(type, raw, n): ggml's own dequantization (ggml_get_type_traits(type)->to_float).
- load_vocab(path), tokenize(vocab, text, add_special), detokenize(vocab, ids), free_model(model):
  a file's tokenizer as llama.cpp runs it (vocab_only; llama_tokenize with parse_special false,
  llama_detokenize with remove_special false and unparse_special true); tokenize_groups(path,
  groups): every text of each group through them.

Struct layouts are llama.h's and ggml.h's of the source the binaries were built from
(llama_cpp.source(): include/llama.h llama_model_params, llama_context_params,
llama_model_quantize_params, llama_batch; ggml/include/ggml.h ggml_type_traits).
"""
import ctypes
import time

import numpy as np

import llama_cpp

c = ctypes
FTYPE = {  # llama.h enum llama_ftype
    "f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_k": 10, "q3_k_s": 11,
    "q3_k_m": 12, "q3_k_l": 13, "q4_k_s": 14, "q4_k_m": 15, "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18,
    "iq4_nl": 25, "iq4_xs": 30, "bf16": 32,
}


class ModelParams(c.Structure):
    _fields_ = [("devices", c.c_void_p), ("tensor_buft_overrides", c.c_void_p), ("n_gpu_layers", c.c_int32),
                ("split_mode", c.c_int), ("load_mode", c.c_int), ("lazy_mode", c.c_int), ("main_gpu", c.c_int32),
                ("tensor_split", c.c_void_p), ("progress_callback", c.c_void_p),
                ("progress_callback_user_data", c.c_void_p), ("kv_overrides", c.c_void_p), ("vocab_only", c.c_bool),
                ("check_tensors", c.c_bool), ("use_extra_bufts", c.c_bool), ("no_host", c.c_bool),
                ("no_alloc", c.c_bool), ("load_mtp", c.c_bool)]


class ContextParams(c.Structure):
    _fields_ = [("n_ctx", c.c_uint32), ("n_batch", c.c_uint32), ("n_ubatch", c.c_uint32), ("n_seq_max", c.c_uint32),
                ("n_rs_seq", c.c_uint32), ("n_outputs_max", c.c_uint32), ("n_outputs_max_per_seq", c.c_uint32),
                ("n_threads", c.c_int32), ("n_threads_batch", c.c_int32), ("ctx_type", c.c_int),
                ("rope_scaling_type", c.c_int), ("pooling_type", c.c_int), ("attention_type", c.c_int),
                ("flash_attn_type", c.c_int), ("rope_freq_base", c.c_float), ("rope_freq_scale", c.c_float),
                ("yarn_ext_factor", c.c_float), ("yarn_attn_factor", c.c_float), ("yarn_beta_fast", c.c_float),
                ("yarn_beta_slow", c.c_float), ("yarn_orig_ctx", c.c_uint32), ("defrag_thold", c.c_float),
                ("cb_eval", c.c_void_p), ("cb_eval_user_data", c.c_void_p), ("type_k", c.c_int), ("type_v", c.c_int),
                ("abort_callback", c.c_void_p), ("abort_callback_data", c.c_void_p), ("embeddings", c.c_bool),
                ("offload_kqv", c.c_bool), ("no_perf", c.c_bool), ("op_offload", c.c_bool), ("swa_full", c.c_bool),
                ("kv_unified", c.c_bool), ("samplers", c.c_void_p), ("n_samplers", c.c_size_t),
                ("ctx_other", c.c_void_p)]


class QuantizeParams(c.Structure):
    _fields_ = [("nthread", c.c_int32), ("ftype", c.c_int), ("output_tensor_type", c.c_int),
                ("token_embedding_type", c.c_int), ("allow_requantize", c.c_bool),
                ("quantize_output_tensor", c.c_bool), ("only_copy", c.c_bool), ("pure", c.c_bool),
                ("keep_split", c.c_bool), ("dry_run", c.c_bool), ("imatrix", c.c_void_p), ("kv_overrides", c.c_void_p),
                ("tt_overrides", c.c_void_p), ("prune_layers", c.c_void_p), ("max_buf_size", c.c_size_t)]


class Batch(c.Structure):
    _fields_ = [("n_tokens", c.c_int32), ("token", c.POINTER(c.c_int32)), ("embd", c.POINTER(c.c_float)),
                ("pos", c.POINTER(c.c_int32)), ("n_seq_id", c.POINTER(c.c_int32)),
                ("seq_id", c.POINTER(c.POINTER(c.c_int32))), ("logits", c.POINTER(c.c_int8))]


class TypeTraits(c.Structure):
    _fields_ = [("type_name", c.c_char_p), ("blck_size", c.c_int64), ("blck_size_interleave", c.c_int64),
                ("type_size", c.c_size_t), ("is_quantized", c.c_bool), ("to_float", c.c_void_p),
                ("from_float_ref", c.c_void_p)]


_lib = None


def lib():
    global _lib
    if _lib is None:
        l = llama_cpp.libllama()
        l.llama_model_default_params.restype = ModelParams
        l.llama_context_default_params.restype = ContextParams
        l.llama_model_quantize_default_params.restype = QuantizeParams
        l.llama_model_quantize.argtypes = [c.c_char_p, c.c_char_p, c.POINTER(QuantizeParams)]
        l.llama_model_quantize.restype = c.c_uint32
        l.llama_model_load_from_file.argtypes = [c.c_char_p, ModelParams]
        l.llama_model_load_from_file.restype = c.c_void_p
        l.llama_init_from_model.argtypes = [c.c_void_p, ContextParams]
        l.llama_init_from_model.restype = c.c_void_p
        l.llama_model_get_vocab.argtypes = [c.c_void_p]
        l.llama_model_get_vocab.restype = c.c_void_p
        l.llama_vocab_n_tokens.argtypes = [c.c_void_p]
        l.llama_vocab_n_tokens.restype = c.c_int32
        l.llama_batch_init.argtypes = [c.c_int32, c.c_int32, c.c_int32]
        l.llama_batch_init.restype = Batch
        l.llama_batch_free.argtypes = [Batch]
        l.llama_decode.argtypes = [c.c_void_p, Batch]
        l.llama_decode.restype = c.c_int32
        l.llama_get_logits.argtypes = [c.c_void_p]
        l.llama_get_logits.restype = c.POINTER(c.c_float)
        l.llama_free.argtypes = [c.c_void_p]
        l.llama_model_free.argtypes = [c.c_void_p]
        l.llama_tokenize.argtypes = [c.c_void_p, c.c_char_p, c.c_int32, c.POINTER(c.c_int32), c.c_int32, c.c_bool, c.c_bool]
        l.llama_tokenize.restype = c.c_int32
        l.llama_detokenize.argtypes = [c.c_void_p, c.POINTER(c.c_int32), c.c_int32, c.c_char_p, c.c_int32, c.c_bool, c.c_bool]
        l.llama_detokenize.restype = c.c_int32
        _lib = l
    return _lib


def load_vocab(path):
    """PATH's tokenizer loaded by llama.cpp alone (vocab_only): (model, vocab); free_model(model) after."""
    l = lib()
    params = l.llama_model_default_params()
    params.vocab_only = True
    model = l.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise RuntimeError(f"libllama cannot load {path}")
    return model, l.llama_model_get_vocab(model)


def free_model(model):
    lib().llama_model_free(model)


def tokenize(vocab, text, add_special):
    """llama_tokenize(vocab, TEXT, ADD_SPECIAL, parse_special = false): the ids."""
    l, data = lib(), text.encode("utf-8")
    n = len(data) + 8
    while True:
        out = (c.c_int32 * n)()
        got = l.llama_tokenize(vocab, data, len(data), out, n, add_special, False)
        if got >= 0:
            return list(out[:got])
        n = -got


def detokenize(vocab, ids):
    """llama_detokenize(vocab, IDS, remove_special = false, unparse_special = true): the text, or
    {"hex": ...} when its bytes are not UTF-8."""
    l = lib()
    arr = (c.c_int32 * max(1, len(ids)))(*ids)
    n = 64 + 8 * len(ids)
    while True:
        buf = c.create_string_buffer(n)
        got = l.llama_detokenize(vocab, arr, len(ids), buf, n, False, True)
        if got >= 0:
            raw = buf.raw[:got]
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return {"hex": raw.hex()}
        n = -got + 8


def tokenize_groups(path, groups):
    """Every text of GROUPS ({name: [text, ...]}) through PATH's tokenizer: {name: [{"ids": with
    special tokens, "plain": without, "decode": the ids detokenized}, ...]}."""
    model, vocab = load_vocab(path)
    out = {}
    for group, items in groups.items():
        rows = []
        for text in items:
            ids = tokenize(vocab, text, True)
            rows.append({"ids": ids, "plain": tokenize(vocab, text, False), "decode": detokenize(vocab, ids)})
        out[group] = rows
    free_model(model)
    return out


def quantize(src, dst, ftype, pure=True, threads=2):
    """SRC (a GGUF file) quantized into DST as llama-quantize --pure (PURE) would."""
    l = lib()
    p = l.llama_model_quantize_default_params()
    p.ftype = FTYPE[ftype]
    p.pure = pure
    p.nthread = threads
    if l.llama_model_quantize(str(src).encode(), str(dst).encode(), c.byref(p)) != 0:
        raise RuntimeError(f"llama_model_quantize {src} -> {dst} ({ftype}) failed")


class Model:
    """A GGUF file loaded by llama.cpp, with one context of N_CTX positions on THREADS threads."""

    def __init__(self, path, n_ctx, threads=2, exact=True):
        l = lib()
        mp = l.llama_model_default_params()
        self.model = l.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = l.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = max(n_ctx, 32)
        cp.n_threads = cp.n_threads_batch = threads
        cp.no_perf = True
        if exact:  # no flash attention, an F32 KV cache: no f16 rounding outside the weights' products
            cp.flash_attn_type = 0  # LLAMA_FLASH_ATTN_TYPE_DISABLED
            cp.type_k = cp.type_v = 0  # GGML_TYPE_F32
        self.ctx = l.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not make a context for {path}")
        self.vocab = l.llama_vocab_n_tokens(l.llama_model_get_vocab(self.model))

    def logits(self, ids):
        """(L, V) float32: every position's logits in one llama_decode; and its seconds."""
        l = lib()
        n = len(ids)
        batch = l.llama_batch_init(n, 0, 1)
        for i, t in enumerate(ids):
            batch.token[i] = int(t)
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = n
        start = time.perf_counter()
        rc = l.llama_decode(self.ctx, batch)
        seconds = time.perf_counter() - start
        l.llama_batch_free(batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        out = np.ctypeslib.as_array(l.llama_get_logits(self.ctx), shape=(n, self.vocab)).copy()
        return out, seconds

    def close(self):
        l = lib()
        l.llama_free(self.ctx)
        l.llama_model_free(self.model)


def logits(path, ids, threads=2, exact=True):
    """llama.cpp's (L, V) logits of IDS on the GGUF file PATH, and the seconds llama_decode took.
    EXACT: flash attention off and the KV cache in F32 (else llama.cpp's defaults, an F16 cache
    and flash attention where it picks it, which round the keys, values and scores to f16)."""
    m = Model(path, len(ids), threads, exact)
    try:
        return m.logits(ids)
    finally:
        m.close()


_traits = None


def to_float(ggml_type, raw, n):
    """N floats of ggml type GGML_TYPE dequantized from RAW (bytes) by ggml itself."""
    global _traits
    if _traits is None:
        g = llama_cpp.libggml_base()
        g.ggml_get_type_traits.argtypes = [c.c_int]
        g.ggml_get_type_traits.restype = c.POINTER(TypeTraits)
        _traits = g
    t = _traits.ggml_get_type_traits(ggml_type).contents
    out = np.empty(n, dtype=np.float32)
    if t.to_float is None:
        if ggml_type == 0:
            return np.frombuffer(raw, dtype="<f4", count=n).copy()
        raise ValueError(f"ggml has no to_float for type {ggml_type}")
    fn = c.CFUNCTYPE(None, c.c_void_p, c.c_void_p, c.c_int64)(t.to_float)
    buf = c.create_string_buffer(bytes(raw), len(raw))
    fn(c.cast(buf, c.c_void_p), out.ctypes.data_as(c.c_void_p), n)
    return out
