"""The whole forward pass of each Hugging Face family, transcribed into PyTorch float64.

What `attntrace model` must equal: AutoModelFor{CausalLM,MaskedLM}.from_pretrained(DIR,
attn_implementation="eager")(input_ids, output_hidden_states=True, output_attentions=True) on one
sequence. transformers could not be installed where this was written (no PyPI, no device machine),
so, like hf_attention.py (which this module reuses for every attention), each function below names
the huggingface/transformers file (src/transformers/...) and the function it transcribes; the
arithmetic is kept, dropout is the identity (eval), and the dtype juggling is dropped: everything
runs in float64 on the weights as stored (bf16 / f16 upcast exactly).

Legend: L sequence length (one sequence, batch 1), E hidden size, H heads, G key/value heads, P head
dim, I MLP (intermediate) size, V vocabulary, N layers.

  forward(tensors, cfg, ids) -> {"hidden_states": (N + 1, L, E), "attentions": (N, H, L, L),
                                 "logits": (L, V) or None}
  tensors: {name -> float64 tensor} of the whole checkpoint (read_checkpoint in
           make_checkpoint_goldens.py), names as save_pretrained writes them, with or without the
           model-class prefix ("transformer.", "model.", "bert.", ...).
  cfg:     the config.json dict; missing keys take the defaults of the family's configuration_*.py
           (DEFAULTS below) and the aliases the config classes accept are resolved (with_defaults).

hidden_states are output_hidden_states: index 0 the embeddings (BLOOM: after
word_embeddings_layernorm; BERT/RoBERTa: after the embedding LayerNorm), index n the output of
block n - 1, and the LAST entry is after the final norm for every family that has one (GPT-2 ln_f,
Llama-like norm, NeoX final_layer_norm, BLOOM ln_f); BERT/RoBERTa have no final norm. transformers
4.x builds the tuple with an explicit loop (e.g. models/gpt2/modeling_gpt2.py GPT2Model.forward:
all_hidden_states += (hidden_states,) before each block, then ln_f, then once more); 4.54+ records
it with hooks (utils/generic.py check_model_inputs: the first layer's input, every layer's output,
then collected_outputs[key][:-1] + (outputs.last_hidden_state,)): the same tuple.
"""
import math

import torch
from torch import nn

import hf_attention as hf
from hf_attention import site

F64 = torch.float64

