#!/usr/bin/env bash
# attntrace model's trace against the goldens of tests/fixtures/models/full_*, recomputed here in
# numpy from golden/attentions.npy and golden/logits.npy (never from attntrace's own numbers):
#   - --format json: tokens, and per layer and head mean_entropy, previous_token, diagonal,
#     first_token, max_weight (atol 1e-4) and role, with head_stats' field names;
#   - --top K: the K most likely next ids at the last position and their softmax probabilities
#     (atol 1e-5) from the golden logits;
#   - --text: the ids npm @huggingface/tokenizers gives (golden/text.json), and the text trace's
#     header, tokens and one line per head of each kept layer;
#   - fill-mask on BERT and RoBERTa: the top K at each mask token equal the softmax of the logits
#     that tests/goldens/hf_model.py (float64, PyTorch) computes for the same ids;
#   - --induction N --seed S: BOS + R + R with R free of special tokens, the same for the same
#     seed, and each head's score recomputed from the --attentions of a run on the same ids.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy and torch).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
MODELS="$SRC/tests/fixtures/models"
"$PYTHON" -c 'import numpy, torch' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy or torch"; exit 77; }

# check NAME PYTHON-CODE ARGS...: runs the code (sys.argv[1:] = ARGS); counts a pass or a failure.
check() {
    local name=$1 code=$2
    shift 2
    if "$PYTHON" -c "$code" "$@" > "$work/check.txt" 2>&1; then
        passed=$((passed + 1))
    else
        fail "$name" "$(tail -5 "$work/check.txt")"
    fi
}

# ---- head statistics and detectors, from the golden attentions ---------------------------------
HEADS='
import json, sys
import numpy as np
doc, att = json.load(open(sys.argv[1])), np.load(sys.argv[2])
ids = np.load(sys.argv[3])
assert [t["id"] for t in doc["tokens"]] == ids.tolist(), "tokens"
assert [l["layer"] for l in doc["layers"]] == list(range(att.shape[0])), "layers"
for layer in doc["layers"]:
    w = att[layer["layer"]]
    H, L, _ = w.shape
    assert len(layer["heads"]) == H
    for head in layer["heads"]:
        h = w[head["head"]]
        ent = -np.where(h > 0, h * np.log(np.where(h > 0, h, 1)), 0).sum(-1).mean()
        want = {"mean_entropy": ent, "previous_token": np.mean([h[i, i - 1] for i in range(1, L)]),
                "diagonal": np.diag(h).mean(), "first_token": h[:, 0].mean(), "max_weight": h.max(-1).mean()}
        for k, v in want.items():
            assert abs(head[k] - v) < 1e-4, (layer["layer"], head["head"], k, head[k], v)
        role = ("previous-token" if want["previous_token"] >= 0.5 else "sink" if want["first_token"] >= 0.5
                else "diagonal" if want["diagonal"] >= 0.5 else None)
        assert head["role"] == role and head["induction"] is None and head["empty_rows"] == 0, head
        assert len(head["top"]) == L and all(t["key"] == int(np.argmax(h[t["query"]])) for t in head["top"])
'
TOP='
import json, sys
import numpy as np
doc, logits, k = json.load(open(sys.argv[1])), np.load(sys.argv[2]), int(sys.argv[3])
p = doc["predictions"]
assert p["kind"] == "next" and [q["position"] for q in p["positions"]] == [logits.shape[0] - 1], p
z = logits[-1] - logits[-1].max()
prob = np.exp(z) / np.exp(z).sum()
want = np.argsort(-logits[-1], kind="stable")[:k]
top = p["positions"][0]["top"]
assert [c["id"] for c in top] == want.tolist(), ([c["id"] for c in top], want)
for c in top:
    assert abs(c["probability"] - prob[c["id"]]) < 1e-5 and abs(c["logit"] - logits[-1][c["id"]]) < 1e-4, c
