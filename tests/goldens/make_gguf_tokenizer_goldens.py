"""llama.cpp's own tokenization of vocabulary-only GGUF files, the goldens of attntrace's tokenizer
from GGUF metadata (tests/fixtures/tokenizers/gguf/README.md). Run by hand, with /usr/bin/python3:

  make_gguf_tokenizer_goldens.py [CASE ...]        (all of tests/fixtures/tokenizers/gguf/cases.json by default)

For each case: the metadata as convert_hf_to_gguf.py writes it (the arrays from gguf_vocab.py; the
special token ids and add_*_token flags from llama.cpp's own gguf-py SpecialVocab, which also checks
gguf_vocab.py's merges), written by gguf-py's GGUFWriter to a vocabulary-only GGUF file (general
architecture "llama" with placeholder sizes: llama.cpp reads them even with vocab_only), loaded by
libllama (tests/goldens/llama_cpp.py: @node-llama-cpp/linux-x64 3.21.1, llama.cpp 80fb11ac) with
vocab_only; every text of cases.json's lists through llama_tokenize(add_special = true and false,
parse_special = false) and the ids back through llama_detokenize(remove_special = false,
unparse_special = true). Writes tests/fixtures/tokenizers/gguf/expected.json: per case the scalar
metadata, the digest of the whole metadata (gguf_vocab.digest) and the ids and texts.
"""
import json
import lzma
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_vocab  # noqa: E402
import llama_cpp  # noqa: E402
import llama_cpp_model  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
OUT = os.path.join(FIXTURES, "tokenizers", "gguf")

sys.path.insert(0, llama_cpp.gguf_py())
import gguf  # noqa: E402

K = gguf.Keys.Tokenizer
ID_KEYS = {"bos": K.BOS_ID, "eos": K.EOS_ID, "unk": K.UNK_ID, "sep": K.SEP_ID, "pad": K.PAD_ID, "cls": "tokenizer.ggml.cls_token_id",
           "mask": K.MASK_ID, "eot": K.EOT_ID, "eom": K.EOM_ID}
ADD_KEYS = {"bos": K.ADD_BOS, "eos": K.ADD_EOS, "sep": K.ADD_SEP}


def special_scalars(case):
    """SpecialVocab's ids and flags for a fixture CASE (as _set_vocab_gpt2 or _set_vocab_llama_hf
    call it), and its merges, in a folder holding the fixture's tokenizer files."""
    with tempfile.TemporaryDirectory() as folder:
        src = os.path.join(FIXTURES, "tokenizers", case["source"])
        with lzma.open(os.path.join(src, "tokenizer.json.xz")) as f, open(os.path.join(folder, "tokenizer.json"), "wb") as g:
            g.write(f.read())
        if os.path.exists(os.path.join(src, "tokenizer_config.json")):
            shutil.copy(os.path.join(src, "tokenizer_config.json"), folder)
        bpe = case["vocab"] == "gpt2"
        n_vocab = None if bpe else len(gguf_vocab.arrays(case, FIXTURES)["tokenizer.ggml.tokens"])
        special = gguf.SpecialVocab(folder, load_merges=bpe, n_vocab=n_vocab)
    scalars = {ID_KEYS[t]: i for t, i in special.special_token_ids.items()}
    scalars.update({ADD_KEYS[t]: v for t, v in special.add_special_token.items()})
    return scalars, special.merges


def scalars_of(case, arrays):
    out = {"general.architecture": "llama", "general.name": case.get("general.name", case["name"])}
    if "tokens" in case:
        out["tokenizer.ggml.model"] = case["model"]
    else:
        out["tokenizer.ggml.model"] = "gpt2" if case["vocab"] == "gpt2" else "llama"
        special, merges = special_scalars(case)
        if case["vocab"] == "gpt2" and merges != arrays["tokenizer.ggml.merges"]:
            sys.exit(f"{case['name']}: gguf_vocab.merges differs from SpecialVocab's")
        out.update(special)
    if "pre" in case:
        out["tokenizer.ggml.pre"] = case["pre"]
    elif "tokens" not in case and case["vocab"] != "gpt2":
        out["tokenizer.ggml.pre"] = "default"  # _set_vocab_llama_hf / _set_vocab_sentencepiece
    out.update(case.get("scalars", {}))
    return out


def write_gguf(path, metadata):
    w = gguf.GGUFWriter(path, "llama")
    # the hyperparameters llama.cpp's load_hparams asks for even with vocab_only (placeholders)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(8)
    for key, value in metadata.items():
        if key == "general.architecture":
            continue  # GGUFWriter writes it
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        elif key == K.SCORES:
            w.add_array(key, [float(s) for s in value])
        else:
            w.add_array(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def run_case(case, texts, folder):
    arrays = gguf_vocab.arrays(case, FIXTURES)
    scalars = scalars_of(case, arrays)
    metadata = dict(scalars)
    metadata.update(arrays)
    path = os.path.join(folder, case["name"] + ".gguf")
    write_gguf(path, metadata)
    result = {"scalars": scalars, "digest": gguf_vocab.digest(metadata), "tokens": len(arrays["tokenizer.ggml.tokens"])}
    result.update(llama_cpp_model.tokenize_groups(path, texts))
    return result


def main():
    with open(os.path.join(OUT, "cases.json"), encoding="utf-8") as f:
        cases_json = json.load(f)
    wanted = set(sys.argv[1:])
    out_file = os.path.join(OUT, "expected.json")
    expected = {}
    if wanted and os.path.exists(out_file):
        with open(out_file, encoding="utf-8") as f:
            expected = json.load(f)
    texts = gguf_vocab.texts(FIXTURES)
    with tempfile.TemporaryDirectory() as folder:
        for case in cases_json["cases"]:
            if wanted and case["name"] not in wanted:
                continue
            expected[case["name"]] = run_case(case, texts, folder)
            print(case["name"], expected[case["name"]]["tokens"], "tokens", expected[case["name"]]["digest"][:12])
    expected = {c["name"]: expected[c["name"]] for c in cases_json["cases"] if c["name"] in expected}
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
