#pragma once
// attend()'s fused path (attention.hpp's AttentionKernel): scores -> mask -> online softmax ->
// context in one pass of vector code per block of query rows (fused_kernels.hpp), no BLAS call.
// Internal to lib/attention.
#include <cstddef>
#include <functional>

#include "attention_stages.hpp"

namespace attntrace::stages {

// Whether the fused kernels run this attention: float, a fused kernel chosen, the tiled path
// (nothing (Lq, Lk) kept or streamed), no pooled pictures, no attention mask, and query and key
// indices below 2^24 (the kernel compares them in float lanes, exact only up to there).
bool fused_applies(const HeadBatch<float>& hb, const Kept<float>& kept, const MaskPlan<float>& masks);

// attend() through the fused kernels; the same contract (empty rows returned, row statistics
// and detector values filled when KEPT asks for them).
std::size_t attend_fused(const HeadBatch<float>& hb, const MaskPlan<float>& masks, float scale, Kept<float>& kept,
                         std::size_t threads, const std::function<void(std::size_t, std::size_t)>& progress);

}  // namespace attntrace::stages
