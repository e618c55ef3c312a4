#pragma once
// The diagnosis of attntrace check: each known mistake is a hypothesis, tested by recomputing the
// stages as the mistake would (from the same inputs and parameters) and comparing with the other
// implementation's file at the first diverging stage, within that stage's tolerance.
//
//   missing_scale       scores not scaled
//   wrong_scale         scaled by another constant (1/sqrt(E), 1/P, sqrt(P) ..., or one fitted
//                       from a scores file)
//   softmax_axis        softmax over the query axis instead of the keys
//   transposed_weight   a projection used W instead of Wᵀ (square weights)
//   wrong_projection    a projection used another stage's weight (and bias)
//   head_split          heads split (and merged) as (L, P, H) instead of (L, H, P)
//   head_merge          heads split right but merged as (L, P, H) instead of (L, H, P)
//   mask_inverted       masked and allowed keys swapped
//   causal_offset       causal mask off by one (diagonal excluded, or one key too many)
//   context_from_input  weights multiplied by the value input instead of V
//   missing_bias        a projection's bias left out
// A hypothesis that explains the first diverging stage is accepted; when several do, the one that
// also explains the most later stage files wins (then the first in this list). Otherwise "unknown",
// with the error pattern: a constant factor, transposed axes, rows not summing to 1, a weighted sum
// over the query axis, or the largest difference.
#include <string>
#include <vector>

#include "attntrace/check/check.hpp"

namespace attntrace {

// REFERENCE: PROBLEM's stages; FILES: the other implementation's; FIRST: its first diverging stage.
Diagnosis diagnose(const CheckProblem& problem, const StageValues& reference, const std::vector<StageFile>& files,
                   const std::string& first, const ToleranceOverride& tol);

}  // namespace attntrace