# ------------------------------------------------------------------------------------- config
DEFAULTS = {
    # models/gpt2/configuration_gpt2.py GPT2Config.__init__ (attribute_map: hidden_size -> n_embd,
    # max_position_embeddings -> n_positions, num_attention_heads -> n_head, num_hidden_layers -> n_layer)
    "gpt2": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                 activation_function="gelu_new", layer_norm_epsilon=1e-5, scale_attn_weights=True,
                 scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False, tie_word_embeddings=True),
    # models/bert/configuration_bert.py BertConfig.__init__
    "bert": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                 layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute",
                 tie_word_embeddings=True),
    # models/roberta/configuration_roberta.py RobertaConfig.__init__ (BertConfig's, pad_token_id=1)
    "roberta": dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                    layer_norm_eps=1e-12, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                    position_embedding_type="absolute", tie_word_embeddings=True),
    # models/llama/configuration_llama.py LlamaConfig.__init__ (num_key_value_heads None -> heads)
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                  max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  rope_theta=10000.0, attention_bias=False, mlp_bias=False, head_dim=None),
    # models/mistral/configuration_mistral.py MistralConfig.__init__ (sliding_window 4096 when absent)
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                    max_position_embeddings=4096 * 32, rms_norm_eps=1e-6, tie_word_embeddings=False,
                    rope_theta=10000.0, sliding_window=4096),
    # models/qwen2/configuration_qwen2.py Qwen2Config.__init__
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
                  max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  rope_theta=10000.0, use_sliding_window=False, sliding_window=4096, max_window_layers=28),
    # models/qwen3/configuration_qwen3.py Qwen3Config.__init__
    "qwen3": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, head_dim=128, hidden_act="silu",
                  max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  rope_theta=10000.0, attention_bias=False, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=28),
    # models/gpt_neox/configuration_gpt_neox.py GPTNeoXConfig (4.x: rotary_pct, rotary_emb_base;
    # 5.x: rope_parameters {rope_theta, partial_rotary_factor}, see with_defaults)
    "gpt_neox": dict(vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64,
                     intermediate_size=24576, hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000,
                     max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=True,
                     tie_word_embeddings=False, attention_bias=True),
    # models/gemma/modular_gemma.py GemmaConfig (hidden_activation: 4.x GemmaMLP, see activation_name)
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh",
                  max_position_embeddings=8192, rms_norm_eps=1e-6, tie_word_embeddings=True, rope_theta=10000.0,
                  attention_bias=False),
    # models/gemma2/configuration_gemma2.py Gemma2Config (layer_types: with_defaults)
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh",
                   max_position_embeddings=8192, rms_norm_eps=1e-6, tie_word_embeddings=True, rope_theta=10000.0,
                   attention_bias=False, query_pre_attn_scalar=256, sliding_window=4096, layer_types=None,
                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0),
    # models/gemma3/modular_gemma3.py Gemma3TextConfig (sliding_window_pattern 6 when layer_types is None)
    "gemma3_text": dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                        num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072, rms_norm_eps=1e-6,
                        tie_word_embeddings=True, rope_theta=1000000.0, attention_bias=False,
                        query_pre_attn_scalar=256, sliding_window=4096, layer_types=None,
                        final_logit_softcapping=None, attn_logit_softcapping=None, rope_scaling=None,
                        rope_local_base_freq=10000.0, sliding_window_pattern=6),
    # models/phi3/configuration_phi3.py Phi3Config
    "phi3": dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=4096,
                 original_max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
                 rope_theta=10000.0, partial_rotary_factor=1.0, sliding_window=None),
    # models/olmo2/modular_olmo2.py Olmo2Config
    "olmo2": dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048,
                  tie_word_embeddings=False, rope_theta=10000.0, attention_bias=False, rms_norm_eps=1e-5),
    # models/mixtral/configuration_mixtral.py MixtralConfig (rope_theta 1e6 as 4.x)
    "mixtral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                    max_position_embeddings=4096 * 32, rms_norm_eps=1e-5, tie_word_embeddings=False,
                    sliding_window=None, num_experts_per_tok=2, num_local_experts=8, rope_theta=1e6),
    # models/qwen2_moe/configuration_qwen2_moe.py Qwen2MoeConfig (layer_types: with_defaults)
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, hidden_act="silu",
                      max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                      rope_theta=10000.0, use_sliding_window=False, sliding_window=4096, max_window_layers=28,
                      decoder_sparse_step=1, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                      num_experts_per_tok=4, num_experts=60, norm_topk_prob=False, mlp_only_layers=None,
                      qkv_bias=True, layer_types=None),
    # models/qwen3_moe/configuration_qwen3_moe.py Qwen3MoeConfig
    "qwen3_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                      num_attention_heads=32, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=32768,
                      rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0, attention_bias=False,
                      use_sliding_window=False, sliding_window=4096, decoder_sparse_step=1, moe_intermediate_size=768,
                      num_experts_per_tok=8, num_experts=128, norm_topk_prob=False, mlp_only_layers=None),
    # models/olmoe/configuration_olmoe.py OlmoeConfig
    "olmoe": dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                  num_attention_heads=16, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=4096,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0, attention_bias=False,
                  clip_qkv=None, num_experts_per_tok=8, num_experts=64, norm_topk_prob=False),
    # models/bloom/configuration_bloom.py BloomConfig.__init__ (no position limit: ALiBi)
    "bloom": dict(vocab_size=250880, hidden_size=64, n_layer=2, n_head=8, layer_norm_epsilon=1e-5,
                  apply_residual_connection_post_layernorm=False, pretraining_tp=1, slow_but_exact=False,
                  tie_word_embeddings=True),
}


