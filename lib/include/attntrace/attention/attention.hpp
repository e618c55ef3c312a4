#pragma once
// Scaled dot-product and multi-head attention, BLAS-backed, for float and double.
//
// Legend: B batch, Lq/Lk query/key lengths, Eq/Ek/Ev query/key/value input dims, E = Eq,
// H heads, G kv heads (H % G == 0; query head h uses kv head h / (H/G)), P head dim,
// Pv value head dim, PO output dim. sdpa has no heads: its "heads" are Q's leading dims.
//
// The forward pass, one function per stage (mha.cpp, sdpa.cpp; attend.cpp for the four in the
// middle, masks.hpp for the mask plan, stage_report.hpp for what the trace says about each):
//   project -> split_heads -> positions -> scores -> mask -> softmax -> context -> merge_heads
//   -> out_project
// split_heads and merge_heads move no data: a head is a column block of the projection with a
// leading dimension, and each head's context is written straight into its block of `merged`.
// A query row whose keys are all masked gets all-zero weights and a zero context (never NaN, even
// when V holds NaN or Inf); a row with a NaN among its allowed scores is NaN, as in PyTorch.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>
#include <optional>
#include <string>

#include "attntrace/attention/masks.hpp"
#include "attntrace/attention/observer.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

struct AttentionOptions {
    std::optional<double> scale;   // default 1/sqrt(P)
    // > 0: the scores soft-capped before the masks, tanh(s / softcap) * softcap (Gemma 2's
    // attn_logit_softcapping); the weights are the softmax of the capped scores. Runs on the BLAS
    // kernels (the fused ones do not cap).
    std::optional<double> softcap;
    bool need_weights = false;     // return the softmax weights
    bool average_heads = false;    // mha: average the weights over heads, as PyTorch's default
    bool row_stats = false;        // per query row: entropy and most-attended key (head statistics)
    std::size_t threads = 0;       // 0: every core this process may use
    std::size_t pooled_cells = 0;  // > 0: AttentionResult::pooled, at most this many cells per axis
    // Called as (done, total) from the worker threads while scores -> context runs (a progress bar).
    std::function<void(std::size_t, std::size_t)> progress;
    // Without need_weights: each block of weight rows goes here as it is computed, as (index of
    // its first element in the (N, Lq, Lk) weights, its elements (of the computation's type T),
    // their count), from the worker threads in any order. The weights are never held whole: a
    // file can take them (pwrite) with no (N, Lq, Lk) buffer to allocate and zero.
    std::function<void(std::size_t, const void*, std::size_t)> weights_sink;
    // mha with an output projection: each block of output rows also goes here as the projection
    // computes it, as (the output's final shape, index of the block's first element, its elements
    // (of type T), their count), from the worker threads in any order, so a file can take them
    // while the other rows are computed. The output is still returned whole; AttentionResult::
    // output_streamed says whether every row went here. A throw stops the run and reaches mha's
    // caller.
    using OutputSink = std::function<void(const Shape&, std::size_t, const void*, std::size_t)>;
    OutputSink output_sink;
    std::string query_name = "query", key_name = "key", value_name = "value";
};

struct MhaConfig {
    std::size_t heads = 0;       // H
    std::size_t kv_heads = 0;    // G; 0 means H
    bool out_proj = true;        // false: heads concatenated with no W_o (seed 004)
    bool add_zero_attn = false;  // torch's add_zero_attn: a zero key/value row per batch, Lk grows by 1
};

// One value per attention row, taken from the buffer pool (tensor/buffer.hpp) like an Array's: at
// L = 4096, H = 8, RowStats' six are 1.6 MB, which as fresh 4 KiB pages cost 5-7 ms of mha's
// serial start on a VM (docs/performance.md); from the pool they take pages made ahead.
template <class V>
using RowValues = std::vector<V, BufferAllocator<V>>;

