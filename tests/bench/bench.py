#!/usr/bin/python3
"""attntrace against PyTorch on the CPU, side by side in one run.

Usage: tests/bench/bench.py [--build build] [--reps 5] [--quick] [--skip-long]

For every case it prints the median wall time of attntrace's WHOLE process (load the .npy and the
params, compute, write the output) and of PyTorch's nn.MultiheadAttention forward ALONE (eval mode,
no_grad, same threads), the ratio, and attntrace's GFLOP/s as a share of OpenBLAS's own sgemm
ceiling measured in the same run. Peak RSS comes from wait4() on the child process.
These are figures to read, not pass/fail tests: the machines are shared and noisy.
"""
import argparse, json, os, resource, statistics, struct, subprocess, sys, tempfile, time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_process(cmd):
    """Wall seconds and peak RSS (MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_maxrss / 1024


def flops(b, lq, lk, e, h, need_weights):
    proj = 2 * b * (lq + 2 * lk) * e * e + 2 * b * lq * e * e
    attn = 2 * 2 * b * lq * lk * e  # Q·Kᵀ and weights·V over all heads
    return proj + attn


def torch_forward(x, params, heads, threads, need_weights, reps):
    import torch
    torch.set_num_threads(threads)
    e = x.shape[-1]
    m = torch.nn.MultiheadAttention(e, heads, batch_first=True).eval()
    m.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
    xt = torch.from_numpy(x)
    times = []
    with torch.no_grad():
        m(xt, xt, xt, need_weights=need_weights, average_attn_weights=False)  # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            m(xt, xt, xt, need_weights=need_weights, average_attn_weights=False)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    save_safetensors(params_path, w)

    ceilings = {t: float(subprocess.check_output([ceiling_exe, "2048", str(t)])) for t in (1, 2)}
    print(f"OpenBLAS sgemm ceiling (2048^3): {ceilings[1]:.1f} GFLOP/s with 1 thread, "
          f"{ceilings[2]:.1f} GFLOP/s with 2 threads")

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
        if with_torch:
            theirs = torch_forward(x, w, heads, threads, need_weights, args.reps)
            row.update(torch_s=theirs, speedup=theirs / ours)
        torch_txt = f"torch {row['torch_s']:.3f} s  speed-up x{row['speedup']:.2f}" if with_torch else "torch n/a"
        print(f"{label:<28} B={b} L={l:<6} threads={threads} weights={'yes' if need_weights else 'no ':<3} "
              f"attntrace {ours:.3f} s  {torch_txt}  {gflops:.0f} GFLOP/s "
              f"({100 * row['ceiling_share']:.0f}% of sgemm)  peak RSS {rss:.0f} MiB", flush=True)
        return row

    rows = []
    rows.append(case("target 2: with weights", 4, 512, 2, True))
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
