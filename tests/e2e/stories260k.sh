#!/usr/bin/env bash
# The real stories260K model (data/stories260K.gguf: llama2.c's 260K-parameter TinyStories Llama and
# its 512-token vocabulary, ggml-org's GGUF; data/README.md says where it comes from) against three
# references (tests/goldens/make_stories260k_goldens.py wrote tests/fixtures/stories260k/):
#   - llama2.c's published output (test_all.py's expected_stdout, run.c greedy from BOS): the
#     most likely next token at each of its 200 positions is the text's own next token;
#   - llama.cpp (libllama 3.21.1): the ids of every text, and the logits of the published text;
#   - float64 (hf_model.py on the file's tensors): the logits, and the patching values of
#     docs/interventions.md's demonstration (two stories that differ in one name), head and resid.
source "$(dirname "$0")/cli_common.bash"
need_numpy
MODEL="$SRC/data/stories260K.gguf"
GOLD="$FIXTURES/stories260k"

# The file is the one ggml-org publishes (cozy-creator/python-gen-worker pins the same digest for
# ggml-org/models tinyllamas/stories260K.gguf).
[ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = 270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d ] \
    || fail "data/stories260K.gguf is not ggml-org's stories260K.gguf"

"$PYTHON" - "$GOLD/stories260k.json" "$W" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for name in ("published", "clean", "corrupt"):
    open(f"{sys.argv[2]}/{name}.txt", "w").write(g["texts"][name])
PY
for name in published clean corrupt; do
    run 0 "$A" tokenize "$MODEL" --text-file "$W/$name.txt" --format json
    cp "$W/out" "$W/$name.tokens.json"
done
run 0 "$A" model "$MODEL" --text-file "$W/published.txt" --logits "$W/logits.npy" --top 0
pos=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["position"])' "$GOLD/stories260k.json")
for site in head resid; do
    run 0 "$A" patch "$MODEL" --clean "$(cat "$W/clean.txt")" --corrupt "$(cat "$W/corrupt.txt")" --target she --versus he \
        --site "$site" -o "$W/patch_$site.npy" --plot "$W/patch_$site.svg" --format json
    cp "$W/out" "$W/patch_$site.json"
done
# The picture's title gives both prompts decoded whole (SentencePiece's spaces kept).
grep -qF "clean: &lt;s&gt; Once upon a time, Lily went to the park to play. One day," "$W/patch_resid.svg" \
    && grep -qF "corrupted: &lt;s&gt; Once upon a time, Tim went" "$W/patch_resid.svg" || fail "patch --plot: the prompts in the title"

"$PYTHON" - "$GOLD" "$W" <<'PY'
import json, sys
import numpy as np
gold, w = sys.argv[1], sys.argv[2]
g = json.load(open(f"{gold}/stories260k.json"))
failures = []
for name in ("published", "clean", "corrupt"):
    ids = json.load(open(f"{w}/{name}.tokens.json"))["ids"]
    if ids != g["llama_cpp_ids"][name]:
        failures.append(f"{name}: ids differ from llama.cpp's")

ours = np.load(f"{w}/logits.npy").astype(np.float64)
f64 = np.load(f"{gold}/published_logits_f64.npy").astype(np.float64)
cpp = np.load(f"{gold}/published_logits_llama_cpp.npy").astype(np.float64)
scale = max(1.0, float(np.abs(f64).max()))
# float32 against float64 (saved as float32): rtol 1e-4, atol 1e-5 of the largest logit, as model's goldens;
# llama.cpp's float32 sums differ from both by their own rounding: 1e-4 of the largest logit.
if ours.shape != f64.shape or not np.allclose(ours, f64, rtol=1e-4, atol=1e-5 * scale):
    failures.append(f"logits against float64: max |diff| {np.abs(ours - f64).max():.3g}")
if ours.shape != cpp.shape or np.abs(ours - cpp).max() > 1e-4 * scale:
    failures.append(f"logits against llama.cpp: max |diff| {np.abs(ours - cpp).max():.3g}")
ids = np.array(g["llama_cpp_ids"]["published"])
follows = int((ours[:-1].argmax(axis=1) == ids[1:]).sum())
if follows != len(ids) - 1:
    failures.append(f"greedy follows llama2.c's published text at {follows} of {len(ids) - 1} positions")

p = g["patch"]
rtol, atol0 = 1e-4, 1e-5  # tests/e2e/intervention_goldens.py's float32 tolerances, the same derivation
metric_tol = atol0 * 10 * max(1.0, abs(p["clean"]), abs(p["corrupt"])) + rtol * max(abs(p["clean"]), abs(p["corrupt"]))
gap = abs(p["clean"] - p["corrupt"])
for site in ("head", "resid"):
    d = json.load(open(f"{w}/patch_{site}.json"))
    m = d["metric"]
    if (m["kind"], m["position"], m["target"], m["versus"]) != ("logit_diff", g["position"], g["target_id"], g["versus_id"]):
        failures.append(f"patch {site}: metric {m}")
    for k in ("clean", "corrupt"):
        if abs(m[k] - p[k]) > metric_tol:
            failures.append(f"patch {site}: m_{k} {m[k]} against {p[k]}")
    got, want = np.load(f"{w}/patch_{site}.npy"), np.array(p[site])
    if got.shape != want.shape or np.abs(got - want).max() > 2 * metric_tol / gap:
        failures.append(f"patch {site}: max |diff| {np.abs(got - want).max() if got.shape == want.shape else got.shape}")
if failures:
    sys.exit("FAIL stories260k:\n  " + "\n  ".join(failures))
print(f"stories260k: ids equal llama.cpp's; logits within 1e-4 of float64 and llama.cpp; greedy follows "
      f"llama2.c's published text at {follows} of {follows} positions; patch head and resid equal float64")
PY
