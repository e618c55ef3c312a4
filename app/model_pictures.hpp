#pragma once
// issue 28's pictures of a whole model run (attntrace model --heatmap / --plot / --report /
// --rollout / --scale): the flags' checks, the observer that keeps each kept layer's pooled
// weights (and builds the rollout) while the forward runs, and the pictures drawn from them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/model/forward.hpp"
#include "attntrace/model/model_trace.hpp"
#include "attntrace/pictures/model_pictures.hpp"
#include "attntrace/pictures/rollout.hpp"
#include "model_run.hpp"

// Whether FLAGS ask for a picture (--heatmap, --plot, --report) or the rollout.
bool wants_model_pictures(const ModelFlags& flags);

// The picture flags' own checks (UsageError naming the flag): extensions, --scale's word and that
// it has a picture to name, no pictures with --each-line.
void check_model_picture_flags(const ModelFlags& flags);

// Keeps each kept layer's pooled weights as the forward hands them over, and (for --rollout and
// --report) builds the rollout across the kept layers from their weights.
template <class T>
class PictureCollector final : public attntrace::ModelObserver<T> {
public:
    PictureCollector(const ModelSession& s, std::size_t length);
    bool wants_weights(std::size_t layer) const override;
    void attention_rows(std::size_t layer, std::size_t first, const T* weights, std::size_t count) override;
    void attention_done(const attntrace::LayerAttention& attention) override;

    std::vector<std::size_t> layers;                   // (K) the kept layers, in order
    std::vector<attntrace::PooledWeights> weights;     // (K) (H, C, C)
    std::optional<attntrace::RolloutBuilder<T>> rollout;

private:
    std::vector<bool> kept_;
};

// The cells per axis the forward pools each kept layer's weights to for SESSION's pictures.
std::size_t picture_cells(const ModelFlags& flags, std::size_t length);

// The bytes the pictures hold besides the forward (pooled weights, rollout, plot image), for the
// memory budget.
std::uint64_t picture_bytes(const ModelSession& s, std::size_t length, std::size_t element);

// Writes --rollout, --plot and --report (atomically) and returns the --heatmap text ("" without
// it), coloured when STREAM is a colour terminal.
template <class T>
std::string draw_model_pictures(const ModelSession& s, const Sequence& seq, const attntrace::ModelTrace& trace,
                                PictureCollector<T>& collected, FILE* stream);
