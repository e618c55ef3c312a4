#pragma once
// The one module that calls BLAS. Every matrix is row-major; a head is a pointer offset with a
// leading dimension (lda = the row length of the tensor it lives in), never a transposed copy.
#include <cstddef>
#include <optional>
#include <string>

namespace attntrace {

// C := alpha*op(A)*op(B) + beta*C
//   op(A): (M, K), stored as A (M, K) with lda, or as A (K, M) when trans_a
//   op(B): (K, N), stored as B (K, N) with ldb, or as B (N, K) when trans_b
//   C:     (M, N) with ldc
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// A product of at most 32^3 multiply-adds runs in plain loops; OpenBLAS is loaded (see gemm.cpp)
// on the first larger one, or on a call below that reports on OpenBLAS: single-threaded unless
// OPENBLAS_NUM_THREADS is set, and with better kernels than a generic fallback (below).

// The buffer OpenBLAS maps for each thread's first product (x86-64; smaller elsewhere). When the
// mapping fails (`ulimit -v`), OpenBLAS retries forever; so gemm checks, once per thread, that the
// address space left holds it, and throws InputError "out of memory: ..." (exit 3) when it does not.
inline constexpr std::size_t kBlasBufferBytes = std::size_t{128} << 20;

// OpenBLAS's own thread count (0 leaves it alone; before OpenBLAS is loaded, the count it will
// get, 0 for its default). The attention loops set it to 1 while they run their own threads over
// heads, so the two never oversubscribe the cores. Neither call loads OpenBLAS.
void set_blas_threads(std::size_t threads);
std::size_t blas_threads();

// Loads OpenBLAS now, on this thread, as the first product otherwise would (about 4 ms of dlopen
// and symbol relocation on the Xeon of docs/performance.md): a run about to multiply large
// matrices calls it on a thread of its own while it reads its inputs. A failure is left for the
// first product to report.
void load_blas_now() noexcept;

// The cores this process may run on (its CPU affinity): the default thread count.
std::size_t available_cores();

// OpenBLAS's build configuration ("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64").
std::string blas_config();

// The kernel family OpenBLAS runs ("SkylakeX", "Haswell", "Prescott" ...).
std::string blas_core_name();

// OpenBLAS 0.3.21 does not know newer CPUs (Sapphire Rapids among them) and falls back to its
// generic Prescott kernels, 5-7x slower. When that happened on a CPU with AVX-512 or AVX2 and
// OPENBLAS_CORETYPE was not set, OpenBLAS is loaded again with SkylakeX or Haswell kernels; this
// is the generic family it had chosen (nullopt when nothing was replaced).
std::optional<std::string> blas_core_replaced();

}  // namespace attntrace
