#!/usr/bin/python3
"""attntrace against PyTorch on the CPU, side by side in one run, at one or more thread counts.

Usage: tests/bench/bench.py [--build build] [--threads 2] [--python /usr/bin/python3] [--reps 5]
                            [--quick] [--skip-long] [--json FILE] [--markdown FILE]
       tests/bench/bench.py --attention-only [--threads 2] [--reps 7] [--baseline OLD-attntrace]
Issue 38's attention case alone (L = 4096, no PyTorch): each of the REPS rounds runs the sgemm
ceiling, the --baseline binary when given, then attntrace, back to back; both shares are medians
of the same rounds, so a before/after comparison is interleaved.
Many-core mode: tests/bench/bench.py --build build --threads 1,2,4,8,16 --python python3 --quick
(thread counts above this machine's cores are skipped with a note).
On a machine without Debian's packages (the device machine), pack the build and Debian's OpenBLAS
with tests/bench/device_bundle.sh and run with LD_LIBRARY_PATH=.device-bundle/lib --build .device-bundle/build.

The cases are issue 14's table, each at every thread count given:
  weights  B=4 L=512, per-head weights written (attntrace --attn-weights FILE; PyTorch
           need_weights=True, average_attn_weights=False)
  L=4096   B=1 L=4096, no weights
  L=32768  B=1 L=32768, no weights (--skip-long skips it; PyTorch MHA is not run: it would hold
           the L x L weights, 32 GiB)
  start-up the atcold example (`sdpa` on data/atcold with --trace values), median of 101 runs
           by hyperfine when installed (else 21 from Python), next to /bin/true's
all with E=512, H=8, float32; and issue 27's whole model (tests/bench/model_bench.py): a
GPT-2-small-shaped random checkpoint, L=256, every layer and the logits, `attntrace model` as a
whole process against the same forward in PyTorch float32 eager (--model-only runs it alone).

For every case it measures the median wall time of attntrace's WHOLE process (load the .npy and
the .safetensors params, compute, write the output and the weights), and PyTorch's warm compute
alone (eval, no_grad, the same thread count, in a fresh interpreter of --python, after one
warm-up call) of two references doing the same work:
  PyTorch MHA   torch.nn.MultiheadAttention(batch_first=True).forward(x, x, x)
  PyTorch SDPA  F.linear in-projection, split heads, F.scaled_dot_product_attention, merge heads,
                F.linear out-projection (PyTorch >= 2.0; "n/a (torch X.Y)" before that)
ratio = PyTorch time / attntrace time (above 1: attntrace is faster). The goal column holds
issue 14's goals (the 2-thread ones were set against PyTorch 1.13, the many-core ones against
PyTorch 2.x), issue 29's (L = 4096 at >= 85% of the sgemm ceiling on 1 thread; start-up <= 5 ms
and within 2 ms of /bin/true) and issue 38's (L = 4096 at >= 90% of the ceiling on 2 threads; the
whole model >= 1.0x PyTorch's fastest layout and >= 85% of the ceiling on 2 threads). The PyTorch
scripts also check attntrace's output against theirs (max |difference|; above 1e-3 the run is
reported as wrong and bench.py exits 1).

Ceilings, measured in the same run at each thread count:
  sgemm  OpenBLAS's sgemm GFLOP/s at 2048^3 (build/tests/sgemm_ceiling) with the kernels
         attntrace uses; each case's share = attntrace's GFLOP/s (projections + Q.K^T + weights.V
         over its whole process time) / the ceiling. Where a share has a goal (L = 4096 on 1 and 2
         threads), each of the REPS runs follows its own ceiling measurement, back to back, and the
         share is the median of those rounds' shares: the machine's minute moves both alike.
  memory build/tests/membw_ceiling with the weights file's size: GB/s for filling fresh anonymous
         pages (4 KiB and transparent huge pages), filling a new file's page cache through a
         shared mmap and through pwrite, and memcpy between resident buffers (see its header).
         The weights case's share = bytes attntrace wrote (output + weights files) / its whole
         process time, over the best page-cache rate (mmap or pwrite): a lower bound of the share
         the write itself reaches, since the process time also holds the compute.
  cores  busy cores = attntrace's CPU time (user + system, median) / its wall time (median): the
         cores its threads kept busy on average. The threads minus that is the part of the run
         spent on fewer cores (the process start, the reads, loading OpenBLAS, the end) or waiting
         (a lock, the disk): what stops a run from scaling with cores.
  by CPU one-thread sgemm pinned to each CPU (the first 16), as a note: an uneven machine (a VM
         whose CPU 0 is slower) holds back every product split evenly over the threads. A note
         also says when the hypervisor's free page reporting is on: fresh memory (what a whole
         process pays and a warm PyTorch forward does not) then costs what the gap since other
         processes freed theirs decides.

OpenBLAS 0.3.21 does not recognise some newer CPUs and falls back to slow generic kernels;
attntrace then loads it again with OPENBLAS_CORETYPE set (lib/include/attntrace/tensor/gemm.hpp). A
PyTorch that calls OpenBLAS (Debian's) is timed both as installed and with the same variable, and
the faster is the reference; one built on MKL (pip wheels) is timed as installed only.

It prints one line per measurement as it goes, then a Markdown table in issue 14's layout with a
header line (date, CPU, cores, OpenBLAS kernels, PyTorch version), and writes the results JSON.
Without --quick it also sweeps L = 512 .. 32768 (to 8192 with --skip-long) without weights at 1
thread and each thread count, attntrace alone, for time and peak memory against L.
These are figures to read, not pass/fail tests: the machines are shared and noisy.
"""
import argparse, datetime, glob, json, os, shlex, shutil, statistics, subprocess, sys, tempfile, time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "goldens"))
import st  # noqa: E402  the project's .safetensors writer and reader
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import model_bench  # noqa: E402  issue 27's whole-model case

E, HEADS = 512, 8
WRONG = 1e-3  # max |attntrace - PyTorch| above which a run is reported as wrong


