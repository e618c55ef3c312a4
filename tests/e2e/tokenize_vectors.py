"""llama.cpp's published tokenizer vectors (tests/fixtures/tokenizers/vectors) through
`attntrace tokenize --jsonl --no-special-tokens` (all of a vocabulary's texts in one process), ids
compared exactly. Usage:
tokenize_vectors.py ATTNTRACE FIXTURES WORKDIR. Prints one line per vocabulary, fails on any miss."""
import json
import lzma
import os
import subprocess
import sys

PAIRS = {"gpt-2": "gpt2", "llama-bpe": "llama3", "qwen2": "qwen3", "deepseek-r1-qwen": "qwen3",
         "bert-bge": "bert-base-uncased", "mpt": "gpt-neox-20b"}


def unpack(fixtures, name, work):
    """The folder of tokenizer NAME with its tokenizer.json decompressed into WORK."""
    folder = os.path.join(work, name)
    if not os.path.isdir(folder):
        os.makedirs(folder)
        src = os.path.join(fixtures, "tokenizers", name)
        with lzma.open(os.path.join(src, "tokenizer.json.xz")) as f, open(os.path.join(folder, "tokenizer.json"), "wb") as g:
            g.write(f.read())
        config = os.path.join(src, "tokenizer_config.json")
        if os.path.exists(config):
            with open(config, "rb") as f, open(os.path.join(folder, "tokenizer_config.json"), "wb") as g:
                g.write(f.read())
    return folder


def vectors(fixtures, vocab):
    base = os.path.join(fixtures, "tokenizers", "vectors", f"ggml-vocab-{vocab}.gguf")
    with open(base + ".inp", encoding="utf-8") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(base + ".out", encoding="utf-8") as f:
        ids = [[int(x) for x in line.split()] for line in f.read().split("\n")[: len(texts)]]
    return texts, ids


def tokenize_all(attntrace, folder, texts, work, flags=()):
    """The ids of every text, from one `attntrace tokenize FOLDER --jsonl` process (a list of
    lists), or the process's error message for each when it fails."""
    lines = os.path.join(work, "texts.jsonl")
    with open(lines, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps(text) + "\n")  # ASCII with \u escapes: NUL and lone surrogates survive
    run = subprocess.run([attntrace, "tokenize", folder, "--jsonl", lines, *flags], capture_output=True)
    if run.returncode != 0:
        return [run.stderr.decode(errors="replace")] * len(texts)
    lines = run.stdout.decode().split("\n")[:-1]  # not splitlines(): a token may hold U+2028 or U+0085
    return [json.loads(line)["ids"] for line in lines]


def main():
    attntrace, fixtures, work = sys.argv[1:4]
    failed = 0
    for vocab, name in PAIRS.items():
        folder = unpack(fixtures, name, work)
        texts, expected = vectors(fixtures, vocab)
        passed = 0
        for i, (text, want, got) in enumerate(zip(texts, expected, tokenize_all(attntrace, folder, texts, work, ["--no-special-tokens"]))):
            if got == want:
                passed += 1
            else:
                print(f"FAIL {vocab} #{i} {text!r}: expected {want}, got {got}")
        print(f"{vocab} ({name}): {passed}/{len(texts)} vectors")
        failed += len(texts) - passed
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
