#pragma once
// Multi-head attention parameters: where they come from (a .safetensors file, a JSON object of
// name -> nested arrays, a directory of NAME.npy files, or a seeded random init) and which naming
// scheme they follow. The jobs live in params_files.hpp (reading a file into name -> tensor),
// param_names.hpp (the naming schemes) and params_check.hpp (the shape checks).
//
// Legend: B batch, Lq/Lk query/key lengths, Eq/Ek/Ev query/key/value input dims, H heads,
// G kv heads, P head dim, Pv value head dim, PO output dim.
//
// Schemes, tried in this order:
//   torch  nn.MultiheadAttention: in_proj_weight (3E, E) + in_proj_bias (3E), or
//          q_proj_weight / k_proj_weight / v_proj_weight + in_proj_bias; out_proj.weight,
//          out_proj.bias, and bias_k / bias_v (1, 1, E) with add_bias_kv=True
//   d2l    d2l and atcold: W_q.weight, W_k.weight, W_v.weight, W_o.weight, each with optional .bias
//          (atcold's W_h.weight is accepted as its W_o)
//   bloem  Bloem and seed 004: toqueries.weight, tokeys.weight, tovalues.weight,
//          unifyheads.weight, unifyheads.bias (each .bias optional)
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// The in-projections [W_q; W_k; W_v] as one stored weight used where it lies, not owned (a float
// checkpoint's tensor read in place: GPT-2's c_attn, Phi-3's qkv_proj): rows (H*P + G*P + G*Pv, E),
// or (E, H*P + G*P + G*Pv) as GPT-2's Conv1D stores it. Valid while its file stays mapped.
// With PRODUCT set, DATA is null: the weights are in a form only the caller multiplies by (a GGUF
// file's quantized bytes), and PRODUCT(X, ROWS, Y, LDY, THREADS) writes Y (ROWS, out()) at LDY :=
// X (ROWS, E) · [W_q; W_k; W_v]ᵀ, the biases left to the core.
template <class T>
struct StackedInProj {
    const T* data = nullptr;
    std::size_t q_rows = 0, k_rows = 0, v_rows = 0;  // H*P, G*P, G*Pv
    std::size_t in = 0;                               // E
    bool conv1d = false;                              // stored (in, out)
    std::function<void(const T* x, std::size_t rows, T* y, std::size_t ldy, std::size_t threads)> product;
    std::size_t out() const { return q_rows + k_rows + v_rows; }
};

// A weight used where it lies, not owned (a float checkpoint's tensor read in place): (out, in),
// or (in, out) as GPT-2's Conv1D stores it. Valid while its file stays mapped. DATA null: the
// caller multiplies by it, the core knows its shape only (a whole model's output projection kept
// quantized, which the forward runs after z).
template <class T>
struct WeightInPlace {
    const T* data = nullptr;
    std::size_t out = 0, in = 0;
    bool conv1d = false;
};

template <class T>
struct MhaParams {
    Array<T> w_q;                 // (H*P, Eq)
    Array<T> w_k;                 // (G*P, Ek)
    Array<T> w_v;                 // (G*Pv, Ev)
    std::optional<Array<T>> b_q;  // (H*P)
    std::optional<Array<T>> b_k;  // (G*P)
    std::optional<Array<T>> b_v;  // (G*Pv)
    std::optional<Array<T>> w_o;  // (PO, H*Pv); absent without an output projection
    std::optional<Array<T>> b_o;  // (PO)
    std::optional<Array<T>> bias_k;  // (1, 1, G*P): torch's add_bias_kv, one extra key row per batch
    std::optional<Array<T>> bias_v;  // (1, 1, G*Pv): its value row (both or neither)

    std::string scheme;                // "torch", "d2l", "bloem", "random"
    std::string source;                // the file or directory, or "random init (seed N)"
    std::vector<std::string> names;    // the names used, in the file's spelling (prefix included)
    std::vector<std::string> ignored;  // names that matched no scheme (listed in the trace)
    bool fused_in_proj = false;        // came from torch's in_proj_weight
    // Set instead of w_q, w_k and w_v (then empty): the stacked weight read in place, which only
    // self-attention (query, key and value one array) can use. b_q, b_k, b_v stay its biases.
    std::optional<StackedInProj<T>> in_proj;
    std::optional<WeightInPlace<T>> w_o_in_place;  // (PO, H*Pv) read in place, set instead of w_o
};

// The sizes the parameters must agree with.
struct MhaDims {
    std::size_t heads = 0;      // H
    std::size_t kv_heads = 0;   // G (== H without --kv-heads)
    std::size_t query_dim = 0;  // Eq
    std::size_t key_dim = 0;    // Ek
    std::size_t value_dim = 0;  // Ev
    bool out_proj = true;       // false: no output projection (the heads concatenated)
};

// The per-head sizes that follow from validated parameters.
struct HeadSizes {
    std::size_t head_dim = 0;        // P
    std::size_t value_head_dim = 0;  // Pv
    std::size_t out_dim = 0;         // PO (H*Pv with no output projection)
};

// Loads parameters from PATH (.safetensors, .json, or a directory of NAME.npy), keeping only the
// names that start with PREFIX (stripped), resolves the naming scheme and checks every shape
// against DIMS (read_param_tensors, map_param_names, check_mha_params). Errors are InputError /
// ShapeError naming the tensor, its shape and the expected shape:
// "W_k.weight: shape (6, 5) but expected (6, 7) (G*P, Ek) with G=2, P=3, Ek=7".
template <class T>
MhaParams<T> load_mha_params(const std::string& path, const std::string& prefix, const MhaDims& dims);
// The same on TENSORS already read from PATH (read_param_tensors, params_files.hpp): a run reads the
// file while it reads its query, whose shape DIMS needs.
template <class T>
MhaParams<T> load_mha_params(std::map<std::string, Array<T>> tensors, const std::string& path,
                             const std::string& prefix, const MhaDims& dims);

// PyTorch's init for nn.MultiheadAttention, seeded: xavier-uniform projections
// (U(-a, a), a = sqrt(6 / (fan_in + fan_out))) and zero biases, drawn with Rng(SEED) in the order
// w_q, w_k, w_v, w_o. Sizes: P = HEAD_DIM, Pv = VALUE_HEAD_DIM, PO = OUT_DIM.
template <class T>
MhaParams<T> random_mha_params(const MhaDims& dims, const HeadSizes& sizes, bool bias,
                               std::uint64_t seed);

// torch's add_bias_kv for a random init: bias_k (1, 1, G*P) and bias_v (1, 1, G*Pv), each
// xavier-normal as torch draws them (std sqrt(2 / (fan_in + fan_out)) = sqrt(1 / width)), with
// Rng(SEED + 1) so the other parameters stay those of SEED.
template <class T>
void add_random_bias_kv(MhaParams<T>& params, std::uint64_t seed);

// The parameters under PyTorch's names (q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias,
// out_proj.weight, out_proj.bias), for --save-params. in_proj_bias is written when any bias is
// present (missing ones as zeros).
template <class T>
std::map<std::string, Array<T>> torch_state_dict(const MhaParams<T>& params);

}  // namespace attntrace
