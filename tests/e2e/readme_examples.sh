#!/usr/bin/env bash
# The console examples of README.md and of every docs/*.md page, run: every "$ attntrace ..." line
# of a ```console block (with its "\" continuation lines) is run from a scratch directory that
# sees the repository's data/ and tests/fixtures/, and what it prints must equal the lines the page
# shows under it. An example whose shown output is elided ("...") is run for its exit status only.
# So the documentation cannot drift.
# Text must match exactly; a printed float may differ from the README's by float32 rounding (one
# unit in its last printed digit + 1e-5 * max(1, |x|), tests/goldens/numtext.py), since BLAS
# kernels round differently from one CPU and OPENBLAS_CORETYPE to another; integers must be equal.
source "$(dirname "$0")/cli_common.bash"
SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
ln -s "$SRC/data" "$W/data"
mkdir -p "$W/tests"
ln -s "$SRC/tests/fixtures" "$W/tests/fixtures"
mkdir -p "$W/bin"
ln -s "$(realpath "$A")" "$W/bin/attntrace"

"$PYTHON" - "$SRC" "$W" <<'PY'
import glob, os, subprocess, sys
src, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tests", "goldens"))
import numtext
env = dict(os.environ, PATH=f"{work}/bin:" + os.environ["PATH"])
pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))


def examples_of(page):
    """(command, expected lines) of every "$ attntrace" line of PAGE's console blocks."""
    lines = open(page).read().split("\n")
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
    return examples


def run(name, cmd, expected):
    """Runs CMD; None when it does what page NAME shows, else what went wrong."""
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env, capture_output=True, text=True)
    got = r.stdout.rstrip("\n").split("\n") if r.stdout else []
    if r.returncode != 0:
        return f"FAIL ({name}, exit {r.returncode}): {cmd}\n{r.stderr}"
    if any(l.strip() == "..." for l in expected):
        return None  # output elided on the page
    if len(got) == len(expected) and all(numtext.compare(e, g)[0] for e, g in zip(expected, got)):
        return None
    for e, g in zip(expected + [""] * len(got), got + [""] * len(expected)):
        if e != g:
            return f"FAIL ({name}): {cmd}\n  {name}: {e!r}\n  actual: {g!r}"
    return f"FAIL ({name}): {cmd}"


failures = found = 0
for page in pages:
    name = os.path.relpath(page, src)
    for cmd, expected in examples_of(page):
        found += 1
        if " ... " in cmd:  # a shortened command line: not runnable as shown
            continue
        problem = run(name, cmd, expected)
        if problem:
            failures += 1
            print(problem)
print(f"examples of README.md and docs/: {found} found in {len(pages)} pages, {failures} failed")
sys.exit(1 if failures else 0)
PY
