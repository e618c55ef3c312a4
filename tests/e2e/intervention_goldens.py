"""The four analyses on every full_* fixture against golden/interventions.json (see
tests/goldens/make_intervention_goldens.py for what each value is).

Tolerances: float64 runs agree to 1e-9 relative (float64 rounding through a few layers); float32
runs carry float32 rounding of a float64 computation through 2-4 layers, as model_goldens.sh
allows (1e-4 relative, 1e-5 absolute of the largest magnitude), applied to each raw metric; a
patching value is a difference of metrics divided by m_clean - m_corrupt, so its tolerance is the
metric's divided by that gap. The lens's top token is compared where the golden's top two
probabilities differ by more than the tolerance.

argv: attntrace models_dir scratch_dir
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

attntrace, models, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
failures, checks = [], 0


def run(*args):
    out = subprocess.run([attntrace, *map(str, args)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"attntrace {' '.join(map(str, args))}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def close(name, got, want, rtol, atol):
    global checks
    checks += 1
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        diff = np.abs(got - want).max() if got.shape == want.shape else "shape"
        failures.append(f"{name}: max |diff| {diff} (rtol {rtol}, atol {atol:.2g})")


def check_case(folder, g, dtype):
    ids = folder / "ids.npy"
    rtol, atol0 = (1e-4, 1e-5) if dtype == "f32" else (1e-9, 1e-10)
    name = f"{folder.name}/{dtype}"
    pos, target, versus = g["position"], g["target"], g["versus"]
    common = ["--dtype", dtype, "--format", "json"]

    lens = json.loads(run("lens", folder, "--ids", ids, "--target-id", target, "--top", 2, *common))
    probs = np.array([[p["target"]["probability"] for p in layer["positions"]] for layer in lens["layers"]])
    close(f"{name} lens target probability", probs, g["lens"]["target_probability"], rtol, atol0)
    top_p = np.array([[p["top"][0]["probability"] for p in layer["positions"]] for layer in lens["layers"]])
    close(f"{name} lens top probability", top_p, g["lens"]["top_probability"], rtol, atol0)
    second = np.array([[p["top"][1]["probability"] for p in layer["positions"]] for layer in lens["layers"]])
    top = np.array([[p["top"][0]["id"] for p in layer["positions"]] for layer in lens["layers"]])
    clear = (second < np.array(g["lens"]["top_probability"]) - 1e-3)
    global checks
    checks += 1
    if not (top[clear] == np.array(g["lens"]["top"])[clear]).all():
        failures.append(f"{name} lens top tokens differ")

    scale = max(1.0, abs(g["ablate"]["clean"]))
    for mode in ("zero", "mean"):
        out = work / f"{folder.name}_{mode}.npy"
        run("ablate", folder, "--ids", ids, "--heads", "each", "--ablation", mode, "--target-id", target,
            "--position", pos, "-o", out, *common)
        close(f"{name} ablate each {mode}", np.load(out), g["ablate"][mode], rtol, atol0 * scale * 10)
    lst = g["ablate"]["list"]
    heads = ",".join(f"{l}.{h}" for l, h in lst["heads"])
    one = json.loads(run("ablate", folder, "--ids", ids, "--heads", heads, "--target-id", target,
                         "--position", pos, *common))
    close(f"{name} ablate list", [one["metric"]["clean"], one["ablated"]["metric"], one["ablated"]["kl"]],
          [g["ablate"]["clean"], lst["metric"], lst["kl"]], rtol, atol0 * scale * 10)
    diff = json.loads(run("ablate", folder, "--ids", ids, "--heads", heads, "--target-id", target, "--versus-id", versus,
                          "--position", pos, *common))
    close(f"{name} ablate list logit_diff", [diff["metric"]["clean"], diff["ablated"]["metric"]],
          [lst["clean_logit_diff"], lst["logit_diff"]], rtol, atol0 * scale * 10)

    if g["attribute"] is not None:
        a = json.loads(run("attribute", folder, "--ids", ids, "--target-id", target, "--versus-id", versus,
                           "--position", pos, *common))
        want = g["attribute"]
        kinds = [c["kind"] for c in a["components"]]
        checks += 1
        if kinds != [c[0] for c in want["components"]]:
            failures.append(f"{name} attribute components {kinds} != {[c[0] for c in want['components']]}")
        else:
            s = max(1.0, max(abs(c[3]) for c in want["components"]))
            close(f"{name} attribute components", [c["value"] for c in a["components"]],
                  [c[3] for c in want["components"]], rtol, atol0 * s * 10)
        close(f"{name} attribute value and sum", [a["metric"]["value"], a["sum"]], [want["value"], want["value"]],
              rtol, atol0 * max(1.0, abs(want["value"])) * 10)

    p = g["patch"]
    gap = abs(p["clean"] - p["corrupt"])
    metric_tol = atol0 * 10 * max(1.0, abs(p["clean"]), abs(p["corrupt"])) + rtol * max(abs(p["clean"]), abs(p["corrupt"]))
    corrupt = ",".join(map(str, g["corrupt_ids"]))
    clean = ",".join(map(str, np.load(ids)))
    for site in ("head", "resid", "attn", "mlp"):
        out = work / f"{folder.name}_{site}.npy"
        doc = json.loads(run("patch", folder, "--clean-ids", clean, "--corrupt-ids", corrupt, "--target-id", target,
                             "--versus-id", versus, "--position", pos, "--site", site, "-o", out, *common))
        close(f"{name} patch metric", [doc["metric"]["clean"], doc["metric"]["corrupt"]], [p["clean"], p["corrupt"]],
              0, metric_tol)
        close(f"{name} patch {site}", np.load(out), p[site], 0, 2 * metric_tol / gap)


cases = 0
for folder in sorted(models.glob("full_*")):
    golden = folder / "golden" / "interventions.json"
    if not golden.exists():
        continue
    cases += 1
    g = json.loads(golden.read_text())
    for dtype in ("f32", "f64"):
        try:
            check_case(folder, g, dtype)
        except RuntimeError as e:
            failures.append(f"{folder.name}/{dtype}: {e}")
for f in failures:
    print("FAIL", f)
print(f"intervention goldens: {cases} models, {checks - len(failures)} of {checks} checks passed")
sys.exit(1 if failures or cases == 0 else 0)
