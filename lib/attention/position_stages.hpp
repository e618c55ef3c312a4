#pragma once
// The stages a model layer adds around the core (internal to lib/attention; positions.hpp has the math).
// Legend as in attention.hpp: B batch, L length, E embed dim, P head dim.
#include <cstddef>
#include <optional>

#include "attntrace/attention/masks.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/attention/stage_report.hpp"

namespace attntrace::stages {

// Rows (B*L, ld) holding HEADS heads, head h at columns [h*P, (h+1)*P); rewritten in place.
template <class T>
struct HeadRows {
    T* base = nullptr;
    std::size_t heads = 0, l = 0, ld = 0;
};

// normed: X (..., E) through the layer's pre-attention norm, reported with SHAPE (batched); none
// without POS or a norm.
template <class T>
std::optional<Array<T>> normed(const Array<T>& x, const PositionStages<T>* pos, const Shape& shape,
                               const Reporter<T>& rep);

// positions: Qwen3's per-head q/k RMSNorm and the rotary embedding rewrite Q and K in place
// (reported as q_rotary / k_rotary with the shapes Q_SHOWN / K_SHOWN); ALiBi slopes over
// ALIBI_HEADS, the causal alignment and the window go into PLAN and its description. Nothing
// without POS. UsageError "rotary dims: ..." past the head dim P, "ALiBi: ..." for a slope count
// other than ALIBI_HEADS (the app names its flags).
template <class T>
void positions(const PositionStages<T>* pos, std::size_t b, std::size_t p, const HeadRows<T>& q, const HeadRows<T>& k,
               const Shape& q_shown, const Shape& k_shown, MaskPlan<T>& plan, std::size_t alibi_heads,
               const Reporter<T>& rep, std::size_t threads = 1);

}  // namespace attntrace::stages
