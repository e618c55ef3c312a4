#pragma once
// The logit lens (nostalgebraist): the residual stream after l blocks (resid_pre l, and
// resid_final for l = N), for l = 0 .. N, through the final norm computed afresh on it and the
// head, as a probability over the vocabulary at every position. Layer N is the model's own
// prediction. TransformerLens's accumulated_resid(apply_ln=True) instead divides every layer by the
// final residual's cached scale (docs/interventions.md).
//
// Legend: L length, V vocabulary, N layers, K layers shown.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "attntrace/model/model.hpp"
#include "attntrace/model/model_trace.hpp"

namespace attntrace {

struct LensOptions {
    std::vector<std::size_t> layers;        // (K) the layers shown, from 0 .. N, increasing; empty: all
    std::size_t top = 1;                    // candidates per cell
    std::optional<std::uint32_t> target;    // its probability and rank in each cell
    std::size_t threads = 0;
    std::uint64_t budget = std::uint64_t{256} << 20;  // the bytes of logits held at once
};

struct LensCell {
    std::vector<Candidate> top;             // the TOP most likely tokens (ids; text left empty)
    double target_probability = 0;          // with a target
    std::size_t target_rank = 0;            // 1 = the top
};

struct LensResult {
    std::vector<std::size_t> layers;        // (K)
    std::size_t length = 0;                 // L
    std::vector<LensCell> cells;            // (K, L)
    const LensCell& cell(std::size_t k, std::size_t position) const { return cells[k * length + position]; }
};

// The lens of MODEL on IDS. UsageError for a model without a head or a layer past N.
template <class T>
LensResult logit_lens(const Model& model, const std::vector<std::uint32_t>& ids, const LensOptions& options);

}  // namespace attntrace
