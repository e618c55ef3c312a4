#!/usr/bin/env bash
# The console examples of README.md and docs/*.md, run: every "$ attntrace ..." line of a ```console
# block (with its "\" continuation lines) is run by bash from a scratch directory that sees the
# repository's data/ and tests/ (tests/fixtures), and what it prints must equal the lines the
# page shows under it. An example whose shown output
# is elided ("...") is run for its exit status only. So the documentation cannot drift.
# Text must match exactly; a printed float may differ from the README's by float32 rounding (one
# unit in its last printed digit + 1e-5 * max(1, |x|), tests/goldens/numtext.py), since BLAS
# kernels round differently from one CPU and OPENBLAS_CORETYPE to another; integers must be equal.
source "$(dirname "$0")/cli_common.bash"
SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
ln -s "$SRC/data" "$W/data"
ln -s "$SRC/tests" "$W/tests"
mkdir -p "$W/bin"
ln -s "$(realpath "$A")" "$W/bin/attntrace"

"$PYTHON" - "$SRC" "$W" <<'PY'
import glob, os, subprocess, sys
src, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tests", "goldens"))
import numtext
pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
lines = [line for page in pages for line in open(page, encoding="utf-8").read().split("\n") + ["```"]]
env = dict(os.environ, PATH=f"{work}/bin:" + os.environ["PATH"])
examples, i, in_block = [], 0, False
while i < len(lines):
    line = lines[i]
    if line.strip().startswith("```console"):
        in_block = True
    elif line.strip().startswith("```"):
        in_block = False
    elif in_block and line.lstrip().startswith("$ attntrace"):
        indent = len(line) - len(line.lstrip())
        cmd = line.lstrip()[2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        out = []
        while i + 1 < len(lines) and not lines[i + 1].lstrip().startswith(("$ ", "```")):
            i += 1
            out.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
        while out and out[-1] == "":
            out.pop()
        examples.append((cmd, out))
    i += 1

failures = 0
for cmd, expected in examples:
    if " ... " in cmd:  # a shortened command line: not runnable as shown
        continue
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env, capture_output=True, text=True)
    got = r.stdout.rstrip("\n").split("\n") if r.stdout else []
    if r.returncode != 0:
        failures += 1
        print(f"FAIL (exit {r.returncode}): {cmd}\n{r.stderr}")
    elif any(l.strip() == "..." for l in expected):
        continue  # output elided in the README
    elif len(got) != len(expected) or not all(numtext.compare(e, g)[0] for e, g in zip(expected, got)):
        failures += 1
        print(f"FAIL: {cmd}")
        for e, g in zip(expected + [""] * len(got), got + [""] * len(expected)):
            if e != g:
                print(f"  README: {e!r}\n  actual: {g!r}")
                break
print(f"README and docs examples: {len(examples)} found, {failures} failed")
sys.exit(1 if failures else 0)
PY
