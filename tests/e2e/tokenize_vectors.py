"""llama.cpp's published tokenizer vectors (tests/fixtures/tokenizers/vectors) through
`attntrace tokenize --no-special-tokens --format json`, ids compared exactly. Usage:
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


def main():
    attntrace, fixtures, work = sys.argv[1:4]
    failed = 0
    for vocab, name in PAIRS.items():
        folder = unpack(fixtures, name, work)
        texts, expected = vectors(fixtures, vocab)
        passed = 0
        for i, (text, want) in enumerate(zip(texts, expected)):
            run = subprocess.run([attntrace, "tokenize", folder, "--text", text, "--no-special-tokens", "--format", "json"],
                                 capture_output=True)
            got = json.loads(run.stdout)["ids"] if run.returncode == 0 else run.stderr.decode(errors="replace")
            if got == want:
                passed += 1
            else:
                print(f"FAIL {vocab} #{i} {text!r}: expected {want}, got {got}")
        print(f"{vocab} ({name}): {passed}/{len(texts)} vectors")
        failed += len(texts) - passed
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
