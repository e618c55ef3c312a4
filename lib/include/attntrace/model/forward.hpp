#pragma once
// The forward pass of a whole model (model.hpp) on a batch of B sequences of one length, as the
// paper reads it:
//   embed -> for each layer: the family's block (norm -> attention -> residual -> norm -> MLP ->
//   residual, or its variant) -> final norm -> head
// each a named function of forward.cpp, equal to transformers' eager forward
// (tests/goldens/hf_model.py transcribes it).
//
// Streaming: one block's weights are in memory at a time (read from the memory map, converted to
// T in parallel, the file's pages dropped); the embedding tables are gathered row by row and the
// head is computed in blocks of vocabulary rows across the threads, each block read and converted
// when its turn comes. Nothing (L, L) outlives its layer: each layer's attention goes to the
// ModelObserver as it is computed, and the observer (the app) decides what to keep.
//
// Sites (sites.hpp): an observer that asks for a site gets its values for every sequence of the
// batch as the forward reaches it, may replace them, and may fork sequences there; ForwardPass
// runs the layers one step at a time, so an analysis can resume from a saved residual stream.
//
// Legend: L sequence length, E hidden size, H heads, I MLP size, V vocabulary, N layers,
// P logit positions.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/model/norms.hpp"
#include "attntrace/model/sites.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// What layer N's attention leaves once it has run.
struct LayerAttention {
    std::size_t layer = 0;
    const RowStats* row_stats = nullptr;     // (H, L): entropy, argmax, detector values per row
    const PooledWeights* pooled = nullptr;   // (H, cells, cells) with ForwardOptions::pooled_cells
    std::size_t empty_rows = 0;
    double scale = 0;
};

// A mixture-of-experts layer's routing (model.hpp MoeConfig): for each of its B*L rows, the K
// experts chosen, most weight first, and their weights as the MLP applies them (after the
// renormalisation where the config asks for it).
struct LayerRouting {
    std::size_t layer = 0, rows = 0, k = 0, experts = 0;  // N, B*L, K, X
    std::vector<std::uint32_t> chosen;                    // (rows, K) expert ids
    std::vector<double> weights;                          // (rows, K)
    std::vector<std::size_t> tokens;                      // (X) the rows routed to each expert
};

// Receives what the forward computes, as it computes it. Every method has a default that
// ignores it; the calls are per block of values, never per value.
template <class T>
class ModelObserver {
public:
    virtual ~ModelObserver() = default;
    // Whether layer N's attention weights (H, L, L) go to attention_rows.
    virtual bool wants_weights(std::size_t layer) const {
        (void)layer;
        return false;
    }
    // COUNT weights of layer N from element FIRST of its (H, L, L), from the worker threads in
    // any order while the layer runs; the block is gone after the call.
    virtual void attention_rows(std::size_t layer, std::size_t first, const T* weights, std::size_t count) {
        (void)layer, (void)first, (void)weights, (void)count;
    }
    // Layer N's attention is done (every attention_rows of that layer came before).
    virtual void attention_done(const LayerAttention& attention) { (void)attention; }
    // hidden_states[INDEX] (B*L rows of E) as transformers' output_hidden_states: 0 the
    // embeddings, n the output of block n - 1, N after the final norm where the family has one.
    virtual void hidden_state(std::size_t index, const T* x, std::size_t rows, std::size_t e) {
        (void)index, (void)x, (void)rows, (void)e;
    }
    // Whether SITE of layer N goes to at_site (asked once per layer).
    virtual bool wants_site(Site site, std::size_t layer) const {
        (void)site, (void)layer;
        return false;
    }
    // A site's values as the forward reaches it: read, replaced in place, or forked.
    virtual void at_site(SiteValues<T>& values) { (void)values; }
    // A MoE layer's routing, once its router has run (before the experts).
    virtual void expert_routing(const LayerRouting& routing) { (void)routing; }
};

// Several observers as one, called in the order added.
template <class T>
class ObserverList final : public ModelObserver<T> {
public:
    void add(ModelObserver<T>* o) { list_.push_back(o); }
    bool wants_weights(std::size_t layer) const override;
    void attention_rows(std::size_t layer, std::size_t first, const T* weights, std::size_t count) override;
    void attention_done(const LayerAttention& attention) override;
    void hidden_state(std::size_t index, const T* x, std::size_t rows, std::size_t e) override;
    bool wants_site(Site site, std::size_t layer) const override;
    void at_site(SiteValues<T>& values) override;
    void expert_routing(const LayerRouting& routing) override;

private:
    std::vector<ModelObserver<T>*> list_;
};

// Where a head's (P, V) logits go when no (P, V) array is to hold them: COLUMNS(first, count,
// block) with BLOCK the (P, count) logits of vocabulary columns first .. first + count - 1,
// row-major; called in order, one call at a time (on a side thread, while the head computes the
// next block: the call must not touch what the workers use), each block gone after its call.
// Blocks of columns, not rows, because the head reads its (V, E) weight once, in vocabulary rows.
template <class T>
using LogitsColumns = std::function<void(std::size_t first, std::size_t count, const T* block)>;