def run_process(cmd):
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system, all threads) of one child
    process.

    The RSS comes from GNU time (/usr/bin/time, Debian package `time`) when it is there: a child
    forked straight from this Python process would report Python's own peak as its floor, since
    Linux carries the forked image's high-water mark across execve. The CPU time comes from wait4
    (with GNU time in between it holds GNU time's own, a fraction of a millisecond)."""
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
    return wall, rss, usage.ru_utime + usage.ru_stime


def startup_times(cmd):
    """Sorted wall seconds of runs of CMD (see Bench.startup)."""
    hyperfine = shutil.which("hyperfine")
    if not hyperfine:
        return sorted(run_process(cmd)[0] for _ in range(21))
    with tempfile.NamedTemporaryFile(prefix="attntrace-hyperfine-", suffix=".json") as out:
        subprocess.run([hyperfine, "-N", "-w", "10", "-r", "101", "--export-json", out.name, "--style", "none",
                        " ".join(shlex.quote(c) for c in cmd)], check=True, stdout=subprocess.DEVNULL)
        return sorted(json.load(open(out.name))["results"][0]["times"])


def flops(b, lq, lk, e):
    """Multiply-adds x 2 of one mha forward: the four projections, Q.K^T and weights.V."""
    proj = 2 * b * (lq + 2 * lk) * e * e + 2 * b * lq * e * e
    attn = 2 * 2 * b * lq * lk * e
    return proj + attn


# Run by --python in a fresh interpreter. Self-contained (no numpy, no project imports) so that any
# interpreter with torch can run it. argv: x.npy params.safetensors attntrace-out.npy
# attntrace-weights.npy (or -) heads threads need_weights(0/1) reps kernels(mha,sdpa). Prints one
# JSON object: torch version, median seconds per kernel (null: not available), and the max
# |attntrace - kernel| of the outputs (and of MHA's weights, when written).
TORCH_SCRIPT = r"""
import ast, json, statistics, struct, sys, time
import torch
import torch.nn.functional as F

x_path, params_path, out_path, weights_path, heads, threads, need_weights, reps, kernels = sys.argv[1:10]

def read_npy(path):  # float32, C order, format 1.x or 2.x
    data = open(path, "rb").read()
    n, start = (struct.unpack("<H", data[8:10])[0], 10) if data[6] == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + n].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    return torch.frombuffer(bytearray(data[start + n:]), dtype=torch.float32).reshape(header["shape"])

def read_safetensors(path):  # F32 tensors only
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    out = {}
    for name, meta in json.loads(data[8:8 + n]).items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", meta
        b, e = meta["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(meta["shape"])
    return out

def median_warm(forward):  # (median seconds, output of the warm-up call)
    with torch.no_grad():
        first = forward()
        times = []
        for _ in range(int(reps)):
            t0 = time.perf_counter()
            forward()
            times.append(time.perf_counter() - t0)
    return statistics.median(times), first

torch.set_num_threads(int(threads))
x = read_npy(x_path)                      # (B, L, E)
B, L, E = x.shape
H = int(heads)
P = E // H
params = read_safetensors(params_path)
ours = read_npy(out_path)                 # attntrace's output, (B, L, E)
result = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}

if "mha" in kernels:
    m = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    m.load_state_dict(params)
    nw = need_weights == "1"
    result["mha"], out = median_warm(lambda: m(x, x, x, need_weights=nw, average_attn_weights=False))
    result["mha_max_diff"] = float((out[0] - ours).abs().max())
    if nw and weights_path != "-":  # attntrace's (B, H, L, L) weights against MHA's
        result["mha_weights_max_diff"] = float((out[1] - read_npy(weights_path)).abs().max())

if "sdpa" in kernels:
    if hasattr(F, "scaled_dot_product_attention"):
        w_in, b_in = params["in_proj_weight"], params["in_proj_bias"]         # (3E, E), (3E)
        w_out, b_out = params["out_proj.weight"], params["out_proj.bias"]     # (E, E), (E)
        def sdpa_forward():
            qkv = F.linear(x, w_in, b_in).view(B, L, 3, H, P).permute(2, 0, 3, 1, 4)  # 3 x (B, H, L, P)
            o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])             # (B, H, L, P)
            return F.linear(o.transpose(1, 2).reshape(B, L, E), w_out, b_out)      # (B, L, E)
        result["sdpa"], out = median_warm(sdpa_forward)
        result["sdpa_max_diff"] = float((out - ours).abs().max())
    else:
        result["sdpa"] = None
print(json.dumps(result))
"""


def torch_info(python):
    """(version, BLAS_INFO) of the PyTorch that PYTHON imports, or (None, error) when it has none."""
    probe = ("import re, torch; m = re.search(r'BLAS_INFO=(\\w+)', torch.__config__.show()); "
             "print(torch.__version__, m.group(1) if m else '?')")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    version, blas = out.stdout.split()
    return version, blas


def short_version(version):
    return ".".join(version.split(".")[:2])


def torch_forward(python, paths, threads, need_weights, reps, kernels, env):
    """The TORCH_SCRIPT's JSON result for one case, in a fresh interpreter with ENV."""
    out = subprocess.check_output([python, "-c", TORCH_SCRIPT, *paths, str(HEADS),
                                   str(threads), "1" if need_weights else "0", str(reps), ",".join(kernels)], env=env)
    return json.loads(out)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def core_speeds(build, env=None, most=16):
    """One-thread sgemm GFLOP/s on each CPU this process may use (the first MOST), each run pinned
    to its CPU: on a VM one vCPU can be much slower than another (the AMD EPYC VM's CPU 0 ran 145-150
    against CPU 1's 165-175 GFLOP/s), and a product split evenly over two threads then waits for the
    slower one. An empty dict where pinning is not possible."""
    exe = os.path.join(build, "tests", "sgemm_ceiling")
    speeds = {}
    for cpu in sorted(os.sched_getaffinity(0))[:most]:
        try:
            out = subprocess.check_output([exe, "2048", "1"], env=env,
                                          preexec_fn=lambda c=cpu: os.sched_setaffinity(0, {c}))
        except (OSError, subprocess.CalledProcessError):
            return {}
        speeds[cpu] = float(out.split()[0])
    return speeds


def page_reporting_note():
    """A note when the hypervisor takes back free memory (virtio-balloon free page reporting): free
    blocks of 2^order pages go back to the host about 2 s after they are freed, and a page allocated
    from them costs a host fault as well, so fresh memory runs at a speed the gap since other
    processes freed theirs decides (measured on the AMD EPYC VM: 2 MiB pages populated at about 20 GB/s
    right after a free, 0.6-1.2 GB/s after a 4 s pause). Empty where it is off or cannot be read."""
    try:
        order = int(open("/sys/module/page_reporting/parameters/page_reporting_order").read())
    except (OSError, ValueError):
        return ""
    kib = 4 << order  # 4 KiB pages
    block = f"{kib >> 10} MiB" if kib >= 1024 else f"{kib} KiB"
    for device in glob.glob("/sys/bus/virtio/devices/*"):
        try:
            is_balloon = open(os.path.join(device, "device")).read().strip() == "0x0005"
            features = open(os.path.join(device, "features")).read().strip()
        except OSError:
            continue
        if is_balloon and len(features) > 5 and features[5] == "1":  # VIRTIO_BALLOON_F_REPORTING
            return (f"the hypervisor's free page reporting is on (free blocks of {block} and up go back "
                    "to the host): fresh memory's speed here depends on how long ago other processes freed theirs")
    return ""


def parse_threads(text, cores):
    """The thread counts asked for that this machine can run, and a note on those it cannot."""
    try:
        asked = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        asked = []
    if not asked or asked[0] < 1:
        sys.exit(f"--threads {text}: give positive thread counts, e.g. 1,2,4,8,16")
    kept = [t for t in asked if t <= cores]
    skipped = [t for t in asked if t > cores]
    note = f"skipped {', '.join(map(str, skipped))} threads: this machine has {cores} CPUs" if skipped else ""
    return kept, note


def measure_ceilings(build, threads, weights_bytes, work, env):
    """sgemm GFLOP/s and memory GB/s (membw_ceiling's fields) per thread count."""
    membw_exe = os.path.join(build, "tests", "membw_ceiling")
    sgemm, membw = {}, {}
    for t in threads:
        sgemm[t] = model_bench.sgemm_gflops(build, t, env)
        if os.path.exists(membw_exe):
            fields = subprocess.check_output([membw_exe, str(weights_bytes), str(t), work]).decode().split()
            membw[t] = {k: float(v) for k, v in zip(fields[::2], fields[1::2])}
    if not membw:
        print(f"note: {membw_exe} is not built (cmake --build BUILD --target membw_ceiling); "
              "no memory-bandwidth shares", flush=True)
    return sgemm, membw


def goals(key, threads):
    """The goals of a case at a thread count: [(kernel, minimum ratio)] against PyTorch (issue 14),
    or for start-up a bound in ms (issue 14) and one over /bin/true (issue 29)."""
    if key == "weights":
        return [("mha", 2.0 if threads <= 2 else 1.0)]
    if key == "L4096":
        return [("mha", 3.0)] if threads <= 2 else [("sdpa", 1.5), ("mha", 3.0)]
    if key == "L32768":
        return [("sdpa", 2.0)]
    return 5.0  # start-up, ms


def share_goal(key, threads):
    """The goal for the share of the sgemm ceiling: the L = 4096 case, 85% on one thread (issue 29)
    and 90% on two (issue 38; issue 29 asked 80%) (None: no goal)."""
    if key != "L4096" or threads not in (1, 2):
        return None
    return 0.85 if threads == 1 else 0.90


TRUE_MARGIN_MS = 2.0  # issue 29: start-up within 2 ms of /bin/true, measured in the same run


def met(ok):
    return "met" if ok else "not met"


def goal_text(row):
    """The goal cell: each goal with met / not met / n/a (no reference measured)."""
    g = goals(row["key"], row["threads"])
    if not isinstance(g, list):
        start, floor = row["attntrace_s"] * 1e3, row["true_s"] * 1e3
        return (f"≤ {g:g} ms: {met(start <= g)}; ≤ /bin/true + {TRUE_MARGIN_MS:g} ms: "
                f"{met(start <= floor + TRUE_MARGIN_MS)}")
    parts = []
    for kernel, bound in g:
        ratio = row.get("ratio", {}).get(kernel)
        state = "n/a" if ratio is None else ("met" if ratio >= bound else "not met")
        parts.append(f"≥ {bound:g}× {kernel.upper()}: {state}")
    share = share_goal(row["key"], row["threads"])
    if share is not None and "ceiling_share" in row:
        parts.append(f"≥ {100 * share:.0f}% of sgemm: {met(row['ceiling_share'] >= share)}")
    return "; ".join(parts)


# key, label, B, L, weights written, PyTorch kernels to time, notes for the kernels not timed
CASES = [
    ("weights", "B=4 L=512, weights written", 4, 512, True, ["mha"], {"sdpa": "n/a (returns no weights)"}),
    ("L4096", "B=1 L=4096, no weights", 1, 4096, False, ["mha", "sdpa"], {}),
    ("L32768", "B=1 L=32768, no weights", 1, 32768, False, ["sdpa"],
     {"mha": "not run (L×L weights: 32 GiB)"}),
]


def coretype_note(build):
    """A note when OPENBLAS_CORETYPE, set by the environment, names kernels slower than those OpenBLAS
    picks for this CPU by itself: the ceiling, PyTorch and attntrace's OpenBLAS products then all run
    the slower ones (attntrace leaves a variable the user set alone). Seen on an AMD EPYC VM whose
    environment sets Haswell (AVX2) on a CPU with AVX-512: 181 against 351 GFLOP/s."""
    core = os.environ.get("OPENBLAS_CORETYPE")
    if not core:
        return ""
    unset = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    tool = os.path.join(build, "tests", "sgemm_ceiling")
    as_set = float(subprocess.check_output([tool, "2048", "1"]).split()[0])
    own = subprocess.check_output([tool, "2048", "1"], env=unset).split()
    if float(own[0]) < 1.1 * as_set:
        return ""
    return (f"OPENBLAS_CORETYPE={core}, set by the environment, runs sgemm at {as_set:.0f} GFLOP/s on 1 thread here "
            f"against {float(own[0]):.0f} with the {own[1].decode()} kernels OpenBLAS picks by itself: the ceiling, "
            f"PyTorch and attntrace's OpenBLAS products all use {core}; run under `env -u OPENBLAS_CORETYPE` for the "
            f"machine's own")


class Bench:
    """One run: the executables, the work folder, the PyTorch to compare with, and the ceilings."""

    def __init__(self, args, work):
        self.args, self.work = args, work
        self.exe = os.path.join(args.build, "attntrace")
        self.params = os.path.join(work, "params.safetensors")
        rng = np.random.default_rng(0)
        self.rng = rng
        st.write(self.params, {
            "in_proj_weight": (rng.standard_normal((3 * E, E)) / np.sqrt(E)).astype(np.float32),
            "in_proj_bias": (0.1 * rng.standard_normal(3 * E)).astype(np.float32),
            "out_proj.weight": (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float32),
            "out_proj.bias": (0.1 * rng.standard_normal(E)).astype(np.float32)})
        first = subprocess.check_output([os.path.join(args.build, "tests", "sgemm_ceiling"), "256", "1"]).split()
        self.core, self.better = first[1].decode(), first[2].decode()
        self.fixed_env = dict(os.environ)
        if self.better != "-":
            self.fixed_env["OPENBLAS_CORETYPE"] = self.better
        self.torch_version, self.torch_blas = torch_info(args.python)
        # A PyTorch on MKL does not load OpenBLAS: OPENBLAS_CORETYPE would change nothing for it.
        self.torch_envs = {"as installed": dict(os.environ)}
        if self.better != "-" and self.torch_blas != "mkl":
            self.torch_envs[f"OPENBLAS_CORETYPE={self.better}"] = self.fixed_env
        self.wrong = []
        self.weights_bytes = 4 * HEADS * 512 * 512 * 4  # the weights case's (B, H, L, L) float32

    def torch_missing(self, kernel):
        """Why KERNEL cannot be timed with this PyTorch, or None when it can."""
        if self.torch_version is None:
            return f"n/a (no torch in {self.args.python})"
        if kernel == "sdpa" and int(self.torch_version.split(".")[0]) < 2:
            return f"n/a (torch {short_version(self.torch_version)})"
        return None

    def attntrace(self, key, x_path, threads, need_weights, rounds=None):
        """Median seconds, peak RSS, bytes written and busy cores (median CPU time / median wall
        time) of attntrace mha on X_PATH, and its output and weights paths (the latter "-" when
        none). With ROUNDS (a list), each run follows a measurement of the sgemm ceiling, back to
        back, and ROUNDS gets (ceiling GFLOP/s, seconds) of each: a share of the ceiling that the
        machine's minute moves for both alike."""
        out = os.path.join(self.work, f"out_{key}.npy")
        weights = os.path.join(self.work, f"weights_{key}.npy")
        def command(exe):
            return [exe, "mha", "-q", x_path, "--heads", str(HEADS), "--params", self.params, "--trace", "none",
                    "--threads", str(threads), "-o", out] + (["--attn-weights", weights] if need_weights else [])
        cmd, baseline = command(self.exe), self.args.baseline and command(self.args.baseline)
        runs = []
        for _ in range(self.args.reps):
            ceiling = model_bench.sgemm_gflops(self.args.build, threads, self.fixed_env) if rounds is not None else None
            before = run_process(baseline)[0] if baseline and rounds is not None else None
            runs.append(run_process(cmd))
            if rounds is not None:
                rounds.append((ceiling, runs[-1][0]) + ((before,) if before is not None else ()))
        written = os.path.getsize(out) + (os.path.getsize(weights) if need_weights else 0)
        wall = statistics.median(r[0] for r in runs)
        busy = statistics.median(r[2] for r in runs) / wall
        return wall, max(r[1] for r in runs), written, busy, (out, weights if need_weights else "-")

    def torch_times(self, row, paths, kernels, notes):
        """Fills ROW's PyTorch seconds (the faster environment per kernel), notes, ratios and diffs."""
        row["torch_s"], row["torch_note"], row["ratio"], row["torch_by_env"] = {}, dict(notes), {}, {}
        timed = [k for k in kernels if self.torch_missing(k) is None]
        for k in kernels:
            if self.torch_missing(k):
                row["torch_note"][k] = self.torch_missing(k)
        if not timed:
            return
        for name, intra, env in model_bench.torch_layouts(row["threads"], self.torch_envs):
            try:
                res = torch_forward(self.args.python, paths, intra, row["weights"], self.args.reps, timed, env)
            except subprocess.CalledProcessError as err:  # e.g. out of memory: note it, go on with the rest
                print(f"PyTorch [{name}] failed on {row['case']} at {plural(row['threads'])}: exit {err.returncode}",
                      flush=True)
                row["torch_note"].update({k: f"failed (exit {err.returncode})" for k in timed})
                continue
            row["torch_by_env"][name] = res
            for k in timed:
                if res.get(k) is not None and (k not in row["torch_s"] or res[k] < row["torch_s"][k]):
                    row["torch_s"][k] = res[k]
                for what in ("", "_weights"):
                    diff = res.get(f"{k}{what}_max_diff")
                    if diff is not None and not diff <= WRONG:
                        self.wrong.append(f"{row['case']} threads={row['threads']}: attntrace's {what[1:] or 'output'} "
                                          f"differs from PyTorch {k.upper()}'s [{name}] by {diff:.3g}")
        row["ratio"] = {k: v / row["attntrace_s"] for k, v in row["torch_s"].items()}

    def case(self, key, label, b, l, threads, need_weights, kernels, notes, ceilings):
        x_path = os.path.join(self.work, f"x_{key}.npy")
        if not os.path.exists(x_path):
            np.save(x_path, self.rng.standard_normal((b, l, E)).astype(np.float32))
        rounds = [] if share_goal(key, threads) is not None else None  # a goal's share: interleaved rounds
        ours, rss, written, busy, outputs = self.attntrace(key, x_path, threads, need_weights, rounds)
        sgemm, membw = ceilings
        gflops = flops(b, l, l, E) / ours / 1e9
        row = {"key": key, "case": label, "B": b, "L": l, "threads": threads, "weights": need_weights,
               "attntrace_s": ours, "peak_rss_mib": rss, "gflops": gflops, "sgemm_gflops": sgemm[threads],
               "ceiling_share": gflops / sgemm[threads], "bytes_written": written, "busy_cores": busy}
        if rounds:  # the share is the median of the rounds' (ceiling, then attntrace) shares
            shares = sorted(flops(b, l, l, E) / r[1] / 1e9 / r[0] for r in rounds)
            row.update(ceiling_share=statistics.median(shares), sgemm_gflops=statistics.median(r[0] for r in rounds),
                       rounds=[{"sgemm_gflops": r[0], "seconds": r[1]} for r in rounds], share_spread=(shares[0], shares[-1]))
            if self.args.baseline:  # the same rounds' shares of the baseline binary, run between the two
                before = sorted(flops(b, l, l, E) / r[2] / 1e9 / r[0] for r in rounds)
                row.update(baseline_share=statistics.median(before), baseline_s=statistics.median(r[2] for r in rounds))
                for r, d in zip(rounds, row["rounds"]):
                    d["baseline_seconds"] = r[2]
        if need_weights and threads in membw:
            best = max(membw[threads]["page_cache_mmap"], membw[threads]["page_cache_write"])
            row.update(write_gbs=written / ours / 1e9, page_cache_gbs=best, write_share=written / ours / 1e9 / best)
        if kernels is not None:
            self.torch_times(row, (x_path, self.params, *outputs), kernels, notes)
        torch_txt = "  ".join(f"{k.upper()} {row['torch_s'][k]:.4f} s = {row['ratio'][k]:.2f}x"
                              for k in row.get("torch_s", {}))
        print(f"{label:<28} threads={threads:<2} attntrace {ours:.4f} s  {torch_txt}  {gflops:.0f} GFLOP/s "
              f"({100 * row['ceiling_share']:.0f}% of sgemm)  {busy:.2f} cores busy  peak RSS {rss:.0f} MiB",
              flush=True)
        if "rounds" in row:
            low, high = row["share_spread"]
            print(f"{'':<28} share {100 * row['ceiling_share']:.1f}%, median of {len(rounds)} interleaved rounds "
                  f"({100 * low:.1f}-{100 * high:.1f}%), ceiling median {row['sgemm_gflops']:.0f} GFLOP/s"
                  + (f"; baseline {row['baseline_s']:.4f} s, {100 * row['baseline_share']:.1f}% in the same rounds"
                     if "baseline_share" in row else ""), flush=True)
        return row

    def startup(self, threads):
        """Median and min seconds of the atcold example at THREADS (None: the default), and of
        /bin/true, this machine's floor for any process: hyperfine's 101 runs when it is installed
        (it starts the process itself), else 21 runs started from Python (a fork of this large
        process adds its own milliseconds)."""
        d = os.path.join(ROOT, "data", "atcold")
        cmd = [self.exe, "sdpa", "-q", os.path.join(d, "q1.npy"), "-k", os.path.join(d, "k.npy"),
               "-v", os.path.join(d, "v.npy"), "--scale", "0.125", "--trace", "values"]
        cmd += ["--threads", str(threads)] if threads else []
        starts, floor = startup_times(cmd), startup_times(["/bin/true"])
        label = "start-up (atcold sdpa, --trace values)"
        print(f"{label:<28} threads={threads or 'default'}: median {1000 * statistics.median(starts):.1f} ms "
              f"(min {1000 * starts[0]:.1f} ms; /bin/true {1000 * statistics.median(floor):.1f} ms)", flush=True)
        return {"key": "startup", "case": "start-up: atcold `sdpa`, `--trace values`", "threads": threads,
                "attntrace_s": statistics.median(starts), "min_s": starts[0], "true_s": statistics.median(floor)}


def ms(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.3g} s"


def plural(threads):
    return f"{threads} thread" + ("" if threads == 1 else "s")


def markdown(bench, rows, ceilings, threads, notes):
    """Issue 14's table, with a header line saying when, where and with what it was measured."""
    sgemm, membw = ceilings
    a = bench.args
    cores = len(os.sched_getaffinity(0))
    kernels = f"OpenBLAS chose {bench.core} kernels" + (f", attntrace uses {bench.better}" if bench.better != "-" else "")
    torch_txt = (f"PyTorch {bench.torch_version} ({a.python}, BLAS_INFO={bench.torch_blas}, timed "
                 f"{' and '.join(bench.torch_envs)})" if bench.torch_version else f"no PyTorch in {a.python}")
    lines = [f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {cpu_model()} "
             f"({cores} CPUs), {kernels}, {torch_txt}; E=512, H=8, float32; medians of {a.reps} "
             f"{'run' if a.reps == 1 else 'runs'} (start-up: 101 by hyperfine, or 21). attntrace: the whole process; PyTorch: the warm forward alone in a fresh "
             f"interpreter; ratio = PyTorch time / attntrace time.", ""]
    lines.append("sgemm ceiling (OpenBLAS, 2048³): " + ", ".join(f"{plural(t)} {sgemm[t]:.0f} GFLOP/s" for t in threads)
                 + ".")
    for t in threads:
        if t in membw:
            m = membw[t]
            lines.append(f"Memory, {plural(t)}, {bench.weights_bytes / 2**20:.0f} MiB (GB/s): fresh pages "
                         f"{m['fresh_pages']:.2f}, fresh huge pages {m['fresh_huge_pages']:.2f}, page cache by mmap "
                         f"{m['page_cache_mmap']:.2f}, by pwrite {m['page_cache_write']:.2f}, memcpy {m['memcpy']:.2f}.")
    lines += [f"Note: {n}." for n in notes if n] + [""]
    lines += ["| case | threads | attntrace | PyTorch MHA | ratio | PyTorch SDPA | ratio | goal | share of sgemm ceiling |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(table_cells(r)) + " |")
    return "\n".join(lines)


def table_cells(r):
    """One table row: case, threads, attntrace, MHA, ratio, SDPA, ratio, goal, share."""
    cells = [r["case"], str(r["threads"] or "default"), ms(r["attntrace_s"])]
    for k in ("mha", "sdpa"):
        if k in r.get("torch_s", {}):
            cells += [ms(r["torch_s"][k]), f"{r['ratio'][k]:.2f}×"]
        else:
            cells += [r.get("torch_note", {}).get(k, ""), ""]
    cells.append(goal_text(r))
    share = ""
    if "ceiling_share" in r:
        share = f"{100 * r['ceiling_share']:.0f}% ({r['gflops']:.0f} of {r['sgemm_gflops']:.0f} GFLOP/s)"
    if "rounds" in r:
        low, high = r["share_spread"]
        share = (f"{100 * r['ceiling_share']:.0f}%, median of {len(r['rounds'])} interleaved rounds (ceiling, then "
                 f"attntrace; {100 * low:.0f}-{100 * high:.0f}%; ceiling median {r['sgemm_gflops']:.0f} GFLOP/s)")
    if "write_share" in r:
        share += (f"; {r['bytes_written'] / 2**20:.0f} MiB written at ≥ {r['write_gbs']:.2f} GB/s = "
                  f"{100 * r['write_share']:.0f}% of the page-cache rate ({r['page_cache_gbs']:.2f} GB/s)")
    if "busy_cores" in r and r["threads"]:
        share += f"; {r['busy_cores']:.2f} of {r['threads']} cores busy"
    if "true_s" in r:
        share = f"/bin/true: {ms(r['true_s'])} (any process's floor here)"
    cells.append(share)
    return cells


def sweep(bench, threads, ceilings):
    """attntrace alone without weights, B=1, L = 512 .. 32768 at 1 thread and each thread count."""
    counts = sorted({1} | set(threads))
    sgemm = dict(ceilings[0])
    for t in counts:
        if t not in sgemm:
            sgemm[t] = float(subprocess.check_output([os.path.join(bench.args.build, "tests", "sgemm_ceiling"),
                                                      "2048", str(t)], env=bench.fixed_env).split()[0])
    print("scaling (no weights, attntrace alone):")
    rows = []
    for l in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        if bench.args.skip_long and l > 8192:
            break
        for t in counts:
            rows.append(bench.case(f"sweep{l}", f"scaling L={l}", 1, l, t, False, None, {}, (sgemm, {})))
    table = ["| L | " + " | ".join(plural(t) for t in counts) + " | peak RSS |",
             "|---" * (len(counts) + 2) + "|"]
    for l in sorted({r["L"] for r in rows}):
        at = {r["threads"]: r for r in rows if r["L"] == l}
        table.append(f"| {l} | " + " | ".join(ms(at[t]["attntrace_s"]) for t in counts)
                     + f" | {max(r['peak_rss_mib'] for r in at.values()):.0f} MiB |")
    return rows, "\n".join(table)


# ---- tokenizers: attntrace tokenize (whole process) against @huggingface/tokenizers (warm encode) --
TOKENIZER_GOAL = 10.0  # issues 26 and 38: at least 10x the warm encode (the JS port's, and the Rust library's)


def node_reference(build):
    """NODE_PATH of the reference packages (tests/e2e/tokenize_hostile.sh installs them), or None."""
    node_dir = os.path.abspath(os.path.join(build, "tokenizer_reference", "node_modules"))  # node needs it absolute
    return node_dir if shutil.which("node") and os.path.isdir(os.path.join(node_dir, "@huggingface", "tokenizers")) else None


def rust_ids_equal(node_dir, folder, text, ids):
    """Whether Hugging Face's Rust tokenizers (@anush008/tokenizers) gives IDS for TEXT; None without it."""
    if not node_dir or not os.path.isdir(os.path.join(node_dir, "@anush008", "tokenizers")):
        return None
    script = ("const {Tokenizer} = require('@anush008/tokenizers'); const fs = require('fs');"
              "const t = Tokenizer.fromFile(process.argv[1]); t.disableTruncation(); t.disablePadding();"
              "t.encode(fs.readFileSync(process.argv[2], 'utf8'), null, {addSpecialTokens: true})"
              ".then(e => process.stdout.write(JSON.stringify(e.getIds())));")
    r = subprocess.run(["node", "-e", script, os.path.join(folder, "tokenizer.json"), text], capture_output=True, text=True,
                       env=dict(os.environ, NODE_PATH=node_dir))
    return json.loads(r.stdout) == ids if r.returncode == 0 else None


def time_process(cmd, reps, stdout=subprocess.PIPE):
    """Median wall and CPU (user + system) seconds of REPS runs of CMD, and its last stdout (b"" where
    STDOUT is not a pipe read by this script, e.g. subprocess.DEVNULL)."""
    walls, cpus, out = [], [], b""
    for _ in range(reps):
        before = os.times()
        t0 = time.perf_counter()
        out = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, check=True).stdout or b""
        walls.append(time.perf_counter() - t0)
        after = os.times()
        cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
    return statistics.median(walls), statistics.median(cpus), out


def node_encode_seconds(node_dir, folder, text, which):
    """The warm encode of TEXT by the node reference WHICH ("js": @huggingface/tokenizers, "rust":
    @anush008/tokenizers, Hugging Face's Rust tokenizers 0.22), median of 3 (tokenizer_node.mjs);
    None without it."""
    if not node_dir or (which == "rust" and not os.path.isdir(os.path.join(node_dir, "@anush008", "tokenizers"))):
        return None
    r = subprocess.run(["node", os.path.join(ROOT, "tests/bench/tokenizer_node.mjs"), folder, text, which],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=node_dir))
    return json.loads(r.stdout)["seconds"] if r.returncode == 0 else None


