#pragma once
// Masks, planned in one place: which keys each query row may see (causal, an attention mask,
// key padding, valid lengths; later sliding windows and ALiBi slopes) and what a disallowed score
// becomes. The core plans once at its entry (every mask's shape checked there) and then applies
// the plan row by row, on the tiled and the weights-kept paths alike.
//
// Legend: B batch, H heads, N = the head index's size ((B, H) for mha, Q's leading dims for sdpa),
// Lq/Lk query/key lengths.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// Masks combine: what is allowed is the AND of every mask; a float attn_mask is added to the
// scores. Each optional mask keeps the name it came from for messages.
template <class T>
struct Masks {
    bool causal = false;                   // query i sees keys j <= i (top-left aligned)
    bool causal_in_attn_mask = false;      // causal folded into attn_mask (with_causal_mask)
    std::optional<Array<T>> attn_mask;     // (Lq, Lk) or broadcastable to (B, H, Lq, Lk)
    bool attn_mask_is_bool = false;        // true: nonzero = not allowed; false: added
    std::string attn_mask_name;
    std::optional<Array<T>> key_padding_mask;  // (B, Lk), nonzero = ignore that key (mha only)
    std::string key_padding_mask_name;
    std::optional<Array<T>> valid_lens;    // (B,) or (B, Lq): keys j >= len are masked (mha only)
    std::string valid_lens_name;
};

// Where each mask applies to score (n, i, j), n the head index over `lead`. Points into the Masks
// it was planned from, which must outlive it.
template <class T>
struct MaskPlan {
    bool causal = false;
    Shape lead;                       // (B, H) for mha, Q's leading dims for sdpa
    const T* attn = nullptr;          // broadcast view over (lead..., Lq, Lk)
    bool attn_is_bool = false;
    std::vector<std::size_t> attn_lead_strides;  // (lead.size()), 0 where broadcast
    std::size_t attn_stride_i = 0, attn_stride_j = 0;
    std::size_t heads_per_batch = 1;  // n / heads_per_batch = batch index (mha)
    const T* key_padding = nullptr;   // (B, Lk)
    const T* valid_lens = nullptr;    // (B,) or (B, Lq)
    bool valid_lens_per_query = false;
    std::size_t lq = 0, lk = 0;
    std::string description;          // "causal & bool mask m.npy", "" with no mask: for the trace
    KeyVisibility visibility;         // causal alignment and window; when set it decides over `causal`
    const double* alibi = nullptr;    // (alibi_heads) ALiBi slopes: + slope_h * j, h = n % alibi_heads
    std::size_t alibi_heads = 1;

    bool any() const { return causal || visibility.any() || alibi || attn || key_padding || valid_lens; }

    // The first key row I may see (a sliding window starts later).
    std::size_t key_begin(std::size_t i) const {
        return visibility.any() ? visible_keys(visibility, i, lq, lk).begin : 0;
    }

    // The offset of row (n, i) in the attention mask.
    std::size_t attn_offset(std::size_t n, std::size_t i) const {
        std::size_t off = i * attn_stride_i;
        for (std::size_t d = lead.size(); d-- > 0;) {
            off += (n % lead[d]) * attn_lead_strides[d];
            n /= lead[d];
        }
        return off;
    }

    // The first key row (n, i) may not see because of causal / valid lengths (all keys from it on
    // are masked for that row).
    std::size_t key_end(std::size_t n, std::size_t i) const {
        std::size_t end = lk;
        if (visibility.any()) {
            end = visible_keys(visibility, i, lq, lk).end;
        } else if (causal) {
            end = std::min(end, i + 1);
        }
        if (valid_lens) {
            const std::size_t b = n / heads_per_batch;
            const T len = valid_lens_per_query ? valid_lens[b * lq + i] : valid_lens[b];
            end = std::min(end, static_cast<std::size_t>(len));
        }
        return end;
    }

    // Masked scores for keys [j0, j1) of row (n, i), ROW (j1 - j0) pointing at key j0: a
    // disallowed score becomes -inf (a NaN score there too, as PyTorch's masked_fill), a float mask
    // is added.
    void apply(T* row, std::size_t n, std::size_t i, std::size_t j0, std::size_t j1) const {
        const T minus_inf = -std::numeric_limits<T>::infinity();
        const std::size_t end = std::clamp(key_end(n, i), j0, j1);
        const std::size_t begin = std::clamp(key_begin(i), j0, end);
        for (std::size_t j = j0; j < begin; ++j) row[j - j0] = minus_inf;
        for (std::size_t j = end; j < j1; ++j) row[j - j0] = minus_inf;
        if (alibi) {
            const double slope = alibi[n % alibi_heads];
            for (std::size_t j = begin; j < end; ++j) row[j - j0] += static_cast<T>(slope * static_cast<double>(j));
        }
        if (key_padding) {
            const T* pad = key_padding + (n / heads_per_batch) * lk;
            for (std::size_t j = j0; j < end; ++j)
                if (pad[j] != T(0)) row[j - j0] = minus_inf;
        }
        if (attn) {
            const T* m = attn + attn_offset(n, i);
            if (attn_is_bool) {
                for (std::size_t j = j0; j < end; ++j)
                    if (m[j * attn_stride_j] != T(0)) row[j - j0] = minus_inf;
            } else {
                for (std::size_t j = j0; j < end; ++j) row[j - j0] += m[j * attn_stride_j];
            }
        }
    }
};

// sdpa's plan: scores (lead..., Lq, Lk). Throws ShapeError for an attention mask that does not
// broadcast, UsageError for key padding or valid lengths (mha only).
template <class T>
MaskPlan<T> plan_sdpa_masks(const Masks<T>& masks, const Shape& lead, std::size_t lq, std::size_t lk);

// torch's add_bias_kv / add_zero_attn: a copy of MASKS whose attention mask and key padding mask
// get EXTRA allowed (zero) columns appended on their last (Lk) axis, Lk -> Lk + EXTRA.
template <class T>
Masks<T> pad_key_columns(const Masks<T>& masks, std::size_t extra);

// MASKS with `causal` folded into the attention mask as the equivalent mask over (LQ, LK): a bool
// mask gets key j > i not allowed, a float mask -inf there, broadcast with the attention mask
// already there (an attention mask whose last two dims do not broadcast to (LQ, LK) is left for the
// plan to refuse). Then causal is false and causal_in_attn_mask true, so the trace still says
// "causal". For torch's add_bias_kv / add_zero_attn, whose appended keys every query may see.
template <class T>
Masks<T> with_causal_mask(const Masks<T>& masks, std::size_t lq, std::size_t lk);

// mha's plan: scores (B, H, Lq, Lk); BATCHED false for a 2-D input, whose masks have no B axis
// (an attention mask (H, Lq, Lk) or (Lq, Lk), key padding (Lk), valid lengths (1,)). Throws
// ShapeError / InputError naming the mask's file, its shape and the expected one.
template <class T>
MaskPlan<T> plan_mha_masks(const Masks<T>& masks, std::size_t b, std::size_t h, std::size_t lq, std::size_t lk,
                           bool batched);

}  // namespace attntrace
