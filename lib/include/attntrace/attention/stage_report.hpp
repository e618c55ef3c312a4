#pragma once
// The stage report, in one place: what the trace says about each stage of the forward pass (its
// note, its attributes, its values when the observer asks) and how it reaches the Observer. The
// core calls one report_* function per stage; nothing else builds a note or an attribute.
//
// Legend: B batch, Lq/Lk query/key lengths, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim. A row buffer (B*L, ld) holds a stage as rows with leading dim ld.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/observer.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

template <class T>
struct Reporter {
    Observer<T>* observer = nullptr;
    bool batched = true;  // mha with a 2-D input drops the B axis from every reported shape

    bool wants(std::string_view stage) const { return observer && observer->wants_values(stage); }
    Shape shown(Shape s) const;  // s without its B axis when not batched

    // Reports a stage; VALUES (when given) must already have the full, batched shape.
    void report(std::string_view name, Shape shape, std::string note, nlohmann::json attributes,
                Array<T>* values = nullptr) const;
};

// query, key, value: (B, Lq, Eq), (B, Lk, Ek), (B, Lk, Ev) with B explicit. An input that is the
// same tensor as an earlier one says so (attribute "same_as") and is not printed again.
template <class T>
void report_inputs(const Reporter<T>& rep, const Array<T>& q, const Array<T>& k, const Array<T>& v, const Shape& qs,
                   const Shape& ks, const Shape& vs, const AttentionOptions& options);

// One projection: NAME "q", "k" or "v" (or "output"), rows Y (B*L, ld) of which the first D
// columns are the stage, from INPUT ("query") through weight W_which (D, E) and BIAS.
template <class T>
struct ProjectionReport {
    const char* name;             // stage name
    const char* input;            // "query", "key", "value", "merged"
    const char* which;            // "q", "k", "v", "o"
    Shape w;                      // W's shape (D, E)
    const std::optional<Array<T>>& bias;  // (D)
    bool fused;                   // self-attention through one stacked GEMM
    const char* appended;         // rows appended after the projection ("" or " + bias_k row + zero row")
};
template <class T>
void report_projection(const Reporter<T>& rep, const ProjectionReport<T>& p, const T* y, std::size_t b,
                       std::size_t l, std::size_t d, std::size_t ld);

// The output stage: (B, Lq, PO) through W_o of shape W_O (PO, H*Pv), or the merged heads when
// W_O is nullopt; FUSED as the input projections were.
template <class T>
void report_output(const Reporter<T>& rep, Array<T>& output, const std::optional<Shape>& w_o,
                   const std::optional<Array<T>>& b_o, bool fused);

// NAME "q_heads", "k_heads", "v_heads" or "context": (B, heads, L, D), head h being columns
// [h*D, (h+1)*D) of the rows Y (B*L, ld).
template <class T>
void report_heads(const Reporter<T>& rep, const char* name, const T* y, std::size_t b, std::size_t heads,
                  std::size_t l, std::size_t d, std::size_t ld);

// scores, masked_scores and weights, each (lead..., Lq, Lk) = PLANE_SHAPE; a stage not kept has
// no values. MASKS describes the masks ("" for none); SOFTCAP > 0: the scores were soft-capped.
template <class T>
struct AttentionReport {
    Array<T>* scores = nullptr;
    Array<T>* masked_scores = nullptr;
    Array<T>* weights = nullptr;
};
template <class T>
void report_attention(const Reporter<T>& rep, const AttentionReport<T>& kept, const Shape& plane_shape, T scale,
                      T softcap, const std::string& masks, std::size_t empty_rows);

// merged (B, Lq, H*Pv), sdpa's output (..., Lq, Ev): "heads concatenated", "weights @ V".
template <class T>
void report_merged(const Reporter<T>& rep, Array<T>& merged, bool keep_values);
template <class T>
void report_sdpa_output(const Reporter<T>& rep, Array<T>& output);

// The first line of the text trace, the run in one sentence. mha: "mha: 2 heads sharing 1 kv
// heads, head dim 3, value head dim 3, scale 0.4082483, params p.safetensors (torch), ignored: x,
// 0 empty rows"; sdpa: "sdpa: scale 0.125, 0 empty rows".
template <class T>
std::string mha_header(const AttentionResult<T>& result, const MhaParams<T>& params, const MhaConfig& config);
template <class T>
std::string sdpa_header(const AttentionResult<T>& result);

}  // namespace attntrace