def tokenizer_bench(build, work, reps):
    """MB/s and tokens/s on 1 MB of English and 1 MB of mixed scripts (tests/bench/tokenizer_texts.py):
    attntrace tokenize as a whole process (reading tokenizer.json, writing the JSON to a pipe)
    against the warm encode alone in node of @huggingface/tokenizers (the JS port) and of
    @anush008/tokenizers (the Rust library), one thread each; attntrace with its default (up to 2
    threads: the model's two halves at once) and with --threads 1."""
    import hashlib
    import lzma
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tokenizer_texts
    node_dir = node_reference(build)
    texts = {}
    for label, make in [("English", tokenizer_texts.english), ("mixed scripts", tokenizer_texts.mixed)]:
        texts[label] = os.path.join(work, f"tok_{label.split()[0]}.txt")
        with open(texts[label], "w", encoding="utf-8") as f:
            f.write(make(1_000_000))
        print(f"  {label}: {texts[label]} sha256 {hashlib.sha256(open(texts[label], 'rb').read()).hexdigest()[:16]}")
    rows = []
    for name in ["gpt2", "bert-base-uncased"]:
        folder = os.path.join(work, "tok_" + name)
        os.makedirs(folder, exist_ok=True)
        with lzma.open(os.path.join(ROOT, "tests/fixtures/tokenizers", name, "tokenizer.json.xz")) as f, \
                open(os.path.join(folder, "tokenizer.json"), "wb") as g:
            g.write(f.read())
        load, load_cpu, _ = time_process([os.path.join(build, "attntrace"), "tokenize", folder, "--text", ""], reps)
        print(f"  {name}: load alone (--text \"\") {load * 1e3:.1f} ms wall, {load_cpu * 1e3:.1f} ms CPU")
        for label, text in texts.items():
            size = os.path.getsize(text)
            cmd = [os.path.join(build, "attntrace"), "tokenize", folder, "--text-file", text, "--format", "json"]
            # Timed writing the JSON to /dev/null (the tool's work, not a reader's: this script reading
            # 18 MB through a pipe competes for the 2 cores), and once more into a pipe read here.
            wall, cpu, _ = time_process(cmd, reps, subprocess.DEVNULL)
            wall1, _, _ = time_process(cmd + ["--threads", "1"], reps, subprocess.DEVNULL)
            wall_pipe, _, out = time_process(cmd, reps)
            out1 = subprocess.run(cmd + ["--threads", "1"], capture_output=True, check=True).stdout
            ids = json.loads(out)["ids"]
            if out1 != out:
                raise SystemExit(f"tokenize {name} {label}: --threads 1 gives other output than 2 threads")
            rows.append(dict(tokenizer=name, text=label, bytes=size, tokens=len(ids), wall=wall, cpu=cpu, wall1=wall1,
                             wall_pipe=wall_pipe,
                             node=node_encode_seconds(node_dir, folder, text, "js"),
                             rust=node_encode_seconds(node_dir, folder, text, "rust"),
                             same_as_rust=rust_ids_equal(node_dir, folder, text, ids)))
    print_tokenizer_table(rows, node_dir, build)
    return rows


