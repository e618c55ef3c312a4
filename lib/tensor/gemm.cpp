#include "attntrace/tensor/timeline.hpp"
#include "attntrace/tensor/gemm.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "attntrace/tensor/dynamic_library.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"

namespace attntrace {

namespace {
blasint to_blas(std::size_t v) { return static_cast<blasint>(v); }

// OpenBLAS, loaded on first use rather than at start-up. It reads OPENBLAS_NUM_THREADS and
// OPENBLAS_CORETYPE only when it loads, so loading it ourselves lets the process choose them
// in-process (no second process start), and commands that never multiply never load it:
//   OPENBLAS_NUM_THREADS=1 unless set: attntrace runs its own threads with BLAS single-threaded
//     inside them; a pool started at load would spin against them;
//   OPENBLAS_CORETYPE: when OpenBLAS fell back to generic kernels on a CPU it does not know, and
//     the CPU has AVX-512 or AVX2, it is unloaded and loaded again with the better core type.
// A variable the user set is left alone.
#define OPENBLAS_SYMBOLS(X)                                                                  \
    X(cblas_sgemm) X(cblas_dgemm) X(openblas_set_num_threads) X(openblas_get_num_threads) \
    X(openblas_get_corename) X(openblas_get_config)
struct OpenBlas {
    void* handle = nullptr;
    ATTNTRACE_SYMBOL_FIELDS(OPENBLAS_SYMBOLS)
    std::string replaced_core;  // the generic core OpenBLAS chose first, when it was replaced

    std::string core() const {
        const char* name = openblas_get_corename();
        return name ? name : "";
    }
};

// dlopen of the runtime library (its soname, else the one found at build time).
OpenBlas open_blas() {
    OpenBlas blas;
    blas.handle = open_library("libopenblas.so.0", ATTNTRACE_OPENBLAS_LIBRARY);
    if (!blas.handle) throw std::runtime_error(std::string("cannot load OpenBLAS: ") + dlerror());
    const std::string missing = ATTNTRACE_BIND_SYMBOLS(OPENBLAS_SYMBOLS, blas.handle, blas);
    if (!missing.empty()) throw std::runtime_error("OpenBLAS has no symbol " + missing);
    return blas;
}

bool generic_core(const std::string& core) {
    return core == "Prescott" || core == "Core2" || core == "Nehalem" || core == "Katmai" || core == "Northwood" ||
           core == "Banias" || core == "Unknown" || core.empty();
}

// The core type to ask for on this CPU instead of a generic one; empty when there is none.
std::string better_core_for_cpu() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return "";
}

OpenBlas load_blas() {
    setenv("OPENBLAS_NUM_THREADS", "1", 0);  // 0: a value the user set stays
    const bool user_core = std::getenv("OPENBLAS_CORETYPE") != nullptr;
    OpenBlas blas = open_blas();
    const std::string chosen = blas.core(), better = better_core_for_cpu();
    if (user_core || !generic_core(chosen) || better.empty()) return blas;
    // Loaded single-threaded, OpenBLAS has started no threads: it can be unloaded and loaded again.
    dlclose(blas.handle);
    setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
    blas = open_blas();
    if (blas.core() != chosen) blas.replaced_core = chosen;  // else dlclose kept it: the generic one stays
    return blas;
}

// The thread count asked for before OpenBLAS was loaded (0: none), applied when it loads.
std::atomic<int> pending_threads{0};
std::atomic<bool> blas_loaded{false};

const OpenBlas& blas() {
    static std::once_flag once;
    static OpenBlas loaded;
    std::call_once(once, [] {
        timeline_mark("OpenBLAS: loading");
        loaded = load_blas();
        timeline_mark("OpenBLAS: loaded");
        if (const int threads = pending_threads.load()) loaded.openblas_set_num_threads(threads);
        blas_loaded = true;
    });
    return loaded;
}

// K == 0 makes op(A)*op(B) a zero matrix; BLAS would reject the zero leading dimensions.
template <class T>
void scale_only(std::size_t m, std::size_t n, T beta, T* c, std::size_t ldc) {
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// OpenBLAS for a product on this thread: on the thread's first, the address space must hold the
// buffer OpenBLAS is about to map (gemm.hpp, kBlasBufferBytes), else it would retry forever.
const OpenBlas& blas_for_this_thread() {
    const OpenBlas& loaded = blas();
    thread_local bool buffer_fits = false;
    if (buffer_fits) return loaded;
    const std::size_t left = address_space_left();
    if (left < kBlasBufferBytes + (std::size_t{1} << 20))
        throw InputError("out of memory: a matrix product needs " + std::to_string(kBlasBufferBytes >> 20) +
                         " MiB of address space for OpenBLAS's buffer, and `ulimit -v` leaves " +
                         std::to_string(left >> 20) + " MiB");
    buffer_fits = true;
    return loaded;
}

// The one BLAS routine per precision: cblas_sgemm for float, cblas_dgemm for double.
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, float alpha,
               const float* a, blasint lda, const float* b, blasint ldb, float beta, float* c, blasint ldc) {
    blas_for_this_thread().cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, double alpha,
               const double* a, blasint lda, const double* b, blasint ldb, double beta, double* c, blasint ldc) {
    blas_for_this_thread().cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

void load_blas_now() noexcept {
    try {
        blas();
    } catch (...) {  // call_once did not complete: the first product tries again and reports it
    }
}

// Products of at most kSmallProduct multiply-adds (the seed notebooks' examples: a few rows of a
// few columns) run as plain loops: loading OpenBLAS costs about 3 ms of symbol relocation, far
// more than such a product, and small runs should start in milliseconds.
constexpr std::size_t kSmallProduct = 32 * 32 * 32;

// C := alpha*op(A)*op(B) + beta*C in loops; with beta = 0, C is not read (as BLAS: a NaN in C is
// overwritten).
template <class T>
void small_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            T acc = 0;
            for (std::size_t p = 0; p < k; ++p)
                acc += (trans_a ? a[p * lda + i] : a[i * lda + p]) * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
            T& out = c[i * ldc + j];
            out = beta == T(0) ? alpha * acc : alpha * acc + beta * out;
        }
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) return scale_only(m, n, beta, c, ldc);
    if (m * n <= kSmallProduct / k) return small_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n),
              to_blas(k), alpha, a, to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
}

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

// Neither loads OpenBLAS: a run whose products are all small never does.
void set_blas_threads(std::size_t threads) {
    if (threads == 0) return;
    pending_threads = static_cast<int>(threads);
    if (blas_loaded) blas().openblas_set_num_threads(static_cast<int>(threads));
}

std::size_t blas_threads() {
    return blas_loaded ? static_cast<std::size_t>(blas().openblas_get_num_threads()) : std::size_t(pending_threads.load());
}

std::size_t available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

std::string blas_core_name() { return blas().core(); }

std::string blas_config() {
    const char* config = blas().openblas_get_config();
    return config ? config : "";
}

std::optional<std::string> blas_core_replaced() {
    const std::string& replaced = blas().replaced_core;
    return replaced.empty() ? std::nullopt : std::optional(replaced);
}

}  // namespace attntrace
