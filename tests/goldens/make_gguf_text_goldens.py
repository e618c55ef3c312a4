"""llama.cpp's own tokenization of the GGUF model fixtures (tests/fixtures/gguf/<case>/model*.gguf,
each carrying the tokenizer gguf_writer.py writes as convert_hf_to_gguf.py's _set_vocab_gpt2 does),
and its logits on one tokenized text: the goldens of `attntrace tokenize FILE.gguf` and `attntrace
model FILE.gguf --text` (tests/e2e/gguf_text.sh). Run by hand, with /usr/bin/python3:

  make_gguf_text_goldens.py

For each case of CASES, libllama (tests/goldens/llama_cpp.py: @node-llama-cpp/linux-x64 3.21.1)
loads the file as a model; every text of gguf_vocab.texts() (llama.cpp's vector texts, the hostile
texts, the GGUF tokenizer texts) goes through llama_tokenize(add_special = true and false,
parse_special = false) and the ids back through llama_detokenize(remove_special = false,
unparse_special = true). Then LOGITS_TEXT's ids go through one llama_decode with every position an
output (llama_cpp_model.Model: no flash attention, an F32 KV cache), saved as
<case>/golden/text_logits.npy (L, V) float32. Writes tests/fixtures/gguf/text_goldens.json: the
texts once, per case the ids, plain ids and decoded texts (or `same_as`: the case whose rows
llama.cpp gave identically, the same vocabulary in another file), and the logits text's ids.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_vocab  # noqa: E402
import llama_cpp_model  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
CASES_DIR = os.path.join(FIXTURES, "gguf")
# one file per architecture and tokenizer (the llama256_* files share llama_*'s vocabulary)
CASES = ["llama_f32", "llama_q8_0", "mistral_q5_1", "gpt2_q8_0", "qwen2_f16", "qwen3_q5_0", "qwen3_bf16_split", "gemma_f16",
         "gemma2_q8_0", "gemma3_q5_1", "phi3_q4_0", "llama256_q4_k"]
LOGITS_TEXT = "Hello world, the cat sat."


def first_file(case):
    folder = os.path.join(CASES_DIR, case)
    return os.path.join(folder, sorted(f for f in os.listdir(folder) if f.startswith("model") and f.endswith(".gguf"))[0])


def run_case(case, texts):
    path = first_file(case)
    ids = llama_cpp_model.tokenize_groups(path, texts)
    logit_ids = llama_cpp_model.tokenize_groups(path, {"logits": [LOGITS_TEXT]})["logits"][0]["ids"]
    logits, _ = llama_cpp_model.logits(path, logit_ids, exact=True)
    np.save(os.path.join(CASES_DIR, case, "golden", "text_logits.npy"), logits.astype(np.float32))
    ids["logits_ids"] = logit_ids
    return ids


def main():
    texts = gguf_vocab.texts(FIXTURES)
    out = {"comment": "written by tests/goldens/make_gguf_text_goldens.py (see there); checked by tests/e2e/gguf_text.sh",
           "logits_text": LOGITS_TEXT, "texts": texts, "cases": {}}
    for case in CASES:
        got = run_case(case, texts)
        for other, rows in out["cases"].items():  # a file whose vocabulary another's is: its name, checked
            if "same_as" not in rows and all(rows[g] == got[g] for g in texts):
                got = {"same_as": other, "logits_ids": got["logits_ids"]}
                break
        out["cases"][case] = got
        print(case, got.get("same_as", ""), got["logits_ids"])
    with open(os.path.join(CASES_DIR, "text_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