def with_defaults(cfg):
    """config.json -> a copy with the family's defaults filled in and the spellings hf_attention reads.

    Aliases: BLOOM's n_embed (configuration_bloom.py BloomConfig.__init__: "Backward compatibility
    with n_embed kwarg", it wins over hidden_size) and num_attention_heads / num_hidden_layers
    (BloomConfig.attribute_map -> n_head / n_layer), as bigscience/bloom-560m's config.json spells
    them; NeoX's rope_parameters.rope_theta / partial_rotary_factor (configuration_gpt_neox.py 5.x
    convert_rope_params_to_dict: they win over the 4.x rotary_emb_base / rotary_pct)."""
    kind = cfg["model_type"]
    out = dict(DEFAULTS[kind])
    out.update({k: v for k, v in cfg.items()})
    if kind == "bloom":
        if cfg.get("n_embed") is not None:
            out["hidden_size"] = cfg["n_embed"]
        for alias, name in (("num_attention_heads", "n_head"), ("num_hidden_layers", "n_layer")):
            if alias in cfg and name not in cfg:
                out[name] = cfg[alias]
    if kind == "gpt_neox":
        rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if rp.get("rope_type", rp.get("type", "default")) != "default":
            raise ValueError(f"gpt_neox rope type {rp} is not transcribed")
        out["rotary_emb_base"] = rp.get("rope_theta", out["rotary_emb_base"])
        out["rotary_pct"] = rp.get("partial_rotary_factor", out["rotary_pct"])
    if kind in LLAMA_LIKE and out.get("num_key_value_heads") is None:
        out["num_key_value_heads"] = out["num_attention_heads"]
    if kind in ("gemma2", "gemma3_text") and out.get("layer_types") is None:
        pattern = 2 if kind == "gemma2" else out["sliding_window_pattern"]
        out["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                              for i in range(out["num_hidden_layers"])]
    if kind == "qwen2_moe" and out.get("layer_types") is None:  # Qwen2MoeConfig.__post_init__
        out["layer_types"] = ["sliding_attention" if (i + 1) % 2 and i < out["max_window_layers"]
                              and out["use_sliding_window"] else "full_attention" for i in range(out["num_hidden_layers"])]
    if kind in MOE:
        out["mlp_only_layers"] = out.get("mlp_only_layers") or []
        out.setdefault("num_experts", out.get("num_local_experts"))
    return out


LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2", "mixtral",
              "qwen2_moe", "qwen3_moe", "olmoe")
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe")


def sizes(cfg):
    """(N layers, E, H) of a with_defaults config."""
    if cfg["model_type"] == "gpt2":
        return cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    if cfg["model_type"] == "bloom":
        return cfg["n_layer"], cfg["hidden_size"], cfg["n_head"]
    return cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]


def max_length(cfg):
    """The longest sequence the position scheme allows, or None (ALiBi / rotary without a table).

    GPT-2 wpe has n_positions rows; BERT's position_embeddings max_position_embeddings rows;
    RoBERTa's positions start at padding_idx + 1 (create_position_ids_from_input_ids), so
    max_position_embeddings - pad_token_id - 1. Rotary families: max_position_embeddings is
    advisory in transformers (the rotary table grows), so no limit is imposed here."""
    kind = cfg["model_type"]
    if kind == "gpt2":
        return cfg["n_positions"]
    if kind == "bert":
        return cfg["max_position_embeddings"]
    if kind == "roberta":
        return cfg["max_position_embeddings"] - cfg["pad_token_id"] - 1
    return None


# ---------------------------------------------------------------------------------- activations
def activation(name):
    """activations.py ACT2FN[name] as a float64 function."""
    def gelu_new(x):  # NewGELUActivation.forward
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    def gelu_fast(x):  # FastGELUActivation.forward
        return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))

    table = {
        "gelu": nn.functional.gelu,  # GELUActivation (exact, erf)
        "gelu_new": gelu_new,
        "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),  # PytorchGELUTanh
        "gelu_fast": gelu_fast,
        "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),  # QuickGELUActivation
        "silu": nn.functional.silu, "swish": nn.functional.silu,  # SiLUActivation / nn.SiLU
        "relu": nn.functional.relu, "tanh": torch.tanh,
    }
    if name not in table:
        raise ValueError(f"activation {name} is not transcribed")
    return table[name]


def bloom_gelu(x):
    """models/bloom/modeling_bloom.py bloom_gelu_forward (BloomGelu in eval): the tanh GELU with the
    rounded constant 0.79788456 (sqrt(2/pi) = 0.7978845608...), whatever the config says."""
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def conv1d(x, t, name):
    """pytorch_utils.py Conv1D.forward: x @ weight + bias, weight (in, out)."""
    return x @ t[name + ".weight"] + t[name + ".bias"]


# ------------------------------------------------------------------------------------ tensors
ANCHORS = {  # the embedding tensor that locates the base model's prefix, and the block list name
    "gpt2": ("wte.weight", "h"), "bloom": ("word_embeddings.weight", "h"),
    "bert": ("embeddings.word_embeddings.weight", "encoder.layer"),
    "roberta": ("embeddings.word_embeddings.weight", "encoder.layer"),
    "gpt_neox": ("embed_in.weight", "layers"),
    "llama": ("embed_tokens.weight", "layers"), "mistral": ("embed_tokens.weight", "layers"),
    "qwen2": ("embed_tokens.weight", "layers"), "qwen3": ("embed_tokens.weight", "layers"),
    **{kind: ("embed_tokens.weight", "layers") for kind in ("gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
                                                            "mixtral", "qwen2_moe", "qwen3_moe", "olmoe")},
}


