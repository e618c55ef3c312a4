"""llama.cpp itself, as the reference for GGUF files: its prebuilt libraries and the source they
were built from, both from the npm registry (never committed here).

- `bins()`: the folder holding libllama / libggml* of `@node-llama-cpp/linux-x64` (pin PIN),
  installed with npm into CACHE on first use.
- `source()`: a checkout of the llama.cpp source those binaries were built from (the git bundle
  `llama/gitRelease.bundle` inside the `node-llama-cpp` package of the same version): its
  `include/llama.h` gives the struct layouts the ctypes wrappers must follow, `gguf-py/` writes
  GGUF files as convert_hf_to_gguf.py does, `ggml/src/ggml-quants.c` defines the quantized types.
- `libllama()`: libllama loaded with ctypes, the backend initialised and its log silenced.

CACHE is $ATTNTRACE_LLAMA_CPP or ~/.cache/attntrace/llama-cpp; $ATTNTRACE_LLAMA_CPP_CPU picks the CPU
backend variant (libggml-cpu-<variant>.so) instead of the best one for this CPU. Scripts that use this module are
goldens scripts (run by hand, their outputs committed) and optional peer checks; CI never needs it.
"""
import ctypes
import os
import subprocess
from pathlib import Path

PIN = "3.21.1"
CACHE = Path(os.environ.get("ATTNTRACE_LLAMA_CPP", Path.home() / ".cache" / "attntrace" / "llama-cpp"))


def _npm_install(package, where):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--no-save", "--ignore-scripts", "--prefix", str(where), package],
                   check=True, stdout=subprocess.DEVNULL)


def bins():
    """The folder of libllama.*.so and libggml*.so (installed on first use)."""
    folder = CACHE / "node_modules" / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64"
    if not folder.is_dir():
        _npm_install(f"@node-llama-cpp/linux-x64@{PIN}", CACHE)
    return folder


def source():
    """A checkout of the llama.cpp source the binaries were built from (made on first use)."""
    checkout = CACHE / "llama.cpp"
    if checkout.is_dir():
        return checkout
    pack = CACHE / "node-llama-cpp"
    bundle = pack / "package" / "llama" / "gitRelease.bundle"
    if not bundle.is_file():
        pack.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", f"node-llama-cpp@{PIN}"], cwd=pack, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["tar", "xzf", f"node-llama-cpp-{PIN}.tgz"], cwd=pack, check=True)
    subprocess.run(["git", "clone", "-q", str(bundle), str(checkout)], check=True)
    return checkout


def gguf_py():
    """The path to put on sys.path for llama.cpp's own `gguf` Python package (gguf-py)."""
    return str(source() / "gguf-py")


_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_silent = _LOG_CALLBACK(lambda level, text, user: None)


def libllama():
    """libllama as a ctypes CDLL, backend initialised, log silenced. Declare each function's
    argtypes/restype from source()/include/llama.h before calling it."""
    folder = bins()
    ctypes.CDLL(str(folder / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    ggml = ctypes.CDLL(str(next(folder.glob("libggml.*so"))), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(next(folder.glob("libllama.*so"))), mode=ctypes.RTLD_GLOBAL)
    lib.llama_log_set.argtypes = [_LOG_CALLBACK, ctypes.c_void_p]
    lib.llama_log_set(_silent, None)
    # the CPU backend is one of the libggml-cpu-<isa>.so variants, chosen for this CPU at load, or
    # the one $ATTNTRACE_LLAMA_CPP_CPU names (e.g. icelake: AVX-512 VNNI without llama.cpp's AMX
    # kernels, which write NaN for some rows of the tiny E = 32 models on a CPU with AMX)
    variant = os.environ.get("ATTNTRACE_LLAMA_CPP_CPU")
    if variant:
        ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
        ggml.ggml_backend_load.restype = ctypes.c_void_p
        reg = ggml.ggml_backend_load(str(folder / f"libggml-cpu-{variant}.so").encode())
        if not reg:
            raise RuntimeError(f"llama.cpp's CPU backend variant {variant} could not be loaded on this CPU")
    else:
        ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        ggml.ggml_backend_load_all_from_path(str(folder).encode())
    lib.llama_backend_init.argtypes = []
    lib.llama_backend_init()
    return lib


def libggml_base():
    """libggml-base (the type traits, ggml_quantize_chunk) as a ctypes CDLL."""
    return ctypes.CDLL(str(bins() / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)


if __name__ == "__main__":
    print("binaries:", bins())
    print("source:  ", source())
    lib = libllama()
    lib.llama_print_system_info.restype = ctypes.c_char_p
    print(lib.llama_print_system_info().decode())
