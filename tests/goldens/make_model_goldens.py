#!/usr/bin/python3
"""Tiny whole-model Hugging Face checkpoints and their forward goldens, for `attntrace model`.

Regenerate: /usr/bin/python3 tests/goldens/make_model_goldens.py   (rewrites tests/fixtures/models/full_*/
            and tests/fixtures/models/full_cases.json; about 10 s)
Then texts: tests/goldens/tokenize_texts.mjs (node; golden/text.json, see there)
Then check: /usr/bin/python3 tests/goldens/check_hf_model.py       (exit 1 on any mismatch)

A TRANSCRIPTION, NOT transformers ITSELF: transformers could not be installed where this ran, so the
goldens come from hf_model.py, a float64 transcription of each family's whole eager forward
(embeddings, blocks, final norm, LM / MLM head) that reuses hf_attention.py for the attention;
check_hf_model.py cross-checks it against an independent numpy forward, PyTorch modules
(nn.LayerNorm, F.gelu, nn.TransformerEncoderLayer, nn.MultiheadAttention) and the one-layer goldens
of make_checkpoint_goldens.py. The folders are laid out as save_pretrained lays them out, so where
transformers is installed they load with AutoModelForCausalLM / AutoModelForMaskedLM (BertModel for
full_bert_base) .from_pretrained(DIR, attn_implementation="eager", torch_dtype=torch.float64) and
model(torch.from_numpy(ids)[None], output_hidden_states=True, output_attentions=True) must give
the goldens (within float64 rounding).

Per case, tests/fixtures/models/full_<case>/:
  config.json                 keys as that family's hub configs spell them
  model.safetensors           (full_llama_tied: model-0000{1,2}-of-00002.safetensors + index.json)
  tokenizer.json              tiny but real (tiny_tokenizers.py), its size = config vocab_size
  ids.npy                     (L,) int64, the input ids (one sequence)
  golden/hidden_states.npy    (N + 1, L, E) float64 = output_hidden_states (0: embeddings; N: after
                              the final norm, none for BERT/RoBERTa)
  golden/attentions.npy       (N, H, L, L) float64 = output_attentions
  golden/logits.npy           (L, V) float64 = logits (absent for full_bert_base: no MLM head)
  golden/text.json            texts -> ids / tokens by npm @huggingface/tokenizers (tokenize_texts.mjs)
tests/fixtures/models/full_cases.json lists the cases with what each one pins.

The weights are make_checkpoint_goldens.py's state-dict builders (seeded N(0, 0.2^2) weights,
gains 1 + N(0, 0.1^2)); bf16 cases are rounded from those and the goldens use the stored bf16
values upcast exactly.
"""
import contextlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_model  # noqa: E402
import make_checkpoint_goldens as mcg  # noqa: E402
import tiny_tokenizers  # noqa: E402

ROOT = mcg.ROOT  # tests/fixtures/models
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


@contextlib.contextmanager
def vocabulary(n):
    """make_checkpoint_goldens' state builders size every vocabulary tensor from its module
    constant V (64 there); point it at N while one case's state dict is built."""
    old, mcg.V = mcg.V, n
    try:
        yield
    finally:
        mcg.V = old


# ------------------------------------------------------------------------------------ configs
def gpt2_config(dtype, v, sp, **extra):
    cfg = mcg.gpt2_config(dtype)
    cfg.update(vocab_size=v, bos_token_id=sp["<|endoftext|>"], eos_token_id=sp["<|endoftext|>"], **extra)
    return cfg


def bert_config(dtype, v, sp, architecture, **extra):
    cfg = mcg.bert_config(dtype, architecture)
    cfg.update(vocab_size=v, pad_token_id=sp["[PAD]"], **extra)
    return cfg


def roberta_config(dtype, v, sp, **extra):
    """As roberta-base: type_vocab_size 1, layer_norm_eps 1e-5, max_position_embeddings = the
    longest sequence + pad_token_id + 1 (514 there); hidden_act gelu_new here so that the LM head's
    hard-coded exact gelu (RobertaLMHead) is pinned."""
    cfg = mcg.bert_config(dtype, "RobertaForMaskedLM")
    cfg.update(model_type="roberta", vocab_size=v, pad_token_id=sp["<pad>"], bos_token_id=sp["<s>"],
               eos_token_id=sp["</s>"], type_vocab_size=1, layer_norm_eps=1e-5, hidden_act="gelu_new", **extra)
    return cfg


