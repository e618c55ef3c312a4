"""attntrace on GGUF model files' own tokenizers against llama.cpp (tests/fixtures/gguf/text_goldens.json,
made by tests/goldens/make_gguf_text_goldens.py): for every case, the file (a split model's first)
through `attntrace tokenize FILE --jsonl` with and without special tokens (llama_tokenize with
add_special true / false, parse_special false: equal ids), `--decode` of each text's ids
(llama_detokenize: equal text), and `attntrace model FILE --text T --logits` (the ids llama.cpp
gives T, and logits as close to llama.cpp's as llama.cpp's are to the float64 forward of the
dequantized weights, + 1e-4 x the largest logit: what its quantized products change, as
tests/e2e/gguf_goldens.sh bounds it on the files' ids.npy).
Usage: gguf_text.py ATTNTRACE FIXTURES WORKDIR. One line a case with its pass counts; fails on any miss."""
import json
import os
import subprocess
import sys

import numpy as np


def run(args, stdin=None, env=None):
    return subprocess.run(args, capture_output=True, stdin=subprocess.DEVNULL if stdin is None else stdin,
                          env=None if env is None else dict(os.environ, **env))


def first_file(folder):
    return os.path.join(folder, sorted(f for f in os.listdir(folder) if f.startswith("model") and f.endswith(".gguf"))[0])


def decoded(raw):
    """`tokenize --decode` prints the text and a newline; a golden that is not UTF-8 is {"hex": ...}."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


class Check:
    def __init__(self, attntrace, work):
        self.attntrace, self.work, self.failed = attntrace, work, 0

    def fail(self, what):
        self.failed += 1
        if self.failed <= 40:
            print("FAIL " + what)

    def ids(self, file, texts, special):
        """Every text's ids from one `tokenize --jsonl` run."""
        lines = os.path.join(self.work, "texts.jsonl")
        with open(lines, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t) + "\n")
        r = run([self.attntrace, "tokenize", file, "--jsonl", lines] + ([] if special else ["--no-special-tokens"]))
        if r.returncode != 0:
            self.fail(f"{file}: tokenize --jsonl exit {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
            return [None] * len(texts)
        return [json.loads(line)["ids"] for line in r.stdout.decode().split("\n")[:-1]]

    def group(self, name, file, group, texts, rows):
        with_special, plain = self.ids(file, texts, True), self.ids(file, texts, False)
        passed = 0
        for i, (text, row) in enumerate(zip(texts, rows)):
            r = run([self.attntrace, "tokenize", file, "--decode", ",".join(map(str, row["ids"]))]) if row["ids"] else None
            got = decoded(r.stdout) if r is not None and r.returncode == 0 else ("" if r is None else None)
            if with_special[i] == row["ids"] and plain[i] == row["plain"] and got == row["decode"]:
                passed += 1
            else:
                self.fail(f"{name} {group} #{i} {text[:50]!r}: ids {with_special[i] and with_special[i][:16]} expected {row['ids'][:16]}; "
                          f"plain {plain[i] == row['plain']}; decode {got!r:.50} expected {row['decode']!r:.50}")
        return f"{group} {passed}/{len(texts)}"

    def model_text(self, file, text, dtype, products="quantized"):
        """`model FILE --text TEXT --dtype DTYPE` with ATTNTRACE_GGUF_PRODUCTS=PRODUCTS: the ids and
        the logits (None when it failed)."""
        out = os.path.join(self.work, f"l_{dtype}_{products}.npy")
        r = run([self.attntrace, "model", file, "--text", text, "--logits", out, "--top", "0", "--format", "json", "--dtype", dtype],
                env={"ATTNTRACE_GGUF_PRODUCTS": products})
        if r.returncode != 0:
            self.fail(f"{file}: model --text --dtype {dtype} exit {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
            return None, None
        return [t["id"] for t in json.loads(r.stdout)["tokens"]], np.load(out).astype(np.float64)

    def labels(self, name, file, text):
        """`model FILE --ids` (its tokenizer read alongside the forward, for the labels alone) labels
        the tokens and the top candidates as `model FILE --text` does (the tokenizer read first)."""
        def trace(args):
            r = run([self.attntrace, "model", file, "--top", "3", "--format", "json"] + args)
            if r.returncode != 0:
                self.fail(f"{name}: model {args[0]} exit {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
                return None
            doc = json.loads(r.stdout)
            return doc["tokens"], [[(c["id"], c["text"]) for c in p["top"]] for p in doc["predictions"]["positions"]]
        by_text = trace(["--text", text])
        by_ids = by_text and trace(["--ids", ",".join(str(t["id"]) for t in by_text[0])])
        if by_text and by_ids and by_ids != by_text:
            self.fail(f"{name}: model --ids labels {by_ids} differ from model --text's {by_text}")
        return "labels " + ("equal" if by_text and by_ids == by_text else "differ")

    def logits(self, name, file, text, want_ids, golden):
        """The text's ids are llama.cpp's; the logits are within llama.cpp's own distance from the
        float64 forward (--dtype f64, which gguf_goldens.sh holds to the float64 reference at 1e-9)
        + 1e-4 x the largest logit, and the float32 run with float32 products
        (ATTNTRACE_GGUF_PRODUCTS=float32: the dequantized weights) within rtol 1e-4, atol 1e-5 x it
        of that. The default run multiplies quantized weights as llama.cpp does, so it is the one
        held to llama.cpp's logits."""
        ids, f32 = self.model_text(file, text, "f32")
        ids32, dequantized = self.model_text(file, text, "f32", "float32")
        ids64, f64 = self.model_text(file, text, "f64")
        if ids is None or ids32 is None or ids64 is None:
            return "model --text failed"
        if ids != want_ids or ids32 != want_ids or ids64 != want_ids:
            self.fail(f"{name}: model --text ids {ids} expected {want_ids}")
            return "model --text ids differ"
        theirs = np.load(golden).astype(np.float64)
        scale = max(1.0, float(np.abs(f64).max()))
        llama_cpp = float(np.abs(theirs - f64).max())
        ours = float(np.abs(f32 - theirs).max())
        if ours > llama_cpp + 1e-4 * scale or not np.allclose(dequantized, f64, rtol=1e-4, atol=1e-5 * scale):
            self.fail(f"{name}: max |logits - llama.cpp's| {ours:.3g}, llama.cpp's from the float64 forward {llama_cpp:.3g}; "
                      f"float32 products from float64 {float(np.abs(dequantized - f64).max()):.3g}")
        return f"model --text: |ours - llama.cpp| {ours:.2g}, |llama.cpp - float64| {llama_cpp:.2g}"


def main():
    attntrace, fixtures, work = sys.argv[1:4]
    cases_dir = os.path.join(fixtures, "gguf")
    with open(os.path.join(cases_dir, "text_goldens.json"), encoding="utf-8") as f:
        goldens = json.load(f)
    check = Check(attntrace, work)
    for name, want in goldens["cases"].items():
        folder = os.path.join(cases_dir, name)
        file = first_file(folder)
        rows = goldens["cases"][want["same_as"]] if "same_as" in want else want
        counts = [check.group(name, file, group, texts, rows[group]) for group, texts in goldens["texts"].items()]
        counts.append(check.logits(name, file, goldens["logits_text"], want["logits_ids"], os.path.join(folder, "golden", "text_logits.npy")))
        counts.append(check.labels(name, file, goldens["logits_text"]))
        print(f"{name}: " + ", ".join(counts))
    sys.exit(1 if check.failed else 0)


if __name__ == "__main__":
    main()
