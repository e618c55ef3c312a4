#pragma once
// Sites: the activations of a forward pass an analysis reads or replaces, named after
// TransformerLens's hooks (HookedTransformer's `blocks.N.hook_*`). The forward pass (forward.hpp)
// reports each site a ModelObserver asks for as it reaches it, for every sequence of its batch, and
// takes back what the observer wrote; an observer may also fork a sequence there (the fork runs on
// from the site, so a sweep of interventions shares everything computed before it).
//
//   site         shape of one sequence   what it is                              TransformerLens
//   resid_pre    (L, E)                  the residual stream entering block n     blocks.n.hook_resid_pre
//   z            (L, H*Pv)               head h's context A_h V_h at columns      blocks.n.attn.hook_z
//                                        [h*Pv, (h+1)*Pv), before the output
//                                        projection (a GQA head reads its kv head's V)
//   head_out     (L, H*E)                head h's z times its slice of W_o at     blocks.n.attn.hook_result
//                                        columns [h*E, (h+1)*E), no bias (read only;
//                                        bias() gives b_o): the heads' head_out
//                                        summed plus b_o is the output projection
//   attn_out     (L, E)                  the attention sublayer's output as it is blocks.n.hook_attn_out
//                                        added to the residual stream (BERT/RoBERTa:
//                                        the dense output before the add-and-norm)
//   mlp_out      (L, E)                  the MLP's output as it is added          blocks.n.hook_mlp_out
//   resid_final  (L, E)                  after the last block, before the final   blocks.{N-1}.hook_resid_post
//                                        norm (layer = N)
//
// Legend: B sequences, L length, E hidden size, H heads, Pv value head dim, N layers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor/buffer.hpp"

namespace attntrace {

enum class Site : std::uint8_t { resid_pre, z, head_out, attn_out, mlp_out, resid_final };

// "resid_pre", "z", "head_out", "attn_out", "mlp_out", "resid_final"; and back (nullopt for another word).
std::string_view site_name(Site site);
std::optional<Site> site_named(std::string_view name);

// One site's values for every sequence of the forward's batch, (B, L, width) row-major. Pointers
// from sequence() are valid until the next fork.
template <class T>
class SiteValues {
public:
    SiteValues(Site site, std::size_t layer, std::size_t sequences, std::size_t length, std::size_t width,
               std::size_t heads, const T* bias = nullptr);
    Site site() const { return site_; }
    std::size_t layer() const { return layer_; }   // n (N for resid_final)
    std::size_t sequences() const { return values_.size() / (length_ * width_); }  // B, forks included
    std::size_t length() const { return length_; }  // L
    std::size_t width() const { return width_; }    // E, H*Pv or H*E
    std::size_t heads() const { return heads_; }    // H
    // Sequence B's (L, width) values: read them, or write them to replace the activation there
    // (not head_out's, which are only read).
    T* sequence(std::size_t b) { return values_.data() + b * length_ * width_; }
    const T* sequence(std::size_t b) const { return values_.data() + b * length_ * width_; }
    const T* bias() const { return bias_; }         // head_out: b_o (E), or null
    // Appends COPIES copies of sequence B as it is here (its values at this site and its residual
    // stream) to the batch; they run on from here as sequences of their own. Returns the index of
    // the first copy.
    std::size_t fork(std::size_t b, std::size_t copies = 1);

    // ---- for the forward pass ----
    std::vector<T, BufferAllocator<T>>& values() { return values_; }
    // For each sequence appended by fork (in order), the sequence of the batch it was a copy of
    // before this site (resolved through forks of forks).
    const std::vector<std::size_t>& forked_from() const { return forked_from_; }
    std::size_t original_sequences() const { return original_; }

private:
    Site site_;
    std::size_t layer_, length_, width_, heads_, original_;
    const T* bias_;
    std::vector<T, BufferAllocator<T>> values_;
    std::vector<std::size_t> forked_from_;
};

}  // namespace attntrace
