"""The `tokenizer.ggml.*` metadata llama.cpp's convert_hf_to_gguf.py writes for a tokenizer.json
fixture, made with the standard library alone (no transformers, no gguf-py; the file written by
gguf_writer.py, numpy), so that the tests can
make it at test time from the committed tokenizer.json files instead of committing a second copy of
each vocabulary (tests/fixtures/tokenizers/gguf/README.md).

  gguf_vocab.py FIXTURES CASE OUT.gguf

writes the metadata of CASE (tests/fixtures/tokenizers/gguf/cases.json) as a vocabulary-only GGUF
file (no tensors; gguf_writer.py's layout, each key of the type convert_hf_to_gguf.py gives it:
ids uint32, flags bool, names string, tokens and merges arrays of string, scores of float32, token
types of int32). Its digest is taken over the metadata as one JSON object keyed by the GGUF key
names ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": [...], ...}). The
scalars (special token ids, add_bos_token ...) come from expected.json, where
make_gguf_tokenizer_goldens.py put what llama.cpp's own gguf-py (SpecialVocab) made of the files; the arrays
are made here; the digest of the whole must equal the one expected.json recorded for the file
llama.cpp tokenized, else this exits 1.

Transcribed from llama.cpp (commit 80fb11ac, the source of the libllama the goldens come from):
- conversion/base.py, TextModel.get_vocab_base (`_set_vocab_gpt2`): tokens by id from the
  vocabulary and the added tokens, "[PAD{i}]" (UNUSED) for an id without one; an added token is
  CONTROL when it is special or does_token_look_special, else USER_DEFINED with "▁" written as " ";
  every other token NORMAL. (get_vocab_base round-trips a non-normalized added token through
  AutoTokenizer's encode and decode; for every added token of these files that gives it back.)
- gguf-py/gguf/vocab.py, SpecialVocab._try_load_from_tokenizer_json: the merges, "a b" strings, a
  pair's spaces written as U+0120.
- gguf-py/gguf/vocab.py, LlamaHfVocab (convert_hf_to_gguf's `_set_vocab_llama_hf`, what a Llama or
  Mistral folder without tokenizer.model gets): model "llama", every score -1000.0, "<0xNN>" BYTE,
  the special tokens CONTROL, the rest NORMAL.
"""
import hashlib
import json
import lzma
import os
import re
import sys

# gguf-py/gguf/constants.py TokenType
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

HERE = os.path.dirname(os.path.abspath(__file__))


def read_source(fixtures, name):
    """tokenizer.json and tokenizer_config.json (or None) of the fixture folder NAME."""
    folder = os.path.join(fixtures, "tokenizers", name)
    with lzma.open(os.path.join(folder, "tokenizer.json.xz")) as f:
        tokenizer = json.load(f)
    config = None
    if os.path.exists(os.path.join(folder, "tokenizer_config.json")):
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
    return tokenizer, config


def does_token_look_special(text):
    """conversion/base.py, TextModel.does_token_look_special."""
    special = text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
    special = special or (text.startswith("<|") and text.endswith("|>"))
    special = special or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
    return special or (text.startswith("<unused") and text.endswith(">"))


def gpt2_tokens(tokenizer):
    """TextModel.get_vocab_base: (tokens, token types), the vocabulary size being the ids' count."""
    by_id = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    added = {a["id"]: a for a in tokenizer.get("added_tokens", [])}
    added_content = {a["content"] for a in added.values()}
    for i, a in added.items():
        by_id[i] = a["content"]
    size = max(by_id) + 1
    tokens, types = [], []
    for i in range(size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        token = by_id[i]
        if token in added_content:
            if added[i]["special"] or does_token_look_special(token):
                types.append(CONTROL)
            else:
                token = token.replace("\u2581", " ")
                types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(token)
    return tokens, types


def merges(tokenizer):
    """SpecialVocab's merges: "a b", a pair's spaces as U+0120."""
    ms = tokenizer["model"].get("merges") or []
    if ms and isinstance(ms[0], list):
        return [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in part) for part in pair) for pair in ms]
    return list(ms)


