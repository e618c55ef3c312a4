#!/usr/bin/env bash
# lens, ablate, attribute and patch (docs/interventions.md) on constructed cases with a known answer,
# and the refusals a user meets:
#   - a planted head (its values made 40x larger) tops `ablate --heads each`;
#   - a one-path model (every head's V zeroed but layer 1's head 2: the only way from one position to
#     another) restores exactly 1.0 through that head and 0 through every other; resid patching at the
#     differing token in layer 0 restores 1.0;
#   - the lens's last layer is the model's own prediction; attribute's components add up to the logit
#     difference; --heads each agrees with each head ablated alone; splitting a sweep over passes
#     (--max-memory) changes nothing;
#   - bad input: a multi-token target (exit 3, naming its tokens), a position or head out of range,
#     prompts of different lengths (exit 3 naming both counts), the same prompt twice, attribute on a
#     post-norm family (exit 2), an unknown site, an output over an input: one line, nothing written.
# Env: ATTNTRACE, SRC, FIXTURES, PYTHON.
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.bash"
need_numpy
M=$FIXTURES/models
G=$M/full_gpt2
IDS=216,236,107,220,161,59,164,7,175,139,36,197
BAD=216,236,107,220,161,60,164,7,175,139,36,197

# json_value FILE EXPR: EXPR evaluated in Python on the JSON document d of FILE.
json_value() { "$PYTHON" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# gpt2_variant NAME PYTHON: a copy of full_gpt2 whose tensors t (name -> float32 array) PYTHON edits.
gpt2_variant() {
    local dir=$W/$1
    mkdir -p "$dir" && cp "$G/config.json" "$G/tokenizer.json" "$dir/"
    "$PYTHON" - "$SRC/tests/goldens" "$G/model.safetensors" "$dir/model.safetensors" "$2" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import st
t = {k: v.copy() for k, v in st.read(sys.argv[2]).items()}
E, H = 32, 4
P = E // H
exec(sys.argv[4])
st.write(sys.argv[3], t)
PY
}

# ---- a planted head tops ablate --heads each ----------------------------------------------------
gpt2_variant planted 't["h.1.attn.c_attn.weight"][:, 2 * E + 2 * P:2 * E + 3 * P] *= 40'
run 0 "$A" ablate "$W/planted" --ids $IDS --heads each -o "$W/each.npy" --format json
"$PYTHON" - "$W/each.npy" <<'PY' || fail "the planted head 1.2 does not top ablate --heads each"
import sys, numpy as np
v = np.abs(np.load(sys.argv[1]))
assert np.unravel_index(np.argmax(v), v.shape) == (1, 2), v
PY

# ---- a one-path model: only head 1.2 carries information between positions ---------------------
gpt2_variant onepath '
for n in range(3):
    for h in range(H):
        if (n, h) != (1, 2):
            t[f"h.{n}.attn.c_attn.weight"][:, 2 * E + h * P:2 * E + (h + 1) * P] = 0
            t[f"h.{n}.attn.c_attn.bias"][2 * E + h * P:2 * E + (h + 1) * P] = 0'
run 0 "$A" patch "$W/onepath" --clean-ids $IDS --corrupt-ids $BAD --target-id 221 --versus-id 5 -o "$W/heads.npy"
run 0 "$A" patch "$W/onepath" --clean-ids $IDS --corrupt-ids $BAD --target-id 221 --versus-id 5 --site resid -o "$W/resid.npy"
"$PYTHON" - "$W/heads.npy" "$W/resid.npy" <<'PY' || fail "the one-path model's patching is not 1.0 through head 1.2 alone"
import sys, numpy as np
heads, resid = np.load(sys.argv[1]), np.load(sys.argv[2])
want = np.zeros((3, 4)); want[1, 2] = 1
assert np.allclose(heads, want, atol=1e-4), heads
assert abs(resid[0, 5] - 1) < 1e-4 and np.allclose(np.delete(resid[0], 5), 0, atol=1e-4), resid[0]
PY

# ---- identities on a real fixture ---------------------------------------------------------------
run 0 "$A" lens "$G" --ids $IDS --format json
cp "$W/out" "$W/lens.json"
run 0 "$A" model "$G" --ids $IDS --top 1 --format json
[ "$(json_value "$W/lens.json" "d['layers'][-1]['positions'][-1]['top'][0]['id']")" = \
  "$(json_value "$W/out" "d['predictions']['positions'][0]['top'][0]['id']")" ] ||
    fail "lens: the last layer's top token is not the model's prediction"
run 0 "$A" attribute "$G" --ids $IDS --target-id 221 --versus-id 5 --format json
json_value "$W/out" "abs(d['sum'] - d['metric']['value']) < 1e-4 * max(1, abs(d['metric']['value']))" | grep -q True ||
    fail "attribute: the components do not add up to the logit difference"
run 0 "$A" ablate "$G" --ids $IDS --heads each --target-id 221 -o "$W/each.npy"
run 0 "$A" ablate "$G" --ids $IDS --heads each --target-id 221 -o "$W/each_small.npy" --max-memory 300K
run 0 "$A" ablate "$G" --ids $IDS --heads 2.1 --target-id 221 --format json
"$PYTHON" - "$W/each.npy" "$W/each_small.npy" "$W/out" <<'PY' || fail "ablate: --heads each disagrees with one head ablated, or across passes"
import json, sys, numpy as np
each, small, one = np.load(sys.argv[1]), np.load(sys.argv[2]), json.load(open(sys.argv[3]))
assert np.allclose(each, small, rtol=1e-4, atol=1e-5), (each, small)
assert abs(each[2, 1] - (one["ablated"]["metric"] - one["metric"]["clean"])) < 1e-4
PY

# ---- refusals: one line, the documented exit code, nothing written ------------------------------
run 3 "$A" lens "$G" --ids $IDS --target "the cat"
error_line "--target" "tokens, not one"
usage_error "$A" ablate "$G" --ids $IDS --heads 3.0
usage_error "$A" ablate "$G" --ids $IDS --heads 1.x
usage_error "$A" ablate "$G" --ids $IDS --heads each --position 12
usage_error "$A" ablate "$G" --ids $IDS --heads each --ablation half
run 3 "$A" patch "$G" --clean-ids $IDS --corrupt-ids 5,6 --target-id 1 -o "$W/p.npy"
error_line "12 tokens" "2"
[ ! -e "$W/p.npy" ] || fail "patch wrote an output for prompts of different lengths"
run 3 "$A" patch "$G" --clean-ids $IDS --corrupt-ids $IDS --target-id 1
error_line "nothing to restore"
usage_error "$A" patch "$G" --clean-ids $IDS --corrupt-ids $BAD --target-id 1 --site neuron
usage_error "$A" patch "$G" --clean-ids $IDS --corrupt-ids $BAD
usage_error "$A" attribute "$M/full_bert_mlm" --ids "$M/full_bert_mlm/ids.npy" --target-id 1 --position 0
error_line "post-norm"
usage_error "$A" attribute "$M/full_bloom_post" --ids "$M/full_bloom_post/ids.npy" --target-id 1
run 4 "$A" ablate "$G" --ids $IDS --heads each -o "$G/config.json"
error_line "config.json"
"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$G/config.json" || fail "the model's config.json was overwritten"
usage_error "$A" lens "$G" --ids $IDS --plot "$W/lens.jpg"
run 3 "$A" ablate "$G" --ids $IDS --heads each --max-memory 1K -o "$W/m.npy"
error_line "--max-memory"
[ ! -e "$W/m.npy" ] || fail "ablate wrote an output past its memory budget"
run 4 "$A" ablate "$G" --ids $IDS --heads each -o /dev/full
error_line "/dev/full"
usage_error "$A" ablate "$G" --ids $IDS --heads each -o "$W/x.npy" --plot "$W/x.npy"
echo "interventions: every case passed"