// What each attention row attends to: per (head index, query), the head index being (B, H) for
// mha and Q's leading dims for sdpa. Computed on both paths (the tiled one keeps no weights).
struct RowStats {
    Shape shape;                          // (B, H, Lq) or (..., Lq); unbatched mha: (H, Lq)
    RowValues<double> entropy;            // -sum_j w_j ln w_j, in nats; 0 for an empty row, NaN for a NaN row
    RowValues<std::int64_t> argmax;       // the key with the most weight (first of ties); -1 if empty or NaN
    RowValues<double> max_weight;         // its weight; 0 if empty, NaN for a NaN row
    // The head detectors' per-row values (detectors.hpp): w[i, i-1], w[i, i] (square planes only),
    // w[i, 0]; NaN where the row has no such key, and for an empty or NaN row.
    RowValues<double> previous_token{}, diagonal{}, first_token{};
};

template <class T>
struct AttentionResult {
    Array<T> output;                // sdpa (..., Lq, Ev); mha (B, Lq, PO) or (Lq, PO)
    std::optional<Array<T>> weights;  // (..., Lq, Lk); mha (B, H, Lq, Lk), averaged (B, Lq, Lk)
    double scale = 0;               // the scale actually applied
    double softcap = 0;             // the soft cap applied to the scores (0: none)
    std::size_t empty_rows = 0;     // query rows (over every head) whose keys are all masked
    HeadSizes sizes;                // mha: P, Pv, PO
    std::optional<RowStats> row_stats;  // with options.row_stats
    std::optional<PooledWeights> pooled;  // with options.pooled_cells: per head, (B, H) or Q's leading dims
    bool output_streamed = false;   // every row of the output went to options.output_sink
};

// Q (..., Lq, E), K (..., Lk, E), V (..., Lk, Ev), equal leading dims.
template <class T>
// POSITIONS (optional): rotary on Q and K (stages q_rotary, k_rotary; each of Q's leading
// indices is one head of E dims), ALiBi (slopes over Q's dim -3), causal alignment and window.
AttentionResult<T> sdpa(const Array<T>& q, const Array<T>& k, const Array<T>& v, const Masks<T>& masks,
                        const AttentionOptions& options, Observer<T>* observer = nullptr,
                        const PositionStages<T>* positions = nullptr);

// torch.nn.MultiheadAttention(batch_first=True) semantics. QUERY (B, Lq, Eq) or (Lq, Eq);
// KEY (B, Lk, Ek), VALUE (B, Lk, Ev), with the same rank as QUERY. POSITIONS (optional): a model
// layer's stages around the core: normed (the query input's norm, also used as key / value when
// they are the query), q_rotary / k_rotary after the split into heads, ALiBi and window masks.
template <class T>
AttentionResult<T> mha(const Array<T>& query, const Array<T>& key, const Array<T>& value,
                       const MhaParams<T>& params, const MhaConfig& config, const Masks<T>& masks,
                       const AttentionOptions& options, Observer<T>* observer = nullptr,
                       const PositionStages<T>* positions = nullptr);

// The kernels of the tiled path (nothing (Lq, Lk) kept): `avx512` runs scores, mask, online
// softmax and context in one pass of AVX-512 code (fused_attention.hpp, fused_kernels.hpp); `blas`
// does OpenBLAS products per block with the softmax in between. `best` is avx512 on a CPU with
// AVX-512F, else blas. The others are for tests and benchmarks (the app reads
// ATTNTRACE_ATTENTION_KERNEL). The fused kernels serve float runs whose masks are key ranges
// (causal, windows, valid lengths), key padding and ALiBi, that draw no pictures, with fewer than
// 2^24 queries and keys; anything else (an attention mask, pooled pictures, double, soft-capped
// scores) takes the BLAS path.
enum class AttentionKernel : std::uint8_t { best, blas, avx512 };

// Sets the kernels later runs use; UsageError "attention kernel: ..." when this CPU cannot run it.
void set_attention_kernel(AttentionKernel kernel);
// The kernels runs use now (`best` resolved): blas or avx512.
AttentionKernel attention_kernel();
// "best", "blas", "avx512"; and back (nullopt for another word).
std::string attention_kernel_name(AttentionKernel kernel);
std::optional<AttentionKernel> attention_kernel_named(const std::string& name);

}  // namespace attntrace