def base_prefix(tensors, kind):
    """The prefix of the base model's names: "" for a saved GPT2Model / BertModel / BloomModel,
    "transformer." / "bert." / "roberta." / "model." / "gpt_neox." for the *For{CausalLM,MaskedLM}
    classes (their base_model_prefix)."""
    anchor = ANCHORS[kind][0]
    found = [name[: -len(anchor)] for name in tensors if name.endswith(anchor)
             and (name == anchor or name[: -len(anchor)].endswith("."))]
    if len(found) != 1:
        raise ValueError(f"{kind}: expected one tensor named [prefix]{anchor}, found {found}")
    return found[0]


def block_tensors(tensors, kind, prefix, n):
    """{short name -> tensor} of block N, the prefix "<base>h.N." (or layers / encoder.layer) removed."""
    pre = f"{prefix}{ANCHORS[kind][1]}.{n}."
    return {k[len(pre):]: v for k, v in tensors.items() if k.startswith(pre)}


# ----------------------------------------------------------------------------------- embeddings
def roberta_position_ids(ids, padding_idx):
    """models/roberta/modeling_roberta.py create_position_ids_from_input_ids: positions count the
    non-padding tokens from padding_idx + 1; a token equal to pad_token_id gets padding_idx itself
    and does not advance the count (it is still attended: attention_mask defaults to all ones)."""
    mask = ids.ne(padding_idx).int()
    incremental = torch.cumsum(mask, dim=0).type_as(mask) * mask
    return incremental.long() + padding_idx


def embed(tensors, cfg, prefix, ids):
    """ids (L,) int64 -> (L, E), hidden_states[0].

    gpt2: modeling_gpt2.py GPT2Model.forward, inputs_embeds + position_embeds (wte, wpe at 0..L-1).
    bert: modeling_bert.py BertEmbeddings.forward, (word + token_type(0)) + position, LayerNorm.
    roberta: modeling_roberta.py RobertaEmbeddings.forward, the same with roberta_position_ids.
    bloom: modeling_bloom.py BloomModel.forward, word_embeddings_layernorm(word_embeddings(ids)).
    llama/mistral/qwen2/qwen3: embed_tokens(ids); gpt_neox: modeling_gpt_neox.py embed_in(ids)."""
    kind, t = cfg["model_type"], {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    length = ids.shape[0]
    limit = max_length(cfg)
    if limit is not None and length > limit:
        raise ValueError(f"{kind}: {length} tokens but the positions allow {limit}")
    if kind == "gpt2":
        return t["wte.weight"][ids] + t["wpe.weight"][torch.arange(length)]
    if kind in ("bert", "roberta"):
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"position_embedding_type {cfg['position_embedding_type']} is not transcribed")
        positions = (roberta_position_ids(ids, cfg["pad_token_id"]) if kind == "roberta"
                     else torch.arange(length))
        e = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.token_type_embeddings.weight"][0]
        e = e + t["embeddings.position_embeddings.weight"][positions]
        return hf.layer_norm(e, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"],
                             cfg["layer_norm_eps"])
    if kind == "bloom":
        return hf.layer_norm(t["word_embeddings.weight"][ids], t["word_embeddings_layernorm.weight"],
                             t["word_embeddings_layernorm.bias"], cfg["layer_norm_epsilon"])
    if kind == "gpt_neox":
        return t["embed_in.weight"][ids]
    if kind in ("gemma", "gemma2", "gemma3_text"):
        return t["embed_tokens.weight"][ids] * gemma_normalizer(cfg)
    return t["embed_tokens.weight"][ids]


def gemma_normalizer(cfg):
    """models/gemma/modular_gemma.py GemmaTextScaledWordEmbedding (Gemma 3's the same): the
    embed_scale buffer torch.tensor(hidden_size**0.5) (float32) cast to the weights' dtype, the
    checkpoint's (torch_dtype / dtype in config.json): sqrt(3072) = 55.4256 is 55.5 in bf16."""
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        cfg.get("torch_dtype", cfg.get("dtype")), torch.float32)
    return torch.tensor(cfg["hidden_size"] ** 0.5).to(dtype).to(F64)


# --------------------------------------------------------------------------------------- blocks
# Each block: t (block N's tensors), cfg, x (1, L, E) = hidden_states[N], n -> (1, L, E), the
# attention weights (1, H, L, L) of hf_attention.FAMILIES.