def print_tokenizer_table(rows, node_dir, build):
    print("tokenizers (1 MB; attntrace: whole process, reading tokenizer.json and writing the JSON to /dev/null"
          " (and, in the pipe column, into a pipe this script reads), its default of"
          " up to 2 threads (the model's two halves at once), and with --threads 1;"
          " JS: @huggingface/tokenizers' warm encode alone, Rust: @anush008/tokenizers' (tokenizers 0.22) warm"
          " encode alone, both in node on one thread; ratio = their time / attntrace wall time):")
    print("| tokenizer | text | tokens | attntrace MB/s (wall) | tokens/s | MB/s (CPU time) | JS MB/s | ratio | goal 10x |"
          " Rust MB/s | ratio | goal 10x | ids = Rust library | --threads 1 MB/s | ratio to Rust |"
          " into a pipe MB/s | ratio to Rust |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def versus(seconds, r):
        if not seconds:
            return "- | - | -"
        ratio = seconds / r["wall"]
        return f"{r['bytes'] / 1e6 / seconds:.2f} | {ratio:.1f}x | {'met' if ratio >= TOKENIZER_GOAL else 'not met'}"

    for r in rows:
        mb = r["bytes"] / 1e6
        rust = {True: "yes", False: "NO", None: "-"}[r["same_as_rust"]]
        print(f"| {r['tokenizer']} | {r['text']} | {r['tokens']} | {mb / r['wall']:.2f} | {r['tokens'] / r['wall']:.0f} |"
              f" {mb / r['cpu']:.2f} | {versus(r['node'], r)} | {versus(r.get('rust'), r)} | {rust} |"
              f" {mb / r['wall1']:.2f} | {(r['rust'] / r['wall1']) if r.get('rust') else 0:.1f}x |"
              f" {mb / r['wall_pipe']:.2f} | {(r['rust'] / r['wall_pipe']) if r.get('rust') else 0:.1f}x |")
    if not node_dir:
        print(f"  (node side skipped: npm install --prefix {os.path.join(build, 'tokenizer_reference')}"
              " @huggingface/tokenizers@0.2.0 @anush008/tokenizers@0.6.0)")


def attention_only(bench, threads):
    """--attention-only: the L = 4096 case at each thread count, attntrace (and --baseline) alone."""
    key, label, b, l, need_weights, _, notes = next(c for c in CASES if c[0] == "L4096")
    sgemm = {t: model_bench.sgemm_gflops(bench.args.build, t, bench.fixed_env) for t in threads}
    rows = [bench.case(key, label, b, l, t, need_weights, None, notes, (sgemm, {})) for t in threads]
    with open(os.path.join(bench.work, "results.json"), "w") as f:
        json.dump({"cpu": cpu_model(), "rows": rows}, f, indent=1)
    print(f"results: {os.path.join(bench.work, 'results.json')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Details: the docstring at the top of tests/bench/bench.py.")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="build folder with attntrace, tests/sgemm_ceiling and tests/membw_ceiling (default: build)")
    ap.add_argument("--threads", default="2",
                    help="comma-separated thread counts, e.g. 1,2,4,8,16; counts above the cores are skipped "
                         "(default: 2)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the interpreter whose PyTorch is the reference (default: /usr/bin/python3)")
    ap.add_argument("--reps", type=int, default=5, help="runs per measurement; the median is reported (default: 5)")
    ap.add_argument("--quick", action="store_true", help="no scaling sweep")
    ap.add_argument("--tokenizers-only", action="store_true", help="only the tokenizer section (attntrace tokenize vs node)")
    ap.add_argument("--model-only", action="store_true", help="only the whole-model case (attntrace model vs PyTorch eager)")
    ap.add_argument("--attention-only", action="store_true",
                    help="only the L = 4096 case, attntrace alone (no PyTorch), its share of the ceiling from "
                         "interleaved rounds at each thread count")
    ap.add_argument("--baseline", metavar="EXE",
                    help="an earlier attntrace binary, run in the same interleaved rounds (ceiling, EXE, then "
                         "--build's attntrace), for a before/after share")
    ap.add_argument("--skip-long", action="store_true", help="skip L=32768 (and L > 8192 in the sweep)")
    ap.add_argument("--json", help="also write the results JSON here (always written into the work folder)")
    ap.add_argument("--markdown", help="also write the Markdown table here")
    args = ap.parse_args()
    if args.reps < 1:
        sys.exit("--reps: at least 1")
    cores = len(os.sched_getaffinity(0))
    threads, skipped = parse_threads(args.threads, cores)
    if not threads:
        sys.exit(f"--threads {args.threads}: none fits this machine's {cores} CPUs")
    work = tempfile.mkdtemp(prefix="attntrace-bench-")
    if args.tokenizers_only:
        tokenizer_bench(args.build, work, args.reps)
        return
    bench = Bench(args, work)
    print(f"OpenBLAS chose {bench.core} kernels" + (f"; attntrace uses {bench.better}" if bench.better != "-" else ""))
    print(f"PyTorch: {bench.torch_version} (BLAS_INFO={bench.torch_blas}) from {args.python}" if bench.torch_version
          else f"PyTorch: none in {args.python} ({bench.torch_blas}); attntrace alone")
    if skipped:
        print(f"note: {skipped}")
    if args.attention_only:
        attention_only(bench, threads)
        return
    ceilings = measure_ceilings(args.build, threads, bench.weights_bytes, work, bench.fixed_env)
    for t in threads:
        print(f"ceilings at {plural(t)}: sgemm {ceilings[0][t]:.1f} GFLOP/s"
              + (f"; memory GB/s {ceilings[1][t]}" if t in ceilings[1] else ""), flush=True)
    speeds = core_speeds(args.build, bench.fixed_env)
    speeds_note = ("one-thread sgemm pinned to each CPU: " + ", ".join(f"CPU {c} {g:.0f}" for c, g in speeds.items())
                   + " GFLOP/s") if speeds else ""
    machine_notes = [speeds_note, page_reporting_note()]  # printed now, and under the table
    for note in machine_notes:
        if note:
            print(f"note: {note}", flush=True)
    model_rows = model_bench.model_bench(args.build, work, threads, args.python, args.reps,
                                         bench.torch_envs, bench.torch_version)
    print("\n" + model_bench.markdown(model_rows) + "\n", flush=True)
    if args.model_only:
        return

    rows = []
    for key, label, b, l, need_weights, kernels, notes in CASES:
        if key == "L32768" and args.skip_long:
            continue
        for t in threads:
            rows.append(bench.case(key, label, b, l, t, need_weights, kernels, notes, ceilings))
    for t in threads:
        rows.append(bench.startup(t))
    rows.append(bench.startup(None))
    notes = [skipped, coretype_note(args.build)] + machine_notes
    if bench.torch_version:
        t0 = time.perf_counter()
        subprocess.run([args.python, "-c", "import torch"], check=True)
        notes.append(f"`{args.python} -c 'import torch'` took {1000 * (time.perf_counter() - t0):.0f} ms")
    table = markdown(bench, rows, ceilings, threads, notes)
    sweep_rows, sweep_table = ([], "") if args.quick else sweep(bench, threads, ceilings)
    print("\n" + table + ("\n\n" + sweep_table if sweep_table else "") + "\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + ("\n\n" + sweep_table if sweep_table else "") + "\n")
    result = {"torch": bench.torch_version, "python": args.python, "cpu": cpu_model(), "cores": cores,
              "openblas_core": bench.core, "attntrace_core": bench.better, "threads": threads,
              "sgemm_gflops": ceilings[0], "memory_gbs": ceilings[1], "core_sgemm_gflops": speeds,
              "rows": rows, "sweep": sweep_rows,
              "model": model_rows,
              "wrong": bench.wrong}
    for path in [os.path.join(work, "results.json")] + ([args.json] if args.json else []):
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    tokenizer_bench(args.build, work, args.reps)
    print(f"results: {os.path.join(work, 'results.json')}")
    if bench.wrong:
        sys.exit("WRONG RESULTS (the times above compare different computations):\n" + "\n".join(bench.wrong))


if __name__ == "__main__":
    main()
