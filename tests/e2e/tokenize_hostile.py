"""attntrace tokenize on the hostile texts (tests/fixtures/tokenizers/hostile) against the ids Hugging
Face's implementations gave (make_expected.mjs): ids compared exactly, with special tokens added,
all of a tokenizer's texts in one `--jsonl` process (tokenize_cli.sh runs --text-file and stdin).
Usage: tokenize_hostile.py ATTNTRACE FIXTURES UNPACKED_DIR [FRESH_EXPECTED_DIR]. With a fresh
expected.json (the node reference re-run here), it must equal the committed one."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from tokenize_vectors import tokenize_all, unpack  # noqa: E402


def main():
    attntrace, fixtures, work = sys.argv[1:4]
    hostile = os.path.join(fixtures, "tokenizers", "hostile")
    texts = json.load(open(os.path.join(hostile, "texts.json"), encoding="utf-8"))
    expected = json.load(open(os.path.join(hostile, "expected.json"), encoding="utf-8"))
    if len(sys.argv) > 4:
        fresh = json.load(open(os.path.join(sys.argv[4], "expected.json"), encoding="utf-8"))
        if fresh != expected:
            print("FAIL the node reference re-run here differs from the committed expected.json")
            sys.exit(1)
        print("ok the node reference re-run here gives the committed expected ids")
    failed = 0
    for name, rows in sorted(expected.items()):
        folder = unpack(fixtures, name, work)
        same_rust = same_js = 0
        for text, row, got in zip(texts, rows, tokenize_all(attntrace, folder, texts, work)):
            want = row.get("rust", row["ids"])
            same_rust += got == want
            same_js += got == row["ids"]
            if got != want:
                print(f"FAIL {name} {text!r}: expected {want}, got {got}")
                failed += 1
        print(f"{name}: {same_rust}/{len(texts)} equal to the Rust library, {same_js}/{len(texts)} to @huggingface/tokenizers")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