def decoder_config(base, dtype, v, sp, bos, eos, **extra):
    cfg = base(dtype)
    cfg.update(vocab_size=v, **extra)
    cfg["bos_token_id"], cfg["eos_token_id"] = (sp.get(bos), sp.get(eos))
    return cfg


def neox_v5_config(dtype, v, sp):
    """transformers 5 style: rope_parameters {rope_theta, partial_rotary_factor}, no rotary_pct /
    rotary_emb_base, "dtype"; sequential residual."""
    cfg = mcg.gpt_neox_config(dtype)
    for key in ("rotary_pct", "rotary_emb_base", "rope_scaling", "torch_dtype"):
        cfg.pop(key, None)
    cfg.update(vocab_size=v, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               use_parallel_residual=False, transformers_version="5.0.0",
               dtype={"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[dtype],
               rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
               bos_token_id=sp["<|endoftext|>"], eos_token_id=sp["<|endoftext|>"])
    return cfg


def bloom560m_config(dtype, v, sp):
    """bigscience/bloom-560m's spelling: n_embed and num_attention_heads (no hidden_size / n_head),
    apply_residual_connection_post_layernorm true."""
    cfg = mcg.bloom_config(dtype)
    del cfg["hidden_size"], cfg["n_head"]
    cfg.update(vocab_size=v, n_embed=32, num_attention_heads=4, n_layer=2, n_inner=None,
               apply_residual_connection_post_layernorm=True, unk_token_id=sp["<unk>"],
               bos_token_id=sp["<s>"], eos_token_id=sp["</s>"], pad_token_id=sp["<pad>"])
    return cfg


def roberta_state(cfg, init, prefix):
    """RobertaForMaskedLM names: bert_state's with roberta. and lm_head.{dense,layer_norm,bias}
    (the decoder weight is tied and not saved, as _keys_to_ignore_on_save / tied weights)."""
    rename = {"cls.predictions.transform.dense": "lm_head.dense",
              "cls.predictions.transform.LayerNorm": "lm_head.layer_norm", "cls.predictions.bias": "lm_head.bias"}
    out = {}
    for name, value in mcg.bert_state(cfg, init, prefix).items():
        for old, new in rename.items():
            if name.startswith(old):
                name = new + name[len(old):]
        out[name] = value
    return out


def bloom560m_state(cfg, init, prefix):
    return mcg.bloom_state(dict(cfg, hidden_size=cfg["n_embed"]), init, prefix)


# -------------------------------------------------------------------------------------- cases
L = 12
CASES = [  # append new cases at the end: the seeds follow the order
    dict(name="full_gpt2", family="gpt2", dtype="f32", prefix="", state=mcg.gpt2_state,
         config=lambda d, v, sp: gpt2_config(d, v, sp),
         pins="GPT2Model names (no prefix, as openai-community/gpt2), gelu_new, tied wte, last hidden state after ln_f"),
    dict(name="full_gpt2_bf16", family="gpt2", dtype="bf16", prefix="transformer.", state=mcg.gpt2_state,
         config=lambda d, v, sp: gpt2_config(d, v, sp, n_layer=2, activation_function="gelu_pytorch_tanh",
                                             scale_attn_by_inverse_layer_idx=True),
         pins="bf16, transformer. prefix, gelu_pytorch_tanh, scale_attn_by_inverse_layer_idx (scores / (n + 1))"),
    dict(name="full_bert_mlm", family="bert", dtype="f32", prefix="bert.", state=mcg.bert_state,
         config=lambda d, v, sp: bert_config(d, v, sp, "BertForMaskedLM", num_hidden_layers=2),
         pins="post-norm blocks, token_type 0, no final norm, cls.predictions head (transform + tied decoder + bias)"),
    dict(name="full_bert_base", family="bert", dtype="bf16", prefix="", state=mcg.bert_state,
         config=lambda d, v, sp: bert_config(d, v, sp, "BertModel", num_hidden_layers=2, hidden_act="gelu_new"),
         pins="BertModel (pooler, no MLM head: no logits), bf16, hidden_act gelu_new"),
    dict(name="full_roberta", family="roberta", dtype="f32", prefix="roberta.", state=roberta_state,
         config=lambda d, v, sp: roberta_config(d, v, sp, num_hidden_layers=2, max_position_embeddings=L + 2),
         pins="positions from pad_token_id + 1 (create_position_ids_from_input_ids; ids[5] is the pad id, "
              "so it gets position 1 and the count skips it), max_position_embeddings = L + 2, lm_head with "
              "exact gelu although hidden_act is gelu_new"),
    dict(name="full_llama", family="llama", dtype="f32", prefix="model.", state=mcg.llama_state,
         config=lambda d, v, sp: decoder_config(mcg.llama_config, d, v, sp, "<|begin_of_text|>", "<|end_of_text|>"),
         pins="GQA 4/2, rope_scaling llama3, untied lm_head, 3 layers"),
    dict(name="full_llama_tied", family="llama", dtype="bf16", prefix="model.", state=mcg.llama_state,
         config=lambda d, v, sp: decoder_config(
             lambda dt: mcg.decoder_config("llama", dt, 4, 2, head_dim=8, num_hidden_layers=2,
                                           tie_word_embeddings=True, rope_theta=500000.0),
             d, v, sp, "<|begin_of_text|>", "<|end_of_text|>"),
         shard_before="model.layers.1.mlp.up_proj.weight",
         pins="bf16, tie_word_embeddings (no lm_head.weight), two shards split inside layer 1"),
    dict(name="full_mistral", family="mistral", dtype="f32", prefix="model.", state=mcg.llama_state,
         config=lambda d, v, sp: decoder_config(mcg.mistral_config, d, v, sp, "<s>", "</s>", num_hidden_layers=2),
         pins="GQA 4/1, sliding_window 3 < L on every layer"),
    dict(name="full_qwen2", family="qwen2", dtype="f32", prefix="model.", state=mcg.llama_state,
         config=lambda d, v, sp: decoder_config(mcg.qwen2_config, d, v, sp, None, "<|endoftext|>",
                                                num_hidden_layers=2, use_sliding_window=True, sliding_window=4,
                                                max_window_layers=1),
         pins="q/k/v biases, tied, use_sliding_window with max_window_layers 1: layer 0 full, layer 1 window 4"),
    dict(name="full_qwen3", family="qwen3", dtype="f32", prefix="model.", state=mcg.llama_state,
         config=lambda d, v, sp: decoder_config(mcg.qwen3_config, d, v, sp, None, "<|endoftext|>",
                                                num_hidden_layers=2, layer_types=["full_attention"] * 2,
                                                max_window_layers=2, tie_word_embeddings=False),
         pins="q_norm/k_norm, head_dim 16 != E/H, untied"),
    dict(name="full_neox", family="gpt_neox", dtype="f32", prefix="gpt_neox.", state=mcg.gpt_neox_state,
         config=lambda d, v, sp: decoder_config(mcg.gpt_neox_config, d, v, sp, "<|endoftext|>", "<|endoftext|>",
                                                num_hidden_layers=2, intermediate_size=64),
         pins="use_parallel_residual, rotary_pct 0.25 (4 of 16 dims), embed_out"),
    dict(name="full_neox_seq", family="gpt_neox", dtype="bf16", prefix="gpt_neox.", state=mcg.gpt_neox_state,
         config=neox_v5_config,
         pins="bf16, sequential residual, transformers 5 rope_parameters partial_rotary_factor 0.5"),
    dict(name="full_bloom", family="bloom", dtype="f32", prefix="transformer.", state=mcg.bloom_state,
         config=lambda d, v, sp: decoder_config(mcg.bloom_config, d, v, sp, "<s>", "</s>", n_layer=2),
         pins="ALiBi with 6 heads (not a power of two), word_embeddings_layernorm, tied"),
    dict(name="full_bloom_post", family="bloom", dtype="bf16", prefix="", state=bloom560m_state,
         config=bloom560m_config,
         pins="bf16, apply_residual_connection_post_layernorm, bloom-560m keys n_embed / num_attention_heads"),
]


def new_config(kind, special_ids, **extra):
    """mcg.new_config's tiny config of an issue 36 family, bos / eos from the tokenizer's specials."""
    def build(dtype, v, sp):
        cfg = mcg.new_config(kind, dtype, vocab_size=v, **extra)
        cfg["bos_token_id"], cfg["eos_token_id"] = (sp.get(t) for t in special_ids)
        return cfg
    return build


GEMMA_IDS, PHI3_IDS, MISTRAL_IDS = ("<bos>", "<eos>"), ("<s>", "<|endoftext|>"), ("<s>", "</s>")
QWEN_IDS, OLMO_IDS = (None, "<|endoftext|>"), (None, "<|endoftext|>")
MOE_EXTRA = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
NEW_CASES = [  # issue 36's families
    dict(name="full_gemma", family="gemma", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("gemma", GEMMA_IDS, num_hidden_layers=2, num_key_value_heads=4),
         pins="Gemma 1: RMSNorm x (1 + w), embeddings x sqrt(32) in float32, GeGLU gelu_pytorch_tanh, tied"),
    dict(name="full_gemma2", family="gemma2", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("gemma2", GEMMA_IDS, attn_logit_softcapping=3.0, final_logit_softcapping=2.0,
                           query_pre_attn_scalar=16, sliding_window=4),
         pins="sandwich norms, attention soft-capping 3 and logit soft-capping 2 both active, layers 0 and 2 "
              "sliding (window 4 < L), query_pre_attn_scalar 16, GQA 4/2, tied"),
    dict(name="full_gemma2_bf16", family="gemma2", dtype="bf16", prefix="model.", state=mcg.new_family_state,
         config=new_config("gemma2", GEMMA_IDS, num_hidden_layers=2, tie_word_embeddings=False,
                           attn_logit_softcapping=5.0, final_logit_softcapping=None),
         pins="bf16: sqrt(32) rounded to bf16 (5.65625), untied lm_head, no logit soft-capping (null)"),
    dict(name="full_gemma3", family="gemma3_text", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("gemma3_text", GEMMA_IDS, num_hidden_layers=4, query_pre_attn_scalar=8,
                           sliding_window=5, sliding_window_pattern=2, rope_local_base_freq=10000.0,
                           rope_theta=1000000.0, rope_scaling={"factor": 8.0, "rope_type": "linear"},
                           final_logit_softcapping=3.0, attn_logit_softcapping=50.0),
         pins="q/k norms x (1 + w), local layers 0 and 2 (rope_local_base_freq, window 5), global 1 and 3 "
              "(rope_theta 1e6, linear x8), attn_logit_softcapping in the config but not applied, logits capped"),
    dict(name="full_phi3", family="phi3", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("phi3", PHI3_IDS, num_hidden_layers=2, original_max_position_embeddings=4,
                           partial_rotary_factor=0.5, sliding_window=6,
                           rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5], "long_factor": [2.0, 6.0]}),
         pins="fused qkv_proj (GQA 4/2) and gate_up_proj, partial rotary 0.5, LongRoPE: L = 12 past the original 4 "
              "so the long factors and the attention factor, sliding_window 6"),
    dict(name="full_phi3_bf16", family="phi3", dtype="bf16", prefix="model.", state=mcg.new_family_state,
         config=new_config("phi3", PHI3_IDS, num_hidden_layers=2, original_max_position_embeddings=16,
                           max_position_embeddings=64, tie_word_embeddings=True,
                           rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                                         "long_factor": [4.0, 5.0, 6.0, 7.0]}),
         pins="bf16, tied, LongRoPE with L = 12 within the original 16: the short factors"),
    dict(name="full_olmo2", family="olmo2", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("olmo2", OLMO_IDS, num_hidden_layers=2, rms_norm_eps=1e-5),
         pins="no pre-norms, post_attention / post_feedforward norms, q/k RMSNorm over the whole projection"),
    dict(name="full_mixtral", family="mixtral", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("mixtral", MISTRAL_IDS, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                           intermediate_size=16,
                           sliding_window=5, rope_theta=1000000.0, rms_norm_eps=1e-5),
         pins="block_sparse_moe w1/w3/w2, top 2 of 4 renormalised, every expert chosen, sliding_window 5"),
    dict(name="full_qwen2_moe", family="qwen2_moe", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("qwen2_moe", QWEN_IDS, mlp_only_layers=[1], decoder_sparse_step=1,
                           shared_expert_intermediate_size=24, norm_topk_prob=False, qkv_bias=True, **MOE_EXTRA),
         pins="q/k/v biases, shared expert with its sigmoid gate, top 2 of 4 not renormalised, layer 1 dense "
              "(mlp_only_layers)"),
    dict(name="full_qwen3_moe", family="qwen3_moe", dtype="bf16", prefix="model.", state=mcg.new_family_state,
         config=new_config("qwen3_moe", QWEN_IDS, num_hidden_layers=2, head_dim=16, norm_topk_prob=True,
                           mlp_only_layers=[], **dict(MOE_EXTRA, num_experts_per_tok=3)),
         pins="bf16, per-head q/k norms, top 3 of 4 renormalised (norm_topk_prob)"),
    dict(name="full_olmoe", family="olmoe", dtype="f32", prefix="model.", state=mcg.new_family_state,
         config=new_config("olmoe", OLMO_IDS, num_hidden_layers=2, num_experts=4, num_experts_per_tok=2,
                           rms_norm_eps=1e-5),
         pins="q/k norms over the whole projection, gate_proj/up_proj/down_proj experts, top 2 of 4 not "
              "renormalised"),
]
CASES += NEW_CASES


