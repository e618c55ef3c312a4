#pragma once
// The core reports each stage of the forward pass to an Observer, in execution order. The tracer
// (text or JSON) and --dump hook in here; the core itself never prints.
//
// Stage names (one scheme, used by the trace, --dump STAGE=FILE and the JSON trace):
//   query, key, value      the inputs                         (B, Lq, Eq) (B, Lk, Ek) (B, Lk, Ev)
//   q, k, v                the projections                    (B, Lq, H*P) (B, Lk, G*P) (B, Lk, G*Pv)
//   q_heads, k_heads, v_heads  split into heads               (B, H, Lq, P) (B, G, Lk, P) (B, G, Lk, Pv)
//   scores                 Q·Kᵀ·scale, before masks           (B, H, Lq, Lk)
//   masked_scores          scores after every mask            (B, H, Lq, Lk)
//   weights                softmax(masked_scores)             (B, H, Lq, Lk)
//   context                weights·V per head                 (B, H, Lq, Pv)
//   merged                 heads concatenated                 (B, Lq, H*Pv)
//   output                 the output projection              (B, Lq, PO)
// sdpa reports query, key, value, scores, masked_scores, weights and output, with Q's leading
// dims in place of (B, H). A 2-D (unbatched) mha input drops the B axis everywhere.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

template <class T>
struct StageView {
    std::string_view name;        // one of the names above
    Shape shape;
    std::string note;             // what produced it, for the text trace: "query @ W_q^T + b_q" (ASCII; a terminal renderer may prettify)
    nlohmann::json attributes;    // structured facts: {"weight": "w_q", "weight_shape": [6, 6], "bias": true}
    const Array<T>* values = nullptr;  // set only when the observer wants_values(name)
};

template <class T>
class Observer {
public:
    virtual ~Observer() = default;
    // Whether the observer needs STAGE's values. Asking for an (Lq, Lk) stage makes the core
    // materialize it, so an observer asks only for what it will use.
    virtual bool wants_values(std::string_view stage) const = 0;
    virtual void stage(const StageView<T>& view) = 0;
};

// The stage names in execution order, for --dump validation and docs/trace.md.
const std::vector<std::string>& mha_stage_names();
const std::vector<std::string>& sdpa_stage_names();

}  // namespace attntrace