def gpt2_block(t, cfg, x, n):
    """modeling_gpt2.py GPT2Block.forward: x + attn(ln_1(x)), then + mlp(ln_2(.)); GPT2MLP: c_fc,
    ACT2FN[activation_function], c_proj (Conv1D); inner size n_inner or 4 E. The attention flags are
    hf_attention.gpt2's: scale_attn_weights, scale_attn_by_inverse_layer_idx (scores / (n + 1));
    reorder_and_upcast_attn (GPT2Attention._upcast_and_reordered_attn) only moves the scaling before
    the product and computes it in float32: the same value in float64, so it is ignored here."""
    a = hf.gpt2(t, cfg, x, n)
    h = site("attn_out", n, a["output"]) + x
    m = hf.layer_norm(h, t["ln_2.weight"], t["ln_2.bias"], cfg["layer_norm_epsilon"])
    m = conv1d(activation(cfg["activation_function"])(conv1d(m, t, "mlp.c_fc")), t, "mlp.c_proj")
    return h + site("mlp_out", n, m), a["weights"]


def bert_block(t, cfg, x, n):
    """modeling_bert.py BertLayer.forward (RobertaLayer is a copy), post-norm:
    BertSelfOutput: LayerNorm(dense(context) + x); BertIntermediate: ACT2FN[hidden_act](dense);
    BertOutput: LayerNorm(dense(intermediate) + attention_output)."""
    a = hf.bert(t, cfg, x, n)
    eps = cfg["layer_norm_eps"]
    h = hf.layer_norm(site("attn_out", n, a["output"]) + x, t["attention.output.LayerNorm.weight"],
                      t["attention.output.LayerNorm.bias"], eps)
    i = activation(cfg["hidden_act"])(hf.linear(h, t, "intermediate.dense"))
    out = hf.layer_norm(site("mlp_out", n, hf.linear(i, t, "output.dense")) + h, t["output.LayerNorm.weight"],
                        t["output.LayerNorm.bias"], eps)
    return out, a["weights"]


def llama_block(t, cfg, x, n):
    """models/llama/modeling_llama.py LlamaDecoderLayer.forward: x + self_attn(input_layernorm(x)),
    then + mlp(post_attention_layernorm(.)); LlamaMLP.forward:
    down_proj(act_fn(gate_proj(x)) * up_proj(x)) (bias = mlp_bias; Mistral, Qwen2, Qwen3 MLPs are
    the same without bias)."""
    a = hf.llama(t, cfg, x, n)
    h = x + site("attn_out", n, a["output"])
    m = hf.rms_norm(h, t["post_attention_layernorm.weight"], cfg["rms_norm_eps"])
    gate = activation(cfg["hidden_act"])(hf.linear(m, t, "mlp.gate_proj"))
    m = hf.linear(gate * hf.linear(m, t, "mlp.up_proj"), t, "mlp.down_proj")
    return h + site("mlp_out", n, m), a["weights"]


def gpt_neox_block(t, cfg, x, n):
    """models/gpt_neox/modeling_gpt_neox.py GPTNeoXLayer.forward:
    use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)) (summed as mlp + attn + x);
    else: h = attn(ln1(x)) + x, then mlp(ln2(h)) + h. GPTNeoXMLP: dense_h_to_4h, ACT2FN[hidden_act],
    dense_4h_to_h."""
    a = hf.gpt_neox(t, cfg, x, n)

    def mlp(y):
        y = hf.layer_norm(y, t["post_attention_layernorm.weight"], t["post_attention_layernorm.bias"],
                          cfg["layer_norm_eps"])
        y = activation(cfg["hidden_act"])(hf.linear(y, t, "mlp.dense_h_to_4h"))
        return hf.linear(y, t, "mlp.dense_4h_to_h")

    attn = site("attn_out", n, a["output"])
    if cfg["use_parallel_residual"]:
        return site("mlp_out", n, mlp(x)) + attn + x, a["weights"]
    h = attn + x
    return site("mlp_out", n, mlp(h)) + h, a["weights"]


