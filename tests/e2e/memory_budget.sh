#!/usr/bin/env bash
# The memory budget (issue 5): a run whose (Lq, Lk) buffers would pass --max-memory is refused up
# front with exit 3 and one line saying how much it needs and how to avoid it; the same shape
# without those buffers takes the tiled path and runs; a bad --max-memory is a flag error.
source "$(dirname "$0")/cli_common.bash"

"$A" random --shape 1,512,16 --seed 1 -o "$W/x.npy"
# weights (1, 2, 512, 512) float32 = 2 MiB, over a 1 MiB budget: held whole for a JSON file
run 3 "$A" mha -q "$W/x.npy" --heads 2 --attn-weights "$W/w.json" --max-memory 1M
error_line "--max-memory: this run would need about" "2.0 MiB" "(1, 2, 512, 512)" "--attn-weights"
[ ! -e "$W/w.json" ] || fail "a refused run wrote its weights"
# ... but a .npy file takes them block by block as they are computed: nothing (Lq, Lk) is held,
# and the file equals the one written from whole weights (--trace values keeps them whole)
run 0 "$A" mha -q "$W/x.npy" --heads 2 --seed 0 --attn-weights "$W/w.npy" --max-memory 1M
run 0 "$A" mha -q "$W/x.npy" --heads 2 --seed 0 --attn-weights "$W/whole.npy" --trace values
run 0 "$A" compare "$W/w.npy" "$W/whole.npy" --rtol 0 --atol 0
# --trace values keeps scores, masked_scores and weights (plus the buffer): refused as well
run 3 "$A" mha -q "$W/x.npy" --heads 2 --trace values --max-memory 4M
error_line "--max-memory" "--trace values"
# a dumped (Lq, Lk) stage counts too
run 3 "$A" mha -q "$W/x.npy" --heads 2 --dump scores="$W/s.npy" --max-memory 1M
error_line "--dump scores"
# without a kept (Lq, Lk) stage the tiled path runs in the same budget
run 0 "$A" mha -q "$W/x.npy" --heads 2 --max-memory 1M -o "$W/o.npy" --trace none
[ -s "$W/o.npy" ] || fail "the tiled run wrote no output"
# sdpa is held to the budget too
"$A" random --shape 4,300,8 --seed 2 -o "$W/q.npy"
run 3 "$A" sdpa -q "$W/q.npy" -k "$W/q.npy" -v "$W/q.npy" --attn-weights "$W/w.json" --max-memory 100K
error_line "--max-memory" "(4, 300, 300)"
run 0 "$A" sdpa -q "$W/q.npy" -k "$W/q.npy" -v "$W/q.npy" --attn-weights "$W/w.npy" --max-memory 2M
# a size that is not a size
run 2 "$A" mha -q "$W/x.npy" --heads 2 --max-memory lots
error_line "--max-memory" "lots"
echo "memory budget: ok"
