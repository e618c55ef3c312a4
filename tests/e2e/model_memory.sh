#!/usr/bin/env bash
# The memory claim of attntrace model (issue 27): a multi-GB random bf16 Llama-like checkpoint made
# at test time (tests/goldens/make_big_checkpoint.py: 2.2 GB, E 2048, I 5632, 19+ layers of 90 MB
# in bf16, untied 131 MB embeddings and head, three shards) in the build folder, deleted after.
# The whole forward of 64 tokens with its next-token predictions (every layer and the LM head) must
# peak at most at the largest layer's weights in float32 (180 MB), plus the activations, plus
# 200 MB, whatever the layer count: the layers are streamed, the embeddings gathered by row and
# the head read in blocks. Peak RSS from GNU time (-f %M). Then the same for a 2.2 GB float32
# checkpoint (fewer layers), read in place. Skipped (77) with less than 4 GB free.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "$0")/cli_common.bash"
need_numpy
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time (Debian package time)"; exit 77; }
BIG="$(dirname "$(realpath "$A")")/model_memory.big"
rm -rf "$BIG"
free=$(df -Pk "$(dirname "$BIG")" | awk 'NR == 2 { print $4 }')
[ "$free" -ge $((4 * 1024 * 1024)) ] || { echo "SKIP: $(( free / 1024 )) MB free next to the build, 4 GB needed"; exit 77; }
trap 'rm -rf "$W" "$BIG"' EXIT

# bf16, converted to float32 layer by layer; then float32 (the same numbers), whose weights the run
# reads in place from the mapping and drops after each layer (the head block by block): the
# same limit holds, whereas pages kept mapped would count the whole file.
for dtype in bf16 f32; do
rm -rf "$BIG"
"$PYTHON" "$SRC/tests/goldens/make_big_checkpoint.py" "$BIG" --gb 2.2 --seed 1 $([ $dtype = f32 ] && echo --f32) \
    > "$W/made.json"
ids=$(seq -s, 100 163)  # 64 tokens
/usr/bin/time -f '%M' -o "$W/rss" "$A" model "$BIG" --ids "$ids" --top 3 --threads 2 --format json > "$W/out.json" ||
    fail "attntrace model on the big $dtype checkpoint: exit $?"
"$PYTHON" - "$W/made.json" "$W/rss" "$W/out.json" $dtype <<'PY'
import json, sys
made, rss_kib, out = json.load(open(sys.argv[1])), int(open(sys.argv[2]).read().split()[-1]), json.load(open(sys.argv[3]))
dtype = sys.argv[4]
E, I, L, V, threads = 2048, 5632, 64, 32000, 2
layer = made["layer_bytes_f32"]
# the activations: the residual and normed rows, q/k/v, attention's rows and output, the MLP's
# middle twice (SwiGLU), the logits of one position, the head's blocks of 512 rows per thread
activations = 4 * (8 * L * E + 2 * L * I + threads * 256 * L + V + threads * 512 * E)
limit = layer + activations + 200 * 2**20
rss = rss_kib * 1024
mb = lambda b: f"{b / 2**20:.0f} MB"
print(f"{made['layers']} layers, {made['bytes'] / 1e9:.2f} GB {dtype}: peak RSS {mb(rss)}; limit {mb(limit)} = largest "
      f"layer in float32 {mb(layer)} + activations {mb(activations)} + 200 MB")
assert len(out["predictions"]["positions"][0]["top"]) == 3 and len(out["layers"]) == made["layers"], "the run is incomplete"
if rss > limit:
    sys.exit(f"FAIL: peak RSS {mb(rss)} is over the limit {mb(limit)}")
if made["bytes"] < 2e9:
    sys.exit("FAIL: the checkpoint is under 2 GB")
PY
done
