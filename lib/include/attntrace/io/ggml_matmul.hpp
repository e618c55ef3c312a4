#pragma once
// llama.cpp's product of a quantized weight by float activations (ggml-cpu's mul_mat for
// q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K and q6_K weights), without dequantizing the weight:
// each activation row is quantized to 8 bits the way llama.cpp's CPU backend quantizes it (the
// weight type's `vec_dot_type`: q8_0 blocks of 32 for q8_0, q4_0 and q5_0 weights, q8_1 for q4_1
// and q5_1, q8_K super-blocks of 256 for the K types), and each output is the integer dot
// products of the blocks scaled by both blocks' scales (ggml-cpu quants.c `ggml_vec_dot_*`).
// q5_0, q5_1 and q8_0 are what llama.cpp's quantizer writes for a q4_K, q5_K or q6_K tensor whose
// rows are not a whole number of 256.
//
//   OUT(M, N) := A(M, K) . W(N, K)^T   W: N rows of K elements of TYPE (a GGUF 2-D weight of
//                                      ne0 = K, ne1 = N), A and OUT float32 row-major
//
// The numbers: the activations' 8-bit bytes are ggml's, bit for bit; the integer sums are exact;
// only the float sums of the scaled blocks may be taken in another order than the SIMD vec_dot
// llama.cpp runs (the scalar kernel follows ggml's plain-C `_generic` definition to the bit, the
// AVX2 and AVX-512 VNNI kernels for the 32-element types too; docs/gguf-types.md says how close each is).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace attntrace {

// Whether quantized_gemm takes weights of TYPE (q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K, q6_K).
bool quantized_gemm_supported(std::uint32_t type);

// OUT (M, N) as above, on up to THREADS workers. W holds at least N rows of TYPE (InputError
// otherwise, or for a TYPE not supported, or K not a whole number of its blocks); only those
// bytes are read. With LDO, OUT's rows are LDO >= N floats apart (columns [N, LDO) untouched).
void quantized_gemm(std::uint32_t type, std::string_view w, std::size_t n, std::size_t k, const float* a,
                    std::size_t m, float* out, std::size_t threads);
void quantized_gemm(std::uint32_t type, std::string_view w, std::size_t n, std::size_t k, const float* a,
                    std::size_t m, float* out, std::size_t ldo, std::size_t threads);

// A 2-D weight kept as its file's bytes: ROWS rows of COLS elements of TYPE (one quantized_gemm
// takes), row after row; BYTES views the file (a GGUF tensor's data in its mapping).
struct QuantizedMatrix {
    std::uint32_t type = 0;
    std::string_view bytes;             // (ROWS, COLS) of TYPE
    std::size_t rows = 0, cols = 0;
    // Rows [R0, R1) of it.
    QuantizedMatrix row_range(std::size_t r0, std::size_t r1) const;
};

// Y (M, W.rows) at LDY := A (M, W.cols) . Wᵀ, on up to THREADS workers (quantized_gemm).
void quantized_product(const QuantizedMatrix& w, const float* a, std::size_t m, float* y, std::size_t ldy,
                       std::size_t threads);

namespace ggml {
struct QuantizedActs;
}

// The 8-bit type llama.cpp rounds the activations to for weights of TYPE (its vec_dot_type):
// q8_0 for q8_0, q4_0 and q5_0; q8_1 for q4_1 and q5_1; q8_K for the K types.
std::uint32_t quantized_dot_type(std::uint32_t type);

// Activation rows (M, K) quantized once to a weight type's dot type, for the several products
// that read them (a layer's q, k and v; each block of the LM head); shared, not copied.
class QuantizedRows {
public:
    std::uint32_t dot_type() const;
    std::size_t rows() const;  // M
    std::size_t cols() const;  // K
    // Rows [R0, R1) of them.
    QuantizedRows range(std::size_t r0, std::size_t r1) const;

private:
    friend QuantizedRows quantize_rows(std::uint32_t, const float*, std::size_t, std::size_t, std::size_t);
    friend void quantized_product(const QuantizedMatrix&, const QuantizedRows&, float*, std::size_t, std::size_t);
    std::shared_ptr<const ggml::QuantizedActs> owner_;  // the bytes
    std::shared_ptr<const ggml::QuantizedActs> view_;   // these rows of them
};

// A (M, K) quantized for weights of WEIGHT_TYPE (quantize_row_q8_0 / _q8_1 / _q8_K), rows spread
// over up to THREADS workers. InputError for a type quantized_gemm does not take, or K not a whole
// number of its blocks.
QuantizedRows quantize_rows(std::uint32_t weight_type, const float* a, std::size_t m, std::size_t k,
                            std::size_t threads);
// Y (A.rows, W.rows) at LDY := A . Wᵀ: quantized_product with the rows quantized already (for
// W's dot type and K = W.cols, else std::logic_error).
void quantized_product(const QuantizedMatrix& w, const QuantizedRows& a, float* y, std::size_t ldy,
                       std::size_t threads);

// The activation quantizers, to ggml's byte layouts: K floats of X to K / 32 q8_0 blocks (34 bytes:
// fp16 d, 32 int8) as ggml-cpu's x86 quantize_row_q8_0 makes them (d = max|x| / 127, q = x * (127
// / max|x|) rounded half to even), or to K / 256 q8_K blocks (292 bytes: float d, 256 int8, 16
// int16 sums of 16) as quantize_row_q8_K_ref (q = nearest(-127 / x_max * x), d = its inverse).
// K must be a whole number of blocks (InputError). A block holding a NaN or an infinity gets a NaN
// scale, so the products it enters are NaN (ggml's bytes for such a block are whatever its
// rounding of NaN gives: the one place these differ from ggml's).
void quantize_row_q8_0(const float* x, std::uint8_t* y, std::size_t k);
void quantize_row_q8_K(const float* x, std::uint8_t* y, std::size_t k);
// ... or to K / 32 q8_1 blocks (36 bytes: fp16 d, fp16 s = d * sum of the quants, 32 int8) as
// ggml-cpu's x86 quantize_row_q8_1 makes them (q4_1's and q5_1's activations).
void quantize_row_q8_1(const float* x, std::uint8_t* y, std::size_t k);

// Which kernel quantized_gemm runs: the best this CPU runs (AMX where it has AMX-INT8 and Linux
// grants the process its tiles, else AVX-512 VNNI where it has AVX-512F/BW/VL and VNNI, else AVX2
// with FMA, else scalar), or one named (UsageError when this CPU cannot run it). `amx` runs the
// 32-element types, q4_K and q5_K on AMX tiles (2 x 2 tiles of 16 activation rows by 16 weight
// rows; fewer than 16 activation rows, and q6_K, on AVX-512 VNNI); its floats are AVX-512 VNNI's.
enum class GemmKernel : std::uint8_t { best, scalar, avx2, avx512_vnni, amx };
void set_gemm_kernel(GemmKernel kernel);
GemmKernel gemm_kernel();  // the one that runs: never `best`
bool gemm_kernel_runs(GemmKernel kernel);
std::string gemm_kernel_name(GemmKernel kernel);

}  // namespace attntrace
