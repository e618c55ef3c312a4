#!/usr/bin/env bash
# The JSON trace (`--format json`): one strict JSON document on stdout, read by jq and by Python's
# json. Pins every documented field name (jq), the stage names in order, and checks the numbers
# against numpy (Python): each stage's stats {min, max, mean} against the stage dumped with
# --dump STAGE=FILE.npy (over the finite values, as lib/include/attntrace/tensor/stats.hpp documents),
# with --trace values each stage's data against the same dump, and the head statistics (entropy,
# most-attended key and its weight, empty rows) against the weights written by --attn-weights.
source "$(dirname "$0")/cli_common.bash"
need_numpy
command -v jq > /dev/null || { echo "SKIP: jq is not installed"; exit 77; }
cd "$SRC"

MHA_STAGES='["query","key","value","q","k","v","q_heads","k_heads","v_heads","scores","masked_scores","weights","context","merged","output"]'
SDPA_STAGES='["query","key","value","scores","masked_scores","weights","output"]'

# jq_true FILE EXPR...: each jq expression is true for the JSON document in FILE.
jq_true() {
    local file=$1 expr
    shift
    for expr in "$@"; do
        jq -e "$expr" "$file" > /dev/null || fail "$file: jq '$expr' is not true; got: $(jq -c "${expr%%|*}" "$file" 2>&1 | head -c 300)"
    done
}