def bloom_block(t, cfg, x, n):
    """models/bloom/modeling_bloom.py BloomBlock.forward: the residual of both adds is the normed
    input (input_layernorm / post_attention_layernorm output) when
    apply_residual_connection_post_layernorm, else the un-normed stream; BloomAttention and BloomMLP
    add it themselves (dropout_add: residual + out). BloomMLP: dense_h_to_4h, bloom_gelu,
    dense_4h_to_h (pretraining_tp slicing is the same sum)."""
    a = hf.bloom(t, cfg, x, n)
    post = cfg["apply_residual_connection_post_layernorm"]
    attention_output = (a["normed"] if post else x) + site("attn_out", n, a["output"])
    ln2 = hf.layer_norm(attention_output, t["post_attention_layernorm.weight"],
                        t["post_attention_layernorm.bias"], cfg["layer_norm_epsilon"])
    mlp = hf.linear(bloom_gelu(hf.linear(ln2, t, "mlp.dense_h_to_4h")), t, "mlp.dense_4h_to_h")
    return (ln2 if post else attention_output) + site("mlp_out", n, mlp), a["weights"]


def gated(t, cfg, y, stem, act=None):
    """A gated MLP (LlamaMLP, GemmaMLP, OlmoeMLP, Qwen2MoeMLP, MixtralBlockSparseTop2MLP):
    down(act(gate y) * up y), names STEM + gate_proj / up_proj / down_proj (Mixtral: w1 / w3 / w2)."""
    act = act or activation(cfg["hidden_act"])
    g, u, d = ("w1", "w3", "w2") if stem.startswith("block_sparse_moe.") else ("gate_proj", "up_proj", "down_proj")
    return hf.linear(act(hf.linear(y, t, stem + g)) * hf.linear(y, t, stem + u), t, stem + d)


def gemma_activation(cfg):
    """gemma: hidden_activation when set (4.x GemmaMLP), else hidden_act (5.x); gemma2/3:
    ACT2FN[hidden_activation]."""
    if cfg["model_type"] == "gemma" and cfg.get("hidden_activation") is None:
        return activation(cfg["hidden_act"])
    return activation(cfg["hidden_activation"])


def gemma_block(t, cfg, x, n):
    """gemma: LlamaDecoderLayer with GemmaRMSNorm (pre-norm, GeGLU). gemma2 / gemma3_text:
    Gemma2DecoderLayer.forward / Gemma3DecoderLayer.forward: residual + post_attention_layernorm(
    attn(input_layernorm x)), then residual + post_feedforward_layernorm(mlp(pre_feedforward_layernorm .))."""
    a, eps, act = hf.gemma(t, cfg, x, n), cfg["rms_norm_eps"], gemma_activation(cfg)
    if cfg["model_type"] == "gemma":
        h = x + site("attn_out", n, a["output"])
        m = gated(t, cfg, hf.gemma_rms_norm(h, t["post_attention_layernorm.weight"], eps), "mlp.", act)
        return h + site("mlp_out", n, m), a["weights"]
    h = x + site("attn_out", n, hf.gemma_rms_norm(a["output"], t["post_attention_layernorm.weight"], eps))
    m = gated(t, cfg, hf.gemma_rms_norm(h, t["pre_feedforward_layernorm.weight"], eps), "mlp.", act)
    return h + site("mlp_out", n, hf.gemma_rms_norm(m, t["post_feedforward_layernorm.weight"], eps)), a["weights"]


def phi3_block(t, cfg, x, n):
    """models/phi3/modular_phi3.py Phi3DecoderLayer.forward (pre-norm) and Phi3MLP.forward:
    gate, up = gate_up_proj(y).chunk(2, dim=-1); down_proj(up * act(gate))."""
    a = hf.phi3(t, cfg, x, n)
    h = x + site("attn_out", n, a["output"])
    gate, up = hf.linear(hf.rms_norm(h, t["post_attention_layernorm.weight"], cfg["rms_norm_eps"]), t,
                         "mlp.gate_up_proj").chunk(2, dim=-1)
    return h + site("mlp_out", n, hf.linear(up * activation(cfg["hidden_act"])(gate), t, "mlp.down_proj")), a["weights"]


def olmo2_block(t, cfg, x, n):
    """models/olmo2/modular_olmo2.py Olmo2DecoderLayer.forward: residual + post_attention_layernorm(
    attn(x)), then residual + post_feedforward_layernorm(mlp(.)) (no norm before either)."""
    a, eps = hf.llama_moe(t, cfg, x, n), cfg["rms_norm_eps"]
    h = x + site("attn_out", n, hf.rms_norm(a["output"], t["post_attention_layernorm.weight"], eps))
    return h + site("mlp_out", n, hf.rms_norm(gated(t, cfg, h, "mlp."), t["post_feedforward_layernorm.weight"], eps)), a["weights"]