'
for dir in "$MODELS"/full_*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --format json --top 0 > "$work/t.json"
    check "$name heads" "$HEADS" "$work/t.json" "$dir/golden/attentions.npy" "$dir/ids.npy"
    if [[ -f $dir/golden/logits.npy ]] && ! grep -q '"model_type": "\(bert\|roberta\)"' "$dir/config.json"; then
        "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --format json --top 7 > "$work/t.json"
        check "$name --top 7" "$TOP" "$work/t.json" "$dir/golden/logits.npy" 7
        "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --format json > "$work/t.json"  # the default: 5
        check "$name --top default" "$TOP" "$work/t.json" "$dir/golden/logits.npy" 5
    fi
done

# ---- --text: the tokenizer's ids, and the text trace -------------------------------------------
TEXTS='
import json, sys
doc, texts, i = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["texts"], int(sys.argv[3])
assert [t["id"] for t in doc["tokens"]] == texts[i]["ids"], ([t["id"] for t in doc["tokens"]], texts[i]["ids"])
assert [t["token"] for t in doc["tokens"]] == texts[i]["tokens"]
'
for name in full_gpt2 full_llama full_bert_mlm full_qwen2; do
    dir="$MODELS/$name"
    text=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["texts"][0]["text"])' "$dir/golden/text.json")
    "$ATTNTRACE" model "$dir" --text "$text" --format json --top 0 > "$work/t.json"
    check "$name --text" "$TEXTS" "$work/t.json" "$dir/golden/text.json" 0
done
dir="$MODELS/full_llama"
"$ATTNTRACE" model "$dir" --text "the cat sat on the mat" --layers 1-2 > "$work/trace.txt"
check "text trace" '
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0] == "model " + sys.argv[2] + ": llama, 3 layers, 4 heads, 2 kv heads, L 8, float32", lines[0]
assert lines[2].startswith("tokens:  0:280 \"<|begin_of_text|>\"  1:83 \"t\"  2:257 \"he\"  3:274 \" cat\""), lines[2]
assert [l for l in lines if l.startswith("layer ")] == ["layer 1", "layer 2"]
heads = [l for l in lines if l.startswith("  head ")]
assert len(heads) == 8 and all("entropy" in l and "previous_token" in l and "first_token" in l for l in heads)
nxt = [l for l in lines if l.startswith("next token after 7 \" mat\":")]
assert len(nxt) == 1 and nxt[0].count(" 0.") == 5, nxt
' "$work/trace.txt" "$dir"

# ---- fill-mask: BERT and RoBERTa against hf_model.py's float64 logits ---------------------------
FILL='
import json, sys
import numpy as np, torch
from pathlib import Path
sys.path.insert(0, sys.argv[3] + "/tests/goldens")
sys.dont_write_bytecode = True
import hf_model, make_checkpoint_goldens as mcg
doc, folder, k = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[4])
ids = [t["id"] for t in doc["tokens"]]
mask = int(sys.argv[5])
positions = [i for i, t in enumerate(ids) if t == mask]
assert positions and [p["position"] for p in doc["predictions"]["positions"]] == positions, doc["predictions"]
assert doc["predictions"]["kind"] == "mask"
cfg = json.load(open(folder + "/config.json"))
with torch.no_grad():
    logits = hf_model.forward(mcg.read_checkpoint(Path(folder)), cfg, torch.tensor(ids))["logits"].numpy()
for p in doc["predictions"]["positions"]:
    row = logits[p["position"]]
    prob = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert [c["id"] for c in p["top"]] == np.argsort(-row, kind="stable")[:k].tolist(), p
    for c in p["top"]:
        assert abs(c["probability"] - prob[c["id"]]) < 1e-5, (c, prob[c["id"]])
'
"$ATTNTRACE" model "$MODELS/full_bert_mlm" --text "The cat [MASK] on the [MASK]." --top 4 --format json > "$work/t.json"
check "bert fill-mask" "$FILL" "$work/t.json" "$MODELS/full_bert_mlm" "$SRC" 4 4
"$ATTNTRACE" model "$MODELS/full_roberta" --text "The cat sat on the<mask>." --top 3 --format json > "$work/t.json"
check "roberta fill-mask" "$FILL" "$work/t.json" "$MODELS/full_roberta" "$SRC" 3 284
"$ATTNTRACE" model "$MODELS/full_bert_mlm" --text "no mask here" --top 3 > "$work/t.txt"
grep -q "^no mask token in the input: nothing to fill$" "$work/t.txt" && passed=$((passed + 1)) || fail "no mask" "$(cat "$work/t.txt")"
"$ATTNTRACE" model "$MODELS/full_bert_mlm" --text "The cat [MASK]." --format json > "$work/t.json"  # BERT: no --top, nothing
check "bert default top" 'import json, sys; assert json.load(open(sys.argv[1]))["predictions"] is None' "$work/t.json"