# case NAME COMMAND ARGS...: one run with every stage dumped and the weights written, one with
# --trace values; then the checks.
cases=0
check_case() {
    local name=$1 cmd=$2
    shift 2
    local stages=$SDPA_STAGES
    [[ $cmd == mha ]] && stages=$MHA_STAGES
    local dumps=() s
    for s in $(jq -r '.[]' <<< "$stages"); do dumps+=(--dump "$s=$W/$name.$s.npy"); done

    run 0 "$A" "$cmd" "$@" --format json --attn-weights "$W/$name.w.npy" "${dumps[@]}"
    [ -s "$W/err" ] && fail "$name: stderr not empty with --format json"
    [ "$(wc -l < "$W/out")" = 1 ] || fail "$name: the JSON trace is not one line (one document)"
    cp "$W/out" "$W/$name.json"
    run 0 "$A" "$cmd" "$@" --format json --trace values
    cp "$W/out" "$W/$name.values.json"
    : > "$W/out"  # fail() shows $W/out: keep the long JSON line out of the log

    local j=$W/$name.json
    # ---- field names (jq) ----
    jq_true "$j" \
        'keys == ["command","empty_rows","head_stats","inputs","options","outputs","stages"]' \
        ".command == \"$cmd\"" \
        "[.stages[].name] == $stages" \
        '.stages | all(keys == ["attributes","name","note","shape","stats"])' \
        '.stages | all(.stats | keys == ["inf","max","mean","min","nan"])' \
        '.stages | all(.shape | type == "array" and all(type == "number"))' \
        '.stages | all(.note | type == "string" and length > 0)' \
        '.inputs | map(.name) == ["query","key","value"]' \
        '.inputs | all(keys == ["dtype","file","format","name","shape"])' \
        '.inputs | all(.dtype == "float32" and .format == "npy")' \
        '.head_stats | length > 0 and all(keys == ["diagonal","empty_rows","first_token","head","max_weight","mean_entropy","previous_token","role","top"])' \
        '[.head_stats[].head] == [range(.head_stats | length)]' \
        '.head_stats | all(.top | length > 0 and all(keys == ["entropy","key","query","weight"]))' \
        '.empty_rows | type == "number"' \
        '.outputs | keys == ["attn_weights","dumps","output"]' \
        '.outputs.output == null' \
        ".outputs.attn_weights == \"$W/$name.w.npy\"" \
        "([.outputs.dumps[].stage] | sort) == ($stages | sort)" \
        '.options.scale | type == "number"' \
        '.options.dtype == "f32"'
    if [[ $cmd == mha ]]; then
        jq_true "$j" \
            '.options | has("heads") and has("kv_heads") and has("head_dim") and has("value_head_dim") and has("out_dim") and has("out_proj") and has("scale") and has("masks") and has("params") and has("average_heads") and has("threads")' \
            '.options.masks | keys == ["attn_mask","attn_mask_kind","causal","empty_rows","key_padding_mask","valid_lens"]' \
            '.options.masks.empty_rows == .empty_rows' \
            '.options.params | keys == ["ignored","names","prefix","scheme","source"]' \
            '.options.params.names | length > 0 and all(type == "string")' \
            '.options.kv_heads == .options.heads' \
            '(.head_stats | length) == .options.heads' \
            '.stages[3:6] | all(.attributes | keys == ["bias","fused","weight","weight_shape"])' \
            '.stages[9].attributes.scale == .options.scale'
    fi
    jq_true "$W/$name.values.json" \
        '.stages | all(keys == ["attributes","data","name","note","shape","stats"])' \
        "[.stages[].name] == $stages"

    # ---- numbers (Python json + numpy) ----
    "$PYTHON" - "$W" "$name" "$cmd" "$@" <<'PY' || fail "$name: JSON trace numbers differ from numpy (above)"
import json, math, sys
import numpy as np

w, name, cmd, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
flag = lambda f, default=None: argv[argv.index(f) + 1] if f in argv else default
bad = []

def strict(text):  # the trace is strict JSON: no NaN / Infinity tokens
    return json.loads(text, parse_constant=lambda c: bad.append(f"non-JSON constant {c}"))

doc = strict(open(f"{w}/{name}.json").read())
vdoc = strict(open(f"{w}/{name}.values.json").read())

# inputs: file, dtype, shape as numpy reads them
q = flag("-q")
files = {"query": q, "key": flag("-k", q)}
files["value"] = flag("-v", files["key"])
for inp in doc["inputs"]:
    a = np.load(files[inp["name"]])
    if inp["file"] != files[inp["name"]] or inp["shape"] != list(a.shape) or inp["dtype"] != str(a.dtype):
        bad.append(f"input {inp}: expected file {files[inp['name']]}, shape {list(a.shape)}, dtype {a.dtype}")

# options
scale = flag("--scale")
if scale is not None and doc["options"]["scale"] != float(np.float32(float(scale))):
    bad.append(f"options.scale {doc['options']['scale']} != float32({scale})")
if cmd == "mha":
    o = doc["options"]
    if o["heads"] != int(flag("--heads")):
        bad.append(f"options.heads {o['heads']}")
    if scale is None and o["scale"] != float(np.float32(1 / math.sqrt(o["head_dim"]))):
        bad.append(f"options.scale {o['scale']} is not float32(1/sqrt(head_dim {o['head_dim']}))")
    if o["params"]["source"] != flag("--params") or o["masks"]["valid_lens"] != flag("--valid-lens"):
        bad.append(f"options.params.source / masks.valid_lens: {o['params']['source']} {o['masks']['valid_lens']}")
    if o["out_proj"] == ("--no-out-proj" in argv):
        bad.append(f"options.out_proj {o['out_proj']}")

# stages: shape and stats against the dumps; data (with --trace values) against the dumps
for st, vst in zip(doc["stages"], vdoc["stages"]):
    a = np.load(f"{w}/{name}.{st['name']}.npy")
    if st["shape"] != list(a.shape):
        bad.append(f"stage {st['name']}: shape {st['shape']} but the dump is {a.shape}")
        continue
    dumped = {d["stage"]: d["file"] for d in doc["outputs"]["dumps"]}
    if dumped.get(st["name"]) != f"{w}/{name}.{st['name']}.npy":
        bad.append(f"outputs.dumps[{st['name']}] = {dumped.get(st['name'])}")
    fin = a[np.isfinite(a)].astype(np.float64)
    want = {"min": fin.min(), "max": fin.max(), "mean": fin.mean()} if fin.size else {}
    for k in ("min", "max", "mean"):
        got = st["stats"][k]
        if k not in want:
            ok = got is None
        elif k == "mean":
            ok = got is not None and math.isclose(got, want[k], rel_tol=1e-12, abs_tol=1e-15)
        else:
            ok = got == want[k]   # a float32 widened to double: exact
        if not ok:
            bad.append(f"stage {st['name']}: stats.{k} {got} but numpy says {want.get(k)}")
    if vst["stats"] != st["stats"] or vst["shape"] != st["shape"] or vst["note"] != st["note"]:
        bad.append(f"stage {st['name']}: --trace values changes its stats, shape or note")
    data = np.array(vst["data"], dtype=object)
    if list(data.shape) != list(a.shape):
        bad.append(f"stage {st['name']}: data of shape {data.shape} but the dump is {a.shape}")
        continue
    nulls = np.vectorize(lambda x: x is None)(data)
    if not np.array_equal(nulls, ~np.isfinite(a)):
        bad.append(f"stage {st['name']}: data has null exactly where the tensor is not finite? no")
    got = np.where(nulls, np.nan, data).astype(np.float64)
    if not np.array_equal(got[~nulls], a[~nulls].astype(np.float64)):
        i = np.argmax(np.where(~nulls, np.abs(got - a), 0))
        bad.append(f"stage {st['name']}: data differs from the dump, e.g. at flat index {i}")

# head statistics from the --attn-weights output: (..., H, Lq, Lk), the axis before Lq the heads
wts = np.load(f"{w}/{name}.w.npy").astype(np.float64)
H, Lq, Lk = (wts.shape[-3] if wts.ndim >= 3 else 1), wts.shape[-2], wts.shape[-1]
w4 = wts.reshape(-1, H, Lq, Lk)
ent = -np.where(w4 > 0, w4 * np.log(np.where(w4 > 0, w4, 1)), 0).sum(-1)
empty = ~(w4 > 0).any(-1)
if len(doc["head_stats"]) != H:
    bad.append(f"head_stats has {len(doc['head_stats'])} heads, the weights {H}")
total_empty = 0
for hs in doc["head_stats"][:H]:
    h = hs["head"]
    rows = ~empty[:, h]
    mean = ent[:, h][rows].mean() if rows.any() else 0.0
    total_empty += hs["empty_rows"]
    if not math.isclose(hs["mean_entropy"], mean, rel_tol=1e-9, abs_tol=1e-12):
        bad.append(f"head {h}: mean_entropy {hs['mean_entropy']} but numpy {mean}")
    # the head detectors: means over every batch's non-empty rows (lib/include/attntrace/attention/detectors.hpp)
    i = np.arange(Lq)
    det = {"previous_token": (w4[:, h, i, np.clip(i - 1, 0, Lk - 1)], (i >= 1) & (i - 1 < Lk)),
           "diagonal": (w4[:, h, i, np.clip(i, 0, Lk - 1)], np.full(Lq, Lq == Lk)),
           "first_token": (w4[:, h, :, 0], np.full(Lq, True)),
           "max_weight": (w4[:, h].max(-1), np.full(Lq, True))}
    scores = {}
    for field, (vals, ok) in det.items():
        sel = rows & ok[None, :]
        scores[field] = float(vals[sel].mean()) if sel.any() else None
        got = hs[field]
        if (got is None) != (scores[field] is None) or (got is not None and not math.isclose(got, scores[field], rel_tol=1e-6, abs_tol=1e-7)):
            bad.append(f"head {h}: {field} {got} but numpy {scores[field]}")
    role = None
    for name, field in (("previous-token", "previous_token"), ("sink", "first_token"), ("diagonal", "diagonal")):
        if scores[field] is not None and scores[field] >= 0.5:
            role = name
            break
    if hs["role"] != role and not any(scores[f] is not None and abs(scores[f] - 0.5) < 1e-6 for f in scores):
        bad.append(f"head {h}: role {hs['role']} but numpy says {role}")
    if hs["empty_rows"] != int(empty[:, h].sum()):
        bad.append(f"head {h}: empty_rows {hs['empty_rows']} but numpy {int(empty[:, h].sum())}")
    if [t["query"] for t in hs["top"]] != list(range(Lq)):
        bad.append(f"head {h}: top covers queries {[t['query'] for t in hs['top']]}, expected every query of batch 0")
    for t in hs["top"]:
        i = t["query"]
        row = w4[0, h, i]
        if empty[0, h, i]:
            want = (None, 0.0, 0.0)
        else:
            want = (int(np.argmax(row)), float(row.max()), float(ent[0, h, i]))
        if t["key"] != want[0] or t["weight"] != want[1] or not math.isclose(t["entropy"], want[2], rel_tol=1e-9, abs_tol=1e-12):
            bad.append(f"head {h} query {i}: key/weight/entropy {t['key']} {t['weight']} {t['entropy']} but numpy {want}")
if doc["empty_rows"] != int(empty.sum()) or total_empty != doc["empty_rows"]:
    bad.append(f"empty_rows {doc['empty_rows']}, heads sum {total_empty}, numpy {int(empty.sum())}")

for b in bad:
    print("   ", b)
sys.exit(1 if bad else 0)
PY
    cases=$((cases + 1))
}

