"""llama2.c's .bin checkpoint (legacy format: 7 int32 of Config, then the float32 weights in run.c's
order) -> a Hugging Face Llama folder (config.json, model.safetensors), for the stories260K fixture of
tests/e2e/model_reference.sh.

  convert_llama2c.py stories260K.bin OUT_DIR

wq and wk go from Meta's interleaved rotary pairs to the rotate-half layout as transformers'
convert_llama_weights_to_hf.py permutes them; a positive vocab_size means a shared classifier
(tie_word_embeddings); rms_norm_eps 1e-5 and rope_theta 10000 are run.c's constants.
"""
import json, struct, sys, os
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st
src, dst = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
dim, hidden, layers, heads, kv, vocab, seq = struct.unpack("7i", data[:28])
shared = vocab > 0
vocab = abs(vocab)
a = np.frombuffer(data[28:], dtype="<f4")
at = 0
def take(*shape):
    global at
    n = int(np.prod(shape)); out = a[at:at + n].reshape(shape); at += n; return out
P = dim // heads
emb = take(vocab, dim); rms_att = take(layers, dim)
wq = take(layers, dim, dim); wk = take(layers, kv * P, dim); wv = take(layers, kv * P, dim); wo = take(layers, dim, dim)
rms_ffn = take(layers, dim); w1 = take(layers, hidden, dim); w2 = take(layers, dim, hidden); w3 = take(layers, hidden, dim)
rms_final = take(dim)
def permute(w, n):  # Meta's interleaved rotary pairs -> HF's rotate-half (convert_llama_weights_to_hf.py)
    d1, d2 = w.shape
    return w.reshape(n, d1 // n // 2, 2, d2).transpose(0, 2, 1, 3).reshape(d1, d2)
t = {"model.embed_tokens.weight": emb, "model.norm.weight": rms_final}
for i in range(layers):
    p = f"model.layers.{i}."
    t.update({p + "input_layernorm.weight": rms_att[i], p + "post_attention_layernorm.weight": rms_ffn[i],
              p + "self_attn.q_proj.weight": permute(wq[i], heads), p + "self_attn.k_proj.weight": permute(wk[i], kv),
              p + "self_attn.v_proj.weight": wv[i], p + "self_attn.o_proj.weight": wo[i],
              p + "mlp.gate_proj.weight": w1[i], p + "mlp.down_proj.weight": w2[i], p + "mlp.up_proj.weight": w3[i]})
os.makedirs(dst, exist_ok=True)
st.write(os.path.join(dst, "model.safetensors"), {k: np.ascontiguousarray(v) for k, v in t.items()})
json.dump({"model_type": "llama", "hidden_size": dim, "intermediate_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab, "max_position_embeddings": seq,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": shared, "hidden_act": "silu",
           "bos_token_id": 1, "eos_token_id": 2}, open(os.path.join(dst, "config.json"), "w"), indent=1)
print(dim, hidden, layers, heads, kv, vocab, seq, shared)