def moe_mlp(t, cfg, y, n):
    """The sparse MoE block on y (1, L, E) -> (out, chosen (L, K) int64, weights (L, K)).
    MixtralSparseMoeBlock.forward / Qwen2MoeTopKRouter + Qwen2MoeSparseMoeBlock.forward /
    OlmoeSparseMoeBlock: router_logits = gate(y); softmax over experts; topk(K); / their sum when
    norm_topk_prob (Mixtral always); for each expert hit (in order), index_add_ of expert(y[rows]) *
    weight; Qwen2-MoE: + sigmoid(shared_expert_gate(y)) * shared_expert(y)."""
    kind, y = cfg["model_type"], y[0]
    stem = "block_sparse_moe." if kind == "mixtral" else "mlp."
    probs = nn.functional.softmax(hf.linear(y, t, stem + "gate"), dim=-1)
    weights, chosen = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
    if kind == "mixtral" or cfg["norm_topk_prob"]:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(y)
    for j in sorted(set(chosen.flatten().tolist())):
        rows, slot = torch.where(chosen == j)
        out.index_add_(0, rows, gated(t, cfg, y[rows], f"{stem}experts.{j}.") * weights[rows, slot, None])
    if kind == "qwen2_moe":
        out = out + torch.sigmoid(hf.linear(y, t, "mlp.shared_expert_gate")) * gated(t, cfg, y, "mlp.shared_expert.")
    return out[None], chosen, weights


def sparse_layer(cfg, n):
    """Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: a MoE MLP unless n in mlp_only_layers or
    (n + 1) % decoder_sparse_step; Mixtral and OLMoE: every layer."""
    if cfg["model_type"] in ("mixtral", "olmoe"):
        return True
    return n not in cfg["mlp_only_layers"] and cfg["num_experts"] > 0 and (n + 1) % cfg["decoder_sparse_step"] == 0


def moe_block(t, cfg, x, n):
    """MixtralDecoderLayer / Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer / OlmoeDecoderLayer: pre-norm,
    input_layernorm -> attention, post_attention_layernorm -> the MoE MLP (or a dense one). Returns
    (out, weights, routing or None)."""
    a = hf.llama_moe(t, cfg, x, n)
    h = x + site("attn_out", n, a["output"])
    y = hf.rms_norm(h, t["post_attention_layernorm.weight"], cfg["rms_norm_eps"])
    if not sparse_layer(cfg, n):
        return h + site("mlp_out", n, gated(t, cfg, y, "mlp.")), a["weights"], None
    m, chosen, weights = moe_mlp(t, cfg, y, n)
    return h + site("mlp_out", n, m), a["weights"], (chosen, weights)


BLOCKS = {"gpt2": gpt2_block, "bert": bert_block, "roberta": bert_block, "llama": llama_block,
          "mistral": llama_block, "qwen2": llama_block, "qwen3": llama_block,
          "gpt_neox": gpt_neox_block, "bloom": bloom_block, "gemma": gemma_block, "gemma2": gemma_block,
          "gemma3_text": gemma_block, "phi3": phi3_block, "olmo2": olmo2_block,
          **{kind: moe_block for kind in MOE}}


# ------------------------------------------------------------------------------ final norm, head
def final_norm(tensors, cfg, prefix, x):
    """The norm after the last block, or x (BERT/RoBERTa have none): GPT2Model.ln_f,
    LlamaModel.norm (RMSNorm; Mistral/Qwen2/Qwen3 the same), GPTNeoXModel.final_layer_norm,
    BloomModel.ln_f."""
    kind = cfg["model_type"]
    if kind in ("bert", "roberta"):
        return x
    if kind in ("gemma", "gemma2", "gemma3_text"):
        return hf.gemma_rms_norm(x, tensors[prefix + "norm.weight"], cfg["rms_norm_eps"])
    if kind in LLAMA_LIKE:
        return hf.rms_norm(x, tensors[prefix + "norm.weight"], cfg["rms_norm_eps"])
    name, eps = {"gpt2": ("ln_f", "layer_norm_epsilon"), "bloom": ("ln_f", "layer_norm_epsilon"),
                 "gpt_neox": ("final_layer_norm", "layer_norm_eps")}[kind]
    return hf.layer_norm(x, tensors[prefix + name + ".weight"], tensors[prefix + name + ".bias"], cfg[eps])