check_case bloem mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors --scale 0.4082482904638631
check_case atcold_q2 sdpa -q data/atcold/q2.npy -k data/atcold/k.npy -v data/atcold/v.npy --scale 0.125
check_case blog mha -q data/blog/x.npy -k data/blog/k.npy -v data/blog/v.npy --heads 2 --params data/blog/params.safetensors
check_case d2l_valid_lens mha -q data/d2l/queries.npy -k data/d2l/keys.npy -v data/d2l/values.npy --heads 5 \
    --params data/d2l/params.safetensors --valid-lens 3,2
# batch 0 has no valid key: 5 heads x 4 queries with no allowed key, "key": null in the head stats
check_case d2l_empty_rows mha -q data/d2l/queries.npy -k data/d2l/keys.npy -v data/d2l/values.npy --heads 5 \
    --params data/d2l/params.safetensors --valid-lens 0,2
check_case seed004_unbatched mha -q data/seed004/x.npy --heads 2 --params data/seed004/params.safetensors --no-out-proj

# Fixed values the cases above must show.
jq_true "$W/bloem.json" \
    '.options | [.heads, .kv_heads, .head_dim, .value_head_dim, .out_dim, .out_proj] == [2, 2, 3, 3, 6, true]' \
    '.options.params | .scheme == "bloem" and .source == "data/bloem/params.safetensors" and .prefix == "" and .ignored == []' \
    '.options.params.names | sort == ["tokeys.weight","toqueries.weight","tovalues.weight","unifyheads.bias","unifyheads.weight"]' \
    '.options.masks | [.causal, .attn_mask, .key_padding_mask, .valid_lens, .empty_rows] == [false, null, null, null, 0]' \
    '.stages[3].attributes | .weight_shape == [6, 6] and .bias == false and .fused == true' \
    '.stages[14].attributes | .weight_shape == [6, 6] and .bias == true' \
    '[.stages[].shape] == [[2,10,6],[2,10,6],[2,10,6],[2,10,6],[2,10,6],[2,10,6],[2,2,10,3],[2,2,10,3],[2,2,10,3],[2,2,10,10],[2,2,10,10],[2,2,10,10],[2,2,10,3],[2,10,6],[2,10,6]]'