def llama_hf_tokens(tokenizer, config):
    """LlamaHfVocab: (tokens, scores, token types) of a SentencePiece-style tokenizer.json."""
    by_id = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    base = len(by_id)
    specials = set()
    for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
        entry = (config or {}).get(key)
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str) and content in tokenizer["model"]["vocab"]:
            specials.add(tokenizer["model"]["vocab"][content])
    tokens, scores, types = [], [], []
    for i in range(base):
        text = by_id[i]
        tokens.append(text)
        scores.append(-1000.0)
        types.append(BYTE if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", text) else CONTROL if i in specials else NORMAL)
    extra = sorted((a for a in tokenizer.get("added_tokens", []) if a["id"] >= base), key=lambda a: a["id"])
    for a in extra:
        tokens.append(a["content"])
        scores.append(-1000.0)
        types.append(CONTROL if a["id"] in specials else USER_DEFINED)
    return tokens, scores, types


def spm_tokens(tokenizer):
    """A SentencePiece model's own view of a SentencePiece-style tokenizer.json, as
    convert_hf_to_gguf's _create_vocab_sentencepiece reads a tokenizer.model: <unk> UNKNOWN, the
    other special added tokens CONTROL, "<0xNN>" BYTE (score 0), and every other piece NORMAL with
    score -id (SentencePiece's BPE trainer numbers pieces by the order of their merges and scores
    each -(its rank), which -id preserves)."""
    by_id = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    unk = tokenizer["model"].get("unk_token")
    special = {a["id"] for a in tokenizer.get("added_tokens", []) if a["special"]}
    tokens, scores, types = [], [], []
    for i in range(len(by_id)):
        text = by_id[i]
        kind = UNKNOWN if text == unk else CONTROL if i in special else BYTE if re.fullmatch(r"<0x[0-9A-F]{2}>", text) else NORMAL
        tokens.append(text)
        scores.append(-float(i) if kind == NORMAL else 0.0)
        types.append(kind)
    return tokens, scores, types


_sources = {}


def arrays(case, fixtures):
    """The array keys of CASE's metadata (the fixtures read once per process)."""
    out = {}
    if "tokens" in case:  # a small vocabulary written out in cases.json
        out["tokenizer.ggml.tokens"] = case["tokens"]
        out["tokenizer.ggml.token_type"] = case.get("token_type", [NORMAL] * len(case["tokens"]))
        if "scores" in case:
            out["tokenizer.ggml.scores"] = case["scores"]
        if "merges" in case:
            out["tokenizer.ggml.merges"] = case["merges"]
        return out
    if case["source"] not in _sources:
        _sources[case["source"]] = read_source(fixtures, case["source"])
    tokenizer, config = _sources[case["source"]]
    if case["vocab"] == "gpt2":
        tokens, types = gpt2_tokens(tokenizer)
        out["tokenizer.ggml.tokens"], out["tokenizer.ggml.token_type"] = tokens, types
        out["tokenizer.ggml.merges"] = merges(tokenizer)
    elif case["vocab"] in ("llama-hf", "spm"):
        tokens, scores, types = llama_hf_tokens(tokenizer, config) if case["vocab"] == "llama-hf" else spm_tokens(tokenizer)
        out["tokenizer.ggml.tokens"], out["tokenizer.ggml.scores"], out["tokenizer.ggml.token_type"] = tokens, scores, types
    else:
        raise ValueError(f"case {case['name']}: unknown vocab kind {case['vocab']}")
    return out


def digest(metadata):
    """sha256 of the metadata in a canonical JSON form: what both sides of a comparison hash."""
    text = json.dumps(metadata, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def texts(fixtures):
    """The texts every case runs, by group: llama.cpp's vector texts (every .inp holds the same),
    the hostile texts and the GGUF-specific ones of cases.json."""
    base = os.path.join(fixtures, "tokenizers")
    with open(os.path.join(base, "vectors", "ggml-vocab-gpt-2.gguf.inp"), encoding="utf-8") as f:
        vectors = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(os.path.join(base, "hostile", "texts.json"), encoding="utf-8") as f:
        hostile = json.load(f)
    with open(os.path.join(base, "gguf", "cases.json"), encoding="utf-8") as f:
        own = json.load(f)["texts"]
    return {"vectors": vectors, "hostile": hostile, "gguf": own}


def load_cases(fixtures):
    with open(os.path.join(fixtures, "tokenizers", "gguf", "cases.json"), encoding="utf-8") as f:
        return {c["name"]: c for c in json.load(f)["cases"]}


def write_gguf(metadata, out):
    """METADATA (a dict keyed by GGUF key names) as the vocabulary-only GGUF file OUT."""
    import gguf_writer as g
    w = g.Writer(metadata.get("general.architecture", "llama"))
    arrays = {"tokenizer.ggml.scores": g.FLOAT32, "tokenizer.ggml.token_type": g.INT32}
    for key, value in metadata.items():
        if key == "general.architecture":
            continue
        if isinstance(value, bool):
            w.add(key, value, g.BOOL)
        elif isinstance(value, int):
            w.add(key, value, g.UINT32)
        elif isinstance(value, str):
            w.add(key, value, g.STRING)
        else:
            w.add(key, value, g.ARRAY, arrays.get(key, g.STRING))
    w.write(out)


def write_metadata(fixtures, case, expected, out):
    """Writes CASE's metadata to OUT (a GGUF file): EXPECTED's scalars (expected.json's entry), the
    arrays made here; exits when its digest is not the one llama.cpp's file had."""
    metadata = dict(expected["scalars"])
    metadata.update(arrays(case, fixtures))
    if digest(metadata) != expected["digest"]:
        sys.exit(f"gguf_vocab.py: {case['name']}: the metadata made here differs from the file llama.cpp tokenized "
                 f"(digest {digest(metadata)}, expected {expected['digest']})")
    write_gguf(metadata, out)


def main():
    fixtures, name, out = sys.argv[1:4]
    with open(os.path.join(fixtures, "tokenizers", "gguf", "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)[name]
    write_metadata(fixtures, load_cases(fixtures)[name], expected, out)


if __name__ == "__main__":
    main()
