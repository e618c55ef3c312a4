#!/usr/bin/python3
"""attntrace against PyTorch on the CPU, side by side in one run.

Usage: tests/bench/bench.py [--build build] [--reps 5] [--quick] [--skip-long]

For every case it prints the median wall time of attntrace's WHOLE process (load the .npy and the
params, compute, write the output) and of PyTorch's nn.MultiheadAttention forward ALONE (eval mode,
no_grad, same threads, in a fresh interpreter), the speed-up (torch time / attntrace time), and
attntrace's GFLOP/s as a share of OpenBLAS's own sgemm ceiling measured in the same run. PyTorch
is timed as installed and, when OpenBLAS misjudged the CPU, with the OPENBLAS_CORETYPE attntrace
uses. Peak RSS is the attntrace process's.
These are figures to read, not pass/fail tests: the machines are shared and noisy.
"""
import argparse, json, os, resource, statistics, struct, subprocess, sys, tempfile, time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "goldens"))
import st  # noqa: E402  the project's .safetensors writer and reader


def run_process(cmd):
    """Wall seconds and peak RSS (MiB) of one child process.

    The RSS comes from GNU time (/usr/bin/time, Debian package `time`) when it is there: a child
    forked straight from this Python process would report Python's own peak as its floor, since
    Linux carries the forked image's high-water mark across execve."""
    timed = os.path.exists("/usr/bin/time")
    rss_file = tempfile.NamedTemporaryFile(prefix="attntrace-rss-", delete=False).name
    full = ["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file] + cmd if timed else cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    rss = float(open(rss_file).read().split()[-1]) / 1024 if timed else usage.ru_maxrss / 1024
    os.unlink(rss_file)
    return wall, rss


def flops(b, lq, lk, e, h, need_weights):
    proj = 2 * b * (lq + 2 * lk) * e * e + 2 * b * lq * e * e
    attn = 2 * 2 * b * lq * lk * e  # Q·Kᵀ and weights·V over all heads
    return proj + attn


TORCH_SCRIPT = r"""
import statistics, sys, time, numpy as np, torch
x_path, params_path, heads, threads, need_weights, reps = sys.argv[1:7]
sys.path.insert(0, %r)
from st import read as load_safetensors
torch.set_num_threads(int(threads))
x = torch.from_numpy(np.load(x_path))
e = x.shape[-1]
m = torch.nn.MultiheadAttention(e, int(heads), batch_first=True).eval()
m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in load_safetensors(params_path).items()})
nw = need_weights == "1"
times = []
with torch.no_grad():
    m(x, x, x, need_weights=nw, average_attn_weights=False)  # warm-up
    for _ in range(int(reps)):
        t0 = time.perf_counter()
        m(x, x, x, need_weights=nw, average_attn_weights=False)
        times.append(time.perf_counter() - t0)
print(statistics.median(times))
""" % os.path.join(ROOT, "tests", "goldens")


def torch_forward(x_path, params_path, heads, threads, need_weights, reps, env):
    """Median seconds of PyTorch's forward alone, in a fresh interpreter with ENV."""
    out = subprocess.check_output(["/usr/bin/python3", "-c", TORCH_SCRIPT, x_path, params_path, str(heads),
                                   str(threads), "1" if need_weights else "0", str(reps)], env=env)
    return float(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer cases (no scaling sweep)")
    ap.add_argument("--skip-long", action="store_true", help="skip L=32768")
    args = ap.parse_args()
    exe = os.path.join(args.build, "attntrace")
    ceiling_exe = os.path.join(args.build, "tests", "sgemm_ceiling")
    work = tempfile.mkdtemp(prefix="attntrace-bench-")
    rng = np.random.default_rng(0)
    e, heads = 512, 8
    w = {"in_proj_weight": (rng.standard_normal((3 * e, e)) / np.sqrt(e)).astype(np.float32),
         "in_proj_bias": (0.1 * rng.standard_normal(3 * e)).astype(np.float32),
         "out_proj.weight": (rng.standard_normal((e, e)) / np.sqrt(e)).astype(np.float32),
         "out_proj.bias": (0.1 * rng.standard_normal(e)).astype(np.float32)}
    params_path = os.path.join(work, "params.safetensors")
    st.write(params_path, w)

    # OpenBLAS 0.3.21 does not recognise some newer CPUs and falls back to slow generic kernels;
    # attntrace then loads it again with OPENBLAS_CORETYPE set (see lib/include/attntrace/gemm.hpp).
    # The ceiling is measured with the kernels attntrace uses, and PyTorch (which calls the same
    # OpenBLAS) is timed both as it is and with the same fix; the faster one is the reference.
    first = subprocess.check_output([ceiling_exe, "256", "1"]).split()
    core, better = first[1].decode(), first[2].decode()
    fixed_env = dict(os.environ)
    if better != "-":
        fixed_env["OPENBLAS_CORETYPE"] = better
    torch_envs = {"as installed": dict(os.environ)}
    if better != "-":
        torch_envs[f"OPENBLAS_CORETYPE={better}"] = fixed_env
    ceilings = {t: float(subprocess.check_output([ceiling_exe, "2048", str(t)], env=fixed_env).split()[0])
                for t in (1, 2)}
    print(f"OpenBLAS chose {core} kernels" + (f"; attntrace uses {better}" if better != "-" else ""))
    print(f"OpenBLAS sgemm ceiling (2048^3, {better if better != '-' else core}): {ceilings[1]:.1f} GFLOP/s "
          f"with 1 thread, {ceilings[2]:.1f} GFLOP/s with 2 threads")

    def case(label, b, l, threads, need_weights, with_torch=True):
        x = rng.standard_normal((b, l, e)).astype(np.float32)
        xp = os.path.join(work, f"x_{b}_{l}.npy")
        np.save(xp, x)
        cmd = [exe, "mha", "-q", xp, "--heads", str(heads), "--params", params_path, "--trace", "none",
               "--threads", str(threads), "-o", os.path.join(work, "out.npy")]
        if need_weights:
            cmd += ["--attn-weights", os.path.join(work, "weights.npy")]
        runs = [run_process(cmd) for _ in range(args.reps)]
        ours = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        gflops = flops(b, l, l, e, heads, need_weights) / ours / 1e9
        row = {"case": label, "B": b, "L": l, "threads": threads, "weights": need_weights,
               "attntrace_s": ours, "peak_rss_mib": rss, "gflops": gflops,
               "ceiling_share": gflops / ceilings[threads]}
        torch_txt = "torch n/a"
        if with_torch:
            per_env = {name: torch_forward(xp, params_path, heads, threads, need_weights, args.reps, env)
                       for name, env in torch_envs.items()}
            row.update(torch_by_env=per_env, speedup_by_env={k: v / ours for k, v in per_env.items()})
            torch_txt = "  ".join(f"torch [{k}] {v:.3f} s = x{v / ours:.2f}" for k, v in per_env.items())
        print(f"{label:<28} B={b} L={l:<6} threads={threads} weights={'yes' if need_weights else 'no ':<3} "
              f"attntrace {ours:.3f} s  {torch_txt}  {gflops:.0f} GFLOP/s "
              f"({100 * row['ceiling_share']:.0f}% of sgemm)  peak RSS {rss:.0f} MiB", flush=True)
        return row

    rows = []
    rows.append(case("issue 3/target 2: with weights", 4, 512, 2, True))
    rows.append(case("target 1: long, no weights", 1, 4096, 2, False))
    if not args.skip_long:
        rows.append(case("target 3: very long", 1, 32768, 2, False, with_torch=False))

    # target 4: start-up, the atcold notebook example with --trace values
    a = [exe, "sdpa", "-q", os.path.join(ROOT, "data/atcold/q1.npy"), "-k", os.path.join(ROOT, "data/atcold/k.npy"),
         "-v", os.path.join(ROOT, "data/atcold/v.npy"), "--scale", "0.125", "--trace", "values"]
    if os.path.exists(a[3]):
        starts = sorted(run_process(a)[0] for _ in range(21))
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True)
        torch_import = time.perf_counter() - t0
        print(f"target 4: start-up (atcold sdpa, --trace values): median {1000 * statistics.median(starts):.1f} ms "
              f"(min {1000 * starts[0]:.1f} ms); python3 -c 'import torch': {1000 * torch_import:.0f} ms")

    if not args.quick:
        print("scaling (no weights):")
        for l in (512, 1024, 2048, 4096, 8192, 16384, 32768):
            if args.skip_long and l > 8192:
                break
            for threads in (1, 2):
                rows.append(case(f"scaling L={l}", 1, l, threads, False, with_torch=False))
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"ceilings": ceilings, "rows": rows}, f, indent=1)
    print(f"results: {os.path.join(work, 'results.json')}")


if __name__ == "__main__":
    main()