# make_gpt2 FOLDER SEED CONFIG: a float32 GPT-2 checkpoint in FOLDER (mcg.gpt2_config with the JSON
# object CONFIG over it, weights drawn from SEED), ids.npy (n_positions ids below vocab_size), and
# hf_model.py's float64 forward of them: want_logits.npy, want_hidden.npy (N + 1, L, E).
make_gpt2() {
    "$PYTHON" - "$SRC" "$@" <<'PY'
import json, sys
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, sys.argv[1] + "/tests/goldens")
sys.dont_write_bytecode = True
import hf_model, make_checkpoint_goldens as mcg
folder, seed, over = Path(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
folder.mkdir()
mcg.V = over["vocab_size"]
cfg = dict(mcg.gpt2_config("f32"), bos_token_id=mcg.V - 1, eos_token_id=mcg.V - 1, **over)
mcg.save_checkpoint(folder, mcg.gpt2_state(cfg, mcg.Init(seed), ""))
(folder / "config.json").write_text(json.dumps(cfg))
ids = torch.tensor(np.random.default_rng(seed).integers(0, mcg.V, cfg["n_positions"]))
np.save(folder / "ids.npy", ids.numpy().astype(np.int64))
with torch.no_grad():
    out = hf_model.forward(mcg.read_checkpoint(folder), cfg, ids)
np.save(folder / "want_logits.npy", out["logits"].numpy())
np.save(folder / "want_hidden.npy", np.stack([h.numpy() for h in out["hidden_states"]]))
PY
}

# ---- a vocabulary of many head blocks: the logits written block by block as the head computes ---
# GPT-2 with 5000 tokens (5 blocks of 1024 vocabulary rows, written 2 blocks at a time, each write
# overlapping the next blocks' products), against hf_model.py's float64 logits; the file, stdout
# and --top's predictions (kept from the blocks as they pass) all agree.
make_gpt2 "$work/wide" 4242 '{"n_layer": 1, "n_positions": 40, "vocab_size": 5000}' ||
    fail "wide vocabulary" "could not make the checkpoint"
WIDE='
import json, sys
import numpy as np
want, doc = np.load(sys.argv[1]), json.load(open(sys.argv[2]))
for path, tol in zip(sys.argv[3:], (2e-5, 2e-5, 1e-12)):
    got = np.load(path)
    assert got.shape == want.shape == (40, 5000), (got.shape, want.shape)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < tol, (path, err)
row = want[-1]
assert [c["id"] for c in doc["predictions"]["positions"][0]["top"]] == np.argsort(-row, kind="stable")[:3].tolist(), doc
'
dir="$work/wide"
"$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --logits "$work/wide32.npy" --top 3 --format json > "$work/wide.json"
"$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --logits - --top 0 > "$work/wide_stdout.npy"
"$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --logits "$work/wide64.npy" --dtype f64 --top 0 > /dev/null
check "wide vocabulary" "$WIDE" "$dir/want_logits.npy" "$work/wide.json" "$work/wide32.npy" "$work/wide_stdout.npy" "$work/wide64.npy"
cmp -s "$work/wide32.npy" "$work/wide_stdout.npy" && passed=$((passed + 1)) || fail "wide vocabulary" "stdout differs from the file"

# ---- a block of 4 MiB or more: its weights' copies and the activations in pages made ahead -----
# GPT-2 with E = 384 (7 MB of float32 weights a block): with the weights copied (WEIGHT_PAGES=read)
# on two threads, a helper makes the pages of the activations and of the first block's copies while
# the run embeds (PagesAhead, lib/model/forward.cpp), and the blocks come from that region; the
# hidden states and logits against hf_model.py's float64 forward, mapped and copied alike.
make_gpt2 "$work/deep" 77 '{"n_embd": 384, "n_head": 6, "n_layer": 2, "n_positions": 24, "vocab_size": 300}' ||
    fail "pages ahead" "could not make the checkpoint"
