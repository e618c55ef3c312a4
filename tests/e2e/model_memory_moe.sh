#!/usr/bin/env bash
# The memory claim of attntrace model for a mixture of experts (issue 36): a 1.3 GB random bf16
# Mixtral-like checkpoint made at test time (tests/goldens/make_big_checkpoint.py --family mixtral:
# E 1024, 8 experts of I 2816, top 2, ~140 MB of bf16 a layer, its experts included, 8+ layers) in
# the build folder, deleted after. The whole forward of 64 tokens with its next-token predictions
# and the routing written (--experts, --expert-weights) must peak at most at the largest layer's
# weights in float32 (all its experts, 280 MB), plus the activations, plus 200 MB: the layers are
# streamed and each expert is read (converted) only when a token chose it, its pages dropped after.
# Peak RSS from GNU time (-f %M). Skipped (77) with less than 3 GB free.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "$0")/cli_common.bash"
need_numpy
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time (Debian package time)"; exit 77; }
BIG="$(dirname "$(realpath "$A")")/model_memory_moe.big"
rm -rf "$BIG"
free=$(df -Pk "$(dirname "$BIG")" | awk 'NR == 2 { print $4 }')
[ "$free" -ge $((3 * 1024 * 1024)) ] || { echo "SKIP: $(( free / 1024 )) MB free next to the build, 3 GB needed"; exit 77; }
trap 'rm -rf "$W" "$BIG"' EXIT

"$PYTHON" "$SRC/tests/goldens/make_big_checkpoint.py" "$BIG" --gb 1.3 --seed 2 --family mixtral --hidden 1024 \
    --intermediate 2816 --heads 8 --kv-heads 2 --experts 8 --top-k 2 > "$W/made.json"
ids=$(seq -s, 100 163)  # 64 tokens
/usr/bin/time -f '%M' -o "$W/rss" "$A" model "$BIG" --ids "$ids" --top 3 --threads 2 --format json \
    --experts "$W/e.npy" --expert-weights "$W/w.npy" > "$W/out.json" || fail "attntrace model on the big MoE checkpoint: exit $?"
"$PYTHON" - "$W/made.json" "$W/rss" "$W/out.json" "$W/e.npy" "$W/w.npy" <<'PY'
import json, sys
import numpy as np
made, rss_kib, out = json.load(open(sys.argv[1])), int(open(sys.argv[2]).read().split()[-1]), json.load(open(sys.argv[3]))
experts, weights = np.load(sys.argv[4]), np.load(sys.argv[5])
E, I, L, V, X, threads = 1024, 2816, 64, 32000, 8, 2
layer = made["layer_bytes_f32"]
# the activations: the residual and normed rows, q/k/v, attention's rows and output, the router's
# scores, one expert's rows and middle (gate and up), the logits of one position, the head's blocks
activations = 4 * (10 * L * E + 4 * L * I + L * X + threads * 256 * L + V + threads * 512 * E)
limit = layer + activations + 200 * 2**20
rss = rss_kib * 1024
mb = lambda b: f"{b / 2**20:.0f} MB"
print(f"{made['layers']} MoE layers, {made['bytes'] / 1e9:.2f} GB bf16: peak RSS {mb(rss)}; limit {mb(limit)} = largest "
      f"layer (all its experts) in float32 {mb(layer)} + activations {mb(activations)} + 200 MB")
assert len(out["predictions"]["positions"][0]["top"]) == 3 and len(out["layers"]) == made["layers"], "the run is incomplete"
assert experts.shape == (made["layers"], L, 2) and weights.shape == experts.shape, (experts.shape, weights.shape)
assert np.allclose(weights.sum(-1), 1, atol=1e-5), "Mixtral's weights are renormalised"
if rss > limit:
    sys.exit(f"FAIL: peak RSS {mb(rss)} is over the limit {mb(limit)}")
if made["bytes"] < 1.2e9:
    sys.exit("FAIL: the checkpoint is under 1.2 GB")
PY
[ $? = 0 ] || fail "peak RSS"
echo "model_memory_moe: ok"
