#!/usr/bin/python3
"""Goldens of the real stories260K model (data/stories260K.gguf: llama2.c's 5-layer, 260K-parameter
TinyStories Llama with its 512-token SentencePiece vocabulary tok512, as ggml-org publishes it
converted to GGUF; data/README.md says where the file comes from), for
tests/e2e/stories260k.sh. Run by hand, with /usr/bin/python3 (about 10 s):

  make_stories260k_goldens.py

Three references, none of them attntrace:
- llama2.c's published output. karpathy/llama2.c test_all.py pins what run.c writes greedily from
  BOS (`./run stories260K.bin -z tok512.bin -t 0.0 -n 200`), `expected_stdout` there, transcribed
  as PUBLISHED below. Teacher-forced on that text, the most likely next token at every position is
  the text's own next token (checked here on the float64 reference and on llama.cpp).
- llama.cpp (libllama of @node-llama-cpp/linux-x64 3.21.1, tests/goldens/llama_cpp_model.py): its
  tokenization of every text below and its (L, 512) logits of the published text.
- float64: hf_model.py (the transcription of transformers' LlamaForCausalLM, cross-checked by
  check_hf_model.py) on the GGUF's tensors read by llama.cpp's own gguf-py, the query and key rows
  taken back from llama.cpp's adjacent-pair rotary layout to transformers' rotate-half one (the
  inverse of convert_hf_to_gguf.py's LlamaModel.permute); the patching values of the demonstration
  in docs/interventions.md (two stories that differ in one name) computed by
  make_intervention_goldens.patch, the same definitions as every other family's goldens.

Writes tests/fixtures/stories260k/: stories260k.json, published_logits_llama_cpp.npy
and published_logits_f64.npy ((L, 512) float32 saves of the two references' logits).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gguf_writer  # noqa: E402
import hf_model  # noqa: E402
import llama_cpp_model  # noqa: E402
import make_intervention_goldens as mig  # noqa: E402

MODEL = HERE.parent.parent / "data" / "stories260K.gguf"
GOLDEN = HERE.parent / "fixtures" / "stories260k"

# karpathy/llama2.c, test_all.py, expected_stdout (run.c, greedy, 200 steps from BOS)
PUBLISHED = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
             "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
             "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
             "She said, \"I want to play with your ball, but I can't find it.\"\n"
             "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what to do.\"\n"
             "Lily didn't want to help her mom, so she")

# docs/interventions.md: two stories that differ in one name; which pronoun comes next?
CLEAN = "Once upon a time, Lily went to the park to play. One day,"
CORRUPT = "Once upon a time, Tim went to the park to play. One day,"
TARGET, VERSUS = "she", "he"  # SentencePiece adds the leading space: "▁she", "▁he"

CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5,
          "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "max_position_embeddings": 2048, "hidden_act": "silu",
          "tie_word_embeddings": False}

NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
         "ffn_gate": "mlp.gate_proj", "ffn_down": "mlp.down_proj", "ffn_up": "mlp.up_proj"}


def unpermute(w, n_head):
    """llama.cpp's adjacent rotary pairs -> transformers' rotate-half: each head's rows (P/2, 2) ->
    (2, P/2), the inverse of gguf_writer.permute (conversion/llama.py LlamaModel.permute)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensors():
    """The GGUF's tensors under transformers' names, float64."""
    gguf = gguf_writer.gguf_py()
    if gguf is None:
        sys.exit("llama.cpp's gguf-py is not in the cache: run tests/goldens/llama_cpp.py's install first")
    out = {}
    for t in gguf.GGUFReader(str(MODEL)).tensors:
        w = np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
        parts = t.name.split(".")
        if parts[0] == "blk":
            kind = parts[2]
            if kind == "attn_q":
                w = unpermute(w, CONFIG["num_attention_heads"])
            elif kind == "attn_k":
                w = unpermute(w, CONFIG["num_key_value_heads"])
            name = f"model.layers.{parts[1]}.{NAMES[kind]}.weight"
        else:
            name = {"token_embd": "model.embed_tokens.weight", "output_norm": "model.norm.weight",
                    "output": "lm_head.weight"}[parts[0]]
        out[name] = torch.from_numpy(w)
    return out


def follows_text(logits, ids):
    """How many positions' most likely next token is the text's own next token."""
    return int((np.argmax(logits[:-1], axis=1) == np.asarray(ids[1:])).sum())


def main():
    texts = {"published": [PUBLISHED], "clean": [CLEAN], "corrupt": [CORRUPT], "target": [TARGET], "versus": [VERSUS]}
    tok = llama_cpp_model.tokenize_groups(str(MODEL), texts)
    ids = {k: v[0]["ids"] for k, v in tok.items()}
    target, versus = tok["target"][0]["plain"], tok["versus"][0]["plain"]
    assert len(target) == 1 and len(versus) == 1, (target, versus)
    assert len(ids["clean"]) == len(ids["corrupt"])

    cpp, _ = llama_cpp_model.logits(str(MODEL), ids["published"], exact=True)
    tensors = hf_tensors()
    case = {"cfg": CONFIG, "full": hf_model.with_defaults(CONFIG), "tensors": tensors,
            "prefix": hf_model.base_prefix(tensors, "llama"), "layers": 5, "heads": 8}
    f64 = mig.run(case, torch.tensor(ids["published"])).numpy()
    n = len(ids["published"]) - 1
    print(f"published text: {n + 1} tokens; greedy follows it at {follows_text(f64, ids['published'])} of {n} "
          f"positions (float64), {follows_text(cpp, ids['published'])} (llama.cpp); "
          f"max |f64 - llama.cpp| {np.abs(f64 - cpp).max():.2e}")

    pos = len(ids["clean"]) - 1
    patch = mig.patch(case, torch.tensor(ids["clean"]), torch.tensor(ids["corrupt"]), pos, target[0], versus[0])
    print(f"patch: m_clean {patch['clean']:.4f}, m_corrupt {patch['corrupt']:.4f}")

    golden = GOLDEN
    golden.mkdir(exist_ok=True)
    np.save(golden / "published_logits_llama_cpp.npy", cpp.astype(np.float32))
    np.save(golden / "published_logits_f64.npy", f64.astype(np.float32))
    doc = {"comment": "written by tests/goldens/make_stories260k_goldens.py (see there); checked by tests/e2e/stories260k.sh",
           "texts": {k: v[0] for k, v in texts.items()}, "llama_cpp_ids": ids,
           "target_id": target[0], "versus_id": versus[0], "position": pos, "patch": patch}
    (golden / "stories260k.json").write_text(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