jq_true "$W/blog.json" \
    '.options | [.head_dim, .value_head_dim, .out_dim] == [7, 5, 10]' \
    '.options.params.scheme == "d2l"' \
    '.stages[8].shape == [2, 2, 4, 5] and .stages[12].shape == [2, 2, 4, 5] and .stages[13].shape == [2, 4, 10]'
jq_true "$W/atcold_q2.json" \
    '.options.scale == 0.125' \
    '[.stages[].shape] == [[1,1,1,3],[1,1,4,3],[1,1,4,3],[1,1,1,4],[1,1,1,4],[1,1,1,4],[1,1,1,3]]' \
    '.head_stats == [{"head":0,"empty_rows":0,"mean_entropy":.head_stats[0].mean_entropy,"previous_token":null,"diagonal":null,"first_token":.head_stats[0].first_token,"max_weight":.head_stats[0].top[0].weight,"role":null,"top":[{"query":0,"key":2,"weight":.head_stats[0].top[0].weight,"entropy":.head_stats[0].top[0].entropy}]}]' \
    '.head_stats[0].top[0].weight > 0.4999 and .head_stats[0].top[0].weight < 0.5001'
jq_true "$W/d2l_empty_rows.json" \
    '.empty_rows == 20 and .options.masks.empty_rows == 20' \
    '.head_stats | all(.empty_rows == 4 and all(.top[]; .key == null and .weight == 0 and .entropy == 0))' \
    '.stages[10].note | test("20 rows with no allowed key")'
jq_true "$W/seed004_unbatched.json" \
    '.options.out_proj == false' \
    '[.stages[].shape] == [[5,8],[5,8],[5,8],[5,8],[5,8],[5,8],[2,5,4],[2,5,4],[2,5,4],[2,5,5],[2,5,5],[2,5,5],[2,5,4],[5,8],[5,8]]'

# Without --attn-weights or dumps, the JSON trace still carries every stage's stats.
run 0 "$A" mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors --format json
cp "$W/out" "$W/plain.json"
: > "$W/out"
jq_true "$W/plain.json" '.stages | all(.stats.min != null and .stats.max != null and .stats.mean != null)' \
    '.outputs == {"output": null, "attn_weights": null, "dumps": []}'

# --format json takes stdout: a tensor cannot go there too.
usage_error "$A" mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors --format json -o -
error_line "--format"

echo "trace json: $cases cases passed"
