"""The tokenizer of GGUF metadata against llama.cpp's own on 1 MB texts: MB/s of `attntrace tokenize
FILE.gguf --text-file T --format json` as a whole process (reading the file's tokenizer, writing the
JSON to a pipe) beside llama.cpp's llama_tokenize alone (add_special true, parse_special false) on
the same vocabulary-only GGUF file, warm, in this process through ctypes (libllama of
tests/goldens/llama_cpp.py), one thread each; and whether the ids are equal (the whole text's).

Texts: tests/bench/tokenizer_texts.py's 1 MB of English and 1 MB of mixed scripts. Vocabularies:
tests/goldens/gguf_vocab.py's GGUF files of the tokenizer fixtures (tests/fixtures/tokenizers/gguf).

  /usr/bin/python3 tests/bench/gguf_tokenizer_bench.py BUILD_DIR [--reps N] [--vocab NAME ...]

Prints a Markdown table: tokenizer, text, tokens, attntrace MB/s (wall), its load alone, llama.cpp
MB/s, ratio (llama.cpp's time / attntrace's), ids equal."""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "goldens"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_vocab  # noqa: E402
import llama_cpp_model  # noqa: E402
import tokenizer_texts  # noqa: E402


def median_wall(cmd, reps):
    """Median wall seconds of REPS runs of CMD, and its last stdout."""
    walls, out = [], b""
    for _ in range(reps):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, check=True).stdout
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), out


def llama_cpp_seconds(path, text, reps):
    """Median seconds of llama_tokenize on TEXT (warm: the vocabulary loaded once), and the ids."""
    model, vocab = llama_cpp_model.load_vocab(path)
    ids, times = llama_cpp_model.tokenize(vocab, text, True), []
    for _ in range(reps):
        t0 = time.perf_counter()
        llama_cpp_model.tokenize(vocab, text, True)
        times.append(time.perf_counter() - t0)
    llama_cpp_model.free_model(model)
    return statistics.median(times), ids


def write_vocab(name, work):
    expected = json.load(open(os.path.join(ROOT, "tests/fixtures/tokenizers/gguf/expected.json"), encoding="utf-8"))[name]
    path = os.path.join(work, name + ".gguf")
    gguf_vocab.write_metadata(os.path.join(ROOT, "tests/fixtures"), gguf_vocab.load_cases(os.path.join(ROOT, "tests/fixtures"))[name],
                              expected, path)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--vocab", nargs="*", default=["gpt2", "llama3", "qwen3", "mistral-spm"])
    a = p.parse_args()
    attntrace = os.path.join(a.build, "attntrace")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        texts = {}
        for label, make in [("English", tokenizer_texts.english), ("mixed scripts", tokenizer_texts.mixed)]:
            texts[label] = os.path.join(work, label.split()[0] + ".txt")
            with open(texts[label], "w", encoding="utf-8", newline="") as f:
                f.write(make(1_000_000))
            print(f"  {label}: sha256 {hashlib.sha256(open(texts[label], 'rb').read()).hexdigest()[:16]}")
        for name in a.vocab:
            path = write_vocab(name, work)
            load, _ = median_wall([attntrace, "tokenize", path, "--text", ""], a.reps)
            for label, text_path in texts.items():
                size = os.path.getsize(text_path)
                wall, out = median_wall([attntrace, "tokenize", path, "--text-file", text_path, "--format", "json"], a.reps)
                ours = json.loads(out)["ids"]
                with open(text_path, encoding="utf-8", newline="") as f:  # the bytes as they are: no \r\n -> \n
                    theirs_s, theirs = llama_cpp_seconds(path, f.read(), a.reps)
                rows.append((name, label, len(ours), size / 1e6 / wall, load, size / 1e6 / theirs_s, theirs_s / wall, ours == theirs))
    print("GGUF tokenizers (1 MB, one thread; attntrace: whole process; llama.cpp: llama_tokenize alone, warm, through ctypes;"
          " ratio = llama.cpp's time / attntrace's):")
    print("| tokenizer | text | tokens | attntrace MB/s | its load | llama.cpp MB/s | ratio | ids = llama.cpp's |")
    print("|---|---|---|---|---|---|---|---|")
    for name, label, tokens, mbs, load, theirs, ratio, same in rows:
        print(f"| {name} | {label} | {tokens} | {mbs:.2f} | {load * 1e3:.0f} ms | {theirs:.2f} | {ratio:.2f}x | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
