#pragma once
// The one module that calls BLAS. Every matrix is row-major; a head is a pointer offset with a
// leading dimension (lda = the row length of the tensor it lives in), never a transposed copy.
#include <cstddef>

namespace attntrace {

// C := alpha*op(A)*op(B) + beta*C
//   op(A): (M, K), stored as A (M, K) with lda, or as A (K, M) when trans_a
//   op(B): (K, N), stored as B (K, N) with ldb, or as B (N, K) when trans_b
//   C:     (M, N) with ldc
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// OpenBLAS's own thread count (0 leaves it alone). The attention loops set it to 1 while they
// run their own threads over heads, so the two never oversubscribe the cores.
void set_blas_threads(std::size_t threads);
std::size_t blas_threads();

}  // namespace attntrace