def output_embeddings(tensors, cfg, prefix, untied_name):
    """(V, E): the input embeddings when tie_word_embeddings (PreTrainedModel.tie_weights: the
    output weight IS the input one, a saved copy is ignored), else the checkpoint's own tensor."""
    if cfg["tie_word_embeddings"]:
        return tensors[prefix + ANCHORS[cfg["model_type"]][0]]
    if untied_name not in tensors:
        raise ValueError(f"tie_word_embeddings is false but the checkpoint has no {untied_name}")
    return tensors[untied_name]


def lm_head(tensors, cfg, prefix, x):
    """x (L, E) after the final norm -> logits (L, V), or None for BERT/RoBERTa without an MLM head.

    gpt2 GPT2LMHeadModel.lm_head / bloom BloomForCausalLM.lm_head / Llama-like *ForCausalLM.lm_head:
    Linear(E, V, bias=False), weight lm_head.weight or tied; gpt_neox GPTNeoXForCausalLM.embed_out
    (tie_word_embeddings defaults to false there).
    bert: modeling_bert.py BertLMPredictionHead: transform (BertPredictionHeadTransform: dense,
    ACT2FN[hidden_act], LayerNorm(layer_norm_eps)), then decoder (weight tied to word_embeddings)
    + cls.predictions.bias (saved as that, or as cls.predictions.decoder.bias).
    roberta: modeling_roberta.py RobertaLMHead.forward: dense, gelu (activations.gelu, the exact
    GELU whatever hidden_act says), layer_norm, decoder (tied) + lm_head.bias (or lm_head.decoder.bias)."""
    kind = cfg["model_type"]
    if kind in ("bert", "roberta"):
        head = "cls.predictions." if kind == "bert" else "lm_head."
        dense = head + ("transform.dense" if kind == "bert" else "dense")
        norm = head + ("transform.LayerNorm" if kind == "bert" else "layer_norm")
        if dense + ".weight" not in tensors:
            return None
        act = activation(cfg["hidden_act"]) if kind == "bert" else activation("gelu")
        h = act(hf.linear(x, tensors, dense))
        h = hf.layer_norm(h, tensors[norm + ".weight"], tensors[norm + ".bias"], cfg["layer_norm_eps"])
        bias = tensors.get(head + "bias", tensors.get(head + "decoder.bias"))
        return h @ output_embeddings(tensors, cfg, prefix, head + "decoder.weight").T + bias
    untied = "embed_out.weight" if kind == "gpt_neox" else "lm_head.weight"
    logits = x @ output_embeddings(tensors, cfg, prefix, untied).T
    cap = cfg.get("final_logit_softcapping") if kind in ("gemma2", "gemma3_text") else None
    if cap is not None:  # Gemma2ForCausalLM / Gemma3ForCausalLM.forward
        logits = torch.tanh(logits / cap) * cap
    return logits


# ------------------------------------------------------------------------------------- forward
def forward(tensors, cfg, ids, block_hook=None):
    """The whole model on one sequence; see the module docstring for what each output equals.

    ids: (L,) int64 tensor. BLOCK_HOOK(n, x, y, weights), when given, sees each block's input x and
    output y (1, L, E) and its attention weights (1, H, L, L) (for the cross-checks)."""
    cfg = with_defaults(cfg)
    kind = cfg["model_type"]
    layers, _, _ = sizes(cfg)
    if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= cfg["vocab_size"]:
        raise ValueError(f"{kind}: ids must be non-empty and in [0, {cfg['vocab_size']})")
    prefix = base_prefix(tensors, kind)
    x = embed(tensors, cfg, prefix, ids)[None]
    hidden, attentions, chosen, routed = [x[0]], [], [], []
    for n in range(layers):
        t = block_tensors(tensors, kind, prefix, n)
        x = site("resid_pre", n, x)
        y, weights, *routing = BLOCKS[kind](t, cfg, x, n)
        if routing and routing[0] is not None:  # a MoE layer
            chosen.append(routing[0][0])
            routed.append(routing[0][1])
        if block_hook is not None:
            block_hook(n, x, y, weights)
        hidden.append(y[0])
        attentions.append(weights[0])
        x = y
    hidden[-1] = final_norm(tensors, cfg, prefix, site("resid_final", layers, x)[0])
    out = {"hidden_states": torch.stack(hidden), "attentions": torch.stack(attentions),
           "logits": lm_head(tensors, cfg, prefix, hidden[-1])}
    if kind in MOE:  # (MoE layers, L, K): the experts each position chose, and their weights
        out["experts"], out["expert_weights"] = torch.stack(chosen), torch.stack(routed)
    return out