DEEP='
import sys
import numpy as np
folder, logits, hidden = sys.argv[1:4]
for name, got, want in (("logits", np.load(logits), np.load(folder + "/want_logits.npy")),
                        ("hidden", np.load(hidden), np.load(folder + "/want_hidden.npy"))):
    got = got.reshape(want.shape)
    err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
    assert err < 2e-5, (name, err)
'
dir="$work/deep"
for pages in read map; do
    ATTNTRACE_WEIGHT_PAGES=$pages "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --threads 2 --top 0 \
        --logits "$work/deep_$pages.npy" --hidden-states "$work/deep_h_$pages.npy" > /dev/null
    check "pages ahead ($pages)" "$DEEP" "$dir" "$work/deep_$pages.npy" "$work/deep_h_$pages.npy"
done

# ---- --induction: the sequence, and each head's score from the same run's attentions -----------
INDUCTION='
import json, sys
import numpy as np
doc, att, n, special, bos = json.load(open(sys.argv[1])), np.load(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
ind = doc["induction"]
ids, prefix = ind["ids"], ind["prefix"]
assert ids[:prefix] == bos and len(ids) == prefix + 2 * n and ids[prefix:prefix + n] == ids[prefix + n:], ind
assert not set(ids[prefix:]) & set(special), "a special token was drawn"
assert ind["threshold"] == 0.5
for layer in doc["layers"]:
    for head in layer["heads"]:
        w = att[layer["layer"], head["head"]]
        scores = []
        for i in range(prefix + n, len(ids)):
            j = max(j for j in range(i) if ids[j] == ids[i])
            scores.append(w[i, j + 1])
        assert abs(head["induction"] - np.mean(scores)) < 1e-5, (layer["layer"], head["head"], head["induction"], np.mean(scores))
        assert (head["role"] == "induction") == (np.mean(scores) >= 0.5), head
'
for spec in "full_llama 280" "full_gpt2 280" "full_neox 0"; do  # GPT-2, NeoX: config.json's bos_token_id
    read -r name bos <<< "$spec"
    dir="$MODELS/$name"
    special=$("$PYTHON" -c 'import json, sys; print(json.dumps(sorted({t["id"] for t in json.load(open(sys.argv[1]))["added_tokens"] if t["special"]})))' "$dir/tokenizer.json")
    "$ATTNTRACE" model "$dir" --text "the cat sat" --induction 5 --seed 7 --format json > "$work/i.json"
    ids=$("$PYTHON" -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["induction"]["ids"])))' "$work/i.json")
    "$ATTNTRACE" model "$dir" --ids "$ids" --attentions "$work/ia.npy" --top 0 > /dev/null
    check "$name --induction" "$INDUCTION" "$work/i.json" "$work/ia.npy" 5 "$special" "[${bos}]"
done
dir="$MODELS/full_llama"
"$ATTNTRACE" model "$dir" --ids 5,6 --induction 6 --seed 7 --format json > "$work/i1.json"
"$ATTNTRACE" model "$dir" --ids 9 --induction 6 --seed 7 --format json > "$work/i2.json"
"$ATTNTRACE" model "$dir" --ids 9 --induction 6 --seed 8 --format json > "$work/i3.json"
check "induction seeds" '
import json, sys
a, b, c = (json.load(open(p))["induction"]["ids"] for p in sys.argv[1:])
assert a == b and a != c, (a, b, c)
' "$work/i1.json" "$work/i2.json" "$work/i3.json"
"$ATTNTRACE" model "$dir" --ids 5,6 --induction 6 --no-special-tokens --format json > "$work/i4.json"
check "induction without special tokens" 'import json, sys; d = json.load(open(sys.argv[1]))["induction"]; assert d["prefix"] == 0 and len(d["ids"]) == 12' "$work/i4.json"

echo "model trace: $passed passed, $failed failed"
[[ $failed == 0 ]]
