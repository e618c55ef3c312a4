#!/usr/bin/env bash
# The library's messages speak of parameters and options by their meaning ("the prefix 'x.'",
# "turn the output projection off", "the given scale", tests/unit); the command line names the flag
# that sets them. Each case: the CLI's one error line (or report) names the flag.
source "$(dirname "$0")/cli_common.bash"

P="$FIXTURES/params/good/prefixed.safetensors"
"$A" random --shape 2,3,5 --seed 1 -o "$W/x.npy"
mha=("$A" mha -q "$W/x.npy" --heads 1 --params "$P" --trace none)

# parameter names under a prefix: the hint and the refusals name --prefix and --no-out-proj
run 3 "${mha[@]}"
error_line "; to use names under a prefix, pass --prefix encoder.layers.0.self_attn."
run 3 "${mha[@]}" --prefix decoder.
error_line "no tensor name starts with --prefix 'decoder.'"
run 3 "${mha[@]}" --prefix encoder.layers.1.self_attn.
error_line "no output projection" "; pass --no-out-proj to concatenate the heads without one"

# a .safetensors file given as a tensor: mha's --params takes it
run 3 "$A" sdpa -q "$P" -k "$P" -v "$P"
error_line "a .safetensors file holds named tensors: give it to mha --params"

# an output with no format: --to where the command has it, nothing where it has none
usage_error "$A" convert "$W/x.npy" "$W/x.txt"
error_line "x.txt: cannot tell the format from the extension; use .npy or .json (or --to)"
usage_error "$A" mha -q "$W/x.npy" --heads 1 -o "$W/x.txt" --trace none
error_line "x.txt: cannot tell the format from the extension; use .npy or .json"
! grep -q "or --to\|name the format" "$W/err" || fail "mha, which has no --to, offers one: $(cat "$W/err")"

# check's diagnosis names --scale as the origin of the reference's scale
C="$FIXTURES/check/missing_scale"
run 1 "$A" check "$C/stages" --sdpa -q "$C/q.npy" -k "$C/k.npy" -v "$C/v.npy" --scale 0.3
grep -q "^diagnosis: missing_scale: scores not multiplied by the scale 0.3 = --scale" "$W/out" ||
    fail "the diagnosis does not name --scale: $(tail -1 "$W/out")"

# a checkpoint's text says how mha runs each layer
run 0 "$A" info "$FIXTURES/models/mistral"
grep -q "^  --model --layer 2: RMSNorm" "$W/out" || fail "info does not show --model --layer"

echo "flag names: ok"