struct ForwardOptions {
    // (N) the layers whose attention is summarized (row statistics, pooled grids); empty: every one.
    std::vector<bool> attention_layers;
    bool row_stats = true;
    std::size_t pooled_cells = 0;      // > 0: LayerAttention::pooled, at most this many cells per axis
    std::size_t layers = 0;            // run layers 0 .. layers - 1 only (0: all; the head needs all)
    bool all_logits = false;           // the logits of every position
    // With all_logits: where the (L, V) logits go instead of ForwardResult::logits, a block of
    // vocabulary columns at a time (LogitsColumns above, its block a `const T*`): written into a
    // file as they are computed, no (L, V) array is made.
    std::function<void(std::size_t first, std::size_t count, const void* block)> logits_columns;
    std::vector<std::size_t> logit_positions;  // else of these positions (none: no head)
    std::size_t threads = 0;           // 0: every core this process may use
};

template <class T>
struct ForwardResult {
    std::size_t layers_run = 0;
    std::optional<Array<T>> logits;  // (P, V): P = L with all_logits, else logit_positions.size();
                                     // none when ForwardOptions::logits_columns took them
};

// Runs MODEL on IDS (checked with check_ids first; "ids" names them in messages). The head runs
// when logits are asked for; UsageError when the model has none (Model::head_missing says why).
template <class T>
ForwardResult<T> forward(const Model& model, const std::vector<std::uint32_t>& ids, const ForwardOptions& options,
                         ModelObserver<T>& observer);

// The forward pass one step at a time, on a batch of B sequences of one length L: embed (or
// resume from a residual stream), run the blocks up to a layer, then the logits. The batch grows
// when an observer forks a sequence at a site. OPTIONS' layers, all_logits, logits_columns
// and logit_positions are not used (logits() takes its positions).
template <class T>
class ForwardPass {
public:
    ForwardPass(const Model& model, const ForwardOptions& options, ModelObserver<T>& observer);
    ~ForwardPass();
    ForwardPass(const ForwardPass&) = delete;
    ForwardPass& operator=(const ForwardPass&) = delete;

    // hidden_states[0] of each sequence of IDS (B lists of one length, each checked with
    // check_ids, named WHAT in messages); the next layer is 0.
    void embed(const std::vector<std::vector<std::uint32_t>>& ids, const std::string& what = "ids");
    // Starts from the residual stream X (B*L rows of E) of B sequences entering layer LAYER.
    void resume(std::size_t layer, Array<T> x, std::size_t sequences);
    // Runs blocks next_layer() .. LAYER - 1 (one block's weights held at a time); after the last
    // block, resid_final and the final norm.
    void run_until(std::size_t layer);

    std::size_t next_layer() const;
    std::size_t sequences() const;          // B
    std::size_t length() const;             // L
    const Array<T>& residual() const;       // (B*L, E): after every block run, the final norm's output
    // The logits (B*P, V) at POSITIONS (P of them) of every sequence, sequence-major, after every
    // block has run (UsageError when the model has no head). To COLUMNS when given, and then an
    // empty array is returned.
    Array<T> logits(const std::vector<std::size_t>& positions, const LogitsColumns<T>* columns = nullptr);

private:
    struct State;
    std::unique_ptr<State> state_;
};

// ---- the unembedding, for the analyses (the logit lens, direct logit attribution) ------------

// The logits (R, V) of residual streams X (R, E): the final norm computed afresh on each row (none
// for BERT/RoBERTa, whose MLM head has its own), then the head; with CAPPED false, the logits
// before Gemma 2/3's final_logit_softcapping.
template <class T>
Array<T> unembed(const Model& model, const Array<T>& x, std::size_t threads, bool capped = true);

// The final norm's weights (none: NormKind::none; BERT/RoBERTa have no final norm).
template <class T>
struct FinalNorm {
    NormKind kind = NormKind::none;
    double eps = 0;
    std::optional<Array<T>> weight, bias;  // (E)
};
template <class T>
FinalNorm<T> final_norm_weights(const Model& model);

// The head's rows (IDS.size(), E) for IDS (the LM head's, or the token embeddings' when tied) and
// its bias there (zeros when it has none).
template <class T>
Array<T> unembedding_rows(const Model& model, const std::vector<std::uint32_t>& ids);
template <class T>
std::vector<T> unembedding_bias(const Model& model, const std::vector<std::uint32_t>& ids);

// About how many bytes a forward of SEQUENCES sequences of L tokens holds at its peak with
// ELEMENT-byte values: the largest block's weights, the activations, the attention's per-thread
// blocks and projections, the logits asked for and the head's per-thread blocks (for
// --max-memory; the (H, L, L) weights are never held by the forward).
std::uint64_t forward_memory_bytes(const ModelConfig& config, std::size_t length, const ForwardOptions& options,
                                   std::size_t element, std::size_t sequences = 1);

}  // namespace attntrace
