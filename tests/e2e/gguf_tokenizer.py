"""The tokenizer of GGUF metadata against llama.cpp's goldens (tests/fixtures/tokenizers/gguf):
for every case of expected.json, the metadata made by tests/goldens/gguf_vocab.py from the fixtures
(its digest checked) and written as a vocabulary-only GGUF file, all the texts through the
gguf_tokenize driver (Tokenizer::load of the file, as attntrace reads any GGUF file's tokenizer), and per text the ids with
special tokens (llama_tokenize add_special true, parse_special false), without them, and the ids
decoded (llama_detokenize), compared exactly; each token's offsets must be bytes of the text, in
order. Usage: gguf_tokenizer.py GGUF_TOKENIZE FIXTURES WORKDIR. Prints one line a case with the pass
counts per group of texts, fails on any miss."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "goldens"))
import gguf_vocab  # noqa: E402


def offsets_ok(text, row):
    n = len(text.encode("utf-8"))
    begins = [b for b, _ in row["offsets"]]
    return all(0 <= b <= e <= n for b, e in row["offsets"]) and begins == sorted(begins)


def run_case(driver, fixtures, work, case, want, groups):
    name = case["name"]
    metadata = os.path.join(work, name + ".gguf")
    gguf_vocab.write_metadata(fixtures, case, want, metadata)
    texts = [t for group in groups.values() for t in group]
    with open(os.path.join(work, "texts.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f)
    run = subprocess.run([driver, metadata, os.path.join(work, "texts.json")], capture_output=True)
    if run.returncode != 0:
        print(f"FAIL {name}: gguf_tokenize exit {run.returncode}: {run.stderr.decode(errors='replace').strip()}")
        return [], len(texts)
    return [json.loads(line) for line in run.stdout.decode().split("\n")[:-1]], 0


def main():
    driver, fixtures, work = sys.argv[1:4]
    with open(os.path.join(fixtures, "tokenizers", "gguf", "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    groups = gguf_vocab.texts(fixtures)
    cases = gguf_vocab.load_cases(fixtures)
    failed = 0
    for name, want in expected.items():
        rows, errors = run_case(driver, fixtures, work, cases[name], want, groups)
        failed += errors
        if errors:
            continue
        at, counts = 0, []
        for group, texts in groups.items():
            passed = 0
            for i, text in enumerate(texts):
                got, exp = rows[at + i], want[group][i]
                same = got["ids"] == exp["ids"] and got["plain"] == exp["plain"] and got["decode"] == exp["decode"]
                if same and offsets_ok(text, got):
                    passed += 1
                elif failed < 40:
                    print(f"FAIL {name} {group} #{i} {text[:60]!r}: ids {got['ids'][:24]} expected {exp['ids'][:24]}; "
                          f"plain {got['plain'] == exp['plain']}; decode {got['decode']!r:.60} expected {exp['decode']!r:.60}")
            failed += len(texts) - passed
            counts.append(f"{group} {passed}/{len(texts)}")
            at += len(texts)
        print(f"{name}: " + ", ".join(counts))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