def make_ids(spec, cfg, specials, seed):
    """(L,) int64 ids drawn from the non-special vocabulary; RoBERTa's start with <s>, end with
    </s> and carry the pad id at position 5."""
    g = torch.Generator().manual_seed(seed)
    normal = torch.tensor([i for i in range(cfg["vocab_size"]) if i not in specials.values()])
    ids = normal[torch.randint(0, len(normal), (L,), generator=g)]
    if spec["family"] == "roberta":
        ids[0], ids[5], ids[-1] = specials["<s>"], specials["<pad>"], specials["</s>"]
    return ids


def make_case(spec, seed):
    folder = ROOT / spec["name"]
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "golden").mkdir(parents=True)
    tokenizer, specials, v = tiny_tokenizers.FAMILY_TOKENIZERS[spec["family"]]()
    cfg = spec["config"](spec["dtype"], v, specials)
    with vocabulary(v):
        state = spec["state"](cfg, mcg.Init(seed), spec["prefix"])
    state = {k: t.to(DTYPES[spec["dtype"]]) for k, t in state.items()}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, indent=1, ensure_ascii=False) + "\n")
    mcg.save_checkpoint(folder, state, spec.get("shard_before"))
    ids = make_ids(spec, cfg, specials, seed)
    np.save(folder / "ids.npy", ids.numpy().astype(np.int64))
    tensors = mcg.read_checkpoint(folder)  # the weights as stored, upcast exactly
    with torch.no_grad():
        out = hf_model.forward(tensors, cfg, ids)
    for what, value in out.items():
        if value is not None:
            dtype = np.int64 if what == "experts" else np.float64
            np.save(folder / "golden" / f"{what}.npy", np.ascontiguousarray(value.numpy(), dtype=dtype))
    if "experts" in out:  # a token routed to each expert of each MoE layer
        for n, chosen in enumerate(out["experts"]):
            if len(set(chosen.flatten().tolist())) != hf_model.with_defaults(cfg)["num_experts"]:
                raise SystemExit(f"{spec['name']}: MoE layer {n} leaves an expert without tokens")
    full = hf_model.with_defaults(cfg)
    layers, e, h = hf_model.sizes(full)
    return {"name": spec["name"], "model_type": cfg["model_type"], "dtype": spec["dtype"],
            "tensor_prefix": spec["prefix"], "sharded": "shard_before" in spec, "layers": layers,
            "hidden_size": e, "heads": h, "kv_heads": full.get("num_key_value_heads", h), "length": L,
            "vocab_size": v, "tied": bool(full["tie_word_embeddings"]), "logits": out["logits"] is not None,
            "special_tokens": specials, "pins": spec["pins"]}


def main():
    manifest = []
    for seed, spec in enumerate(CASES, start=2700):
        manifest.append(make_case(spec, seed))
        print(f"{spec['name']}: ok")
    doc = {"comment": "Whole-model goldens of tiny Hugging Face checkpoints, written by "
                      "tests/goldens/make_model_goldens.py from hf_model.py (a float64 transcription of "
                      "transformers' eager forward) and checked by tests/goldens/check_hf_model.py. Each "
                      "case folder holds config.json, safetensors, tokenizer.json, ids.npy and golden/"
                      "{hidden_states,attentions,logits}.npy (float64).",
           "cases": manifest}
    (ROOT / "full_cases.json").write_text(json.dumps(doc, indent=1) + "\n")
    total = sum(f.stat().st_size for f in ROOT.glob("full_*/**/*") if f.is_file())
    print(f"{len(manifest)} cases -> {ROOT / 'full_cases.json'} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
