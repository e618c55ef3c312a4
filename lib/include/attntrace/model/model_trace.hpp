#pragma once
// What a whole-model run says about itself: the tokens; per kept layer and head, the mean entropy
// and the head detectors of its attention (the fields of mha's head_stats, detectors.hpp) and the
// induction score; the most likely tokens (the next one for a decoder, those at each mask token for
// a masked LM). The observers that collect them while the forward runs, and the text and JSON
// renderers; the app chooses the renderer and the stream, nothing here prints.
//
// Legend: L sequence length, H heads, V vocabulary, N (induction) the length of the random
// sequence R.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/detectors.hpp"
#include "attntrace/attention/trace.hpp"
#include "attntrace/model/forward.hpp"

namespace attntrace {

// One token of the input: its id, its vocabulary piece ("Ġcat"; "" when unknown) and the text it
// decodes to (" cat").
struct TraceToken {
    std::uint32_t id = 0;
    std::string token;
    std::string text;
};

// A candidate token: softmax probability over the vocabulary, and its logit.
struct Candidate {
    std::uint32_t id = 0;
    std::string text;  // decoded (the app fills it in)
    double probability = 0;
    double logit = 0;
};

// The K most likely tokens at one position.
struct Prediction {
    std::size_t position = 0;
    std::vector<Candidate> top;
};

// The K most likely ids of LOGITS (V), most likely first (ties: the lower id), with their softmax
// probabilities (computed in double, max-subtracted).
template <class T>
std::vector<Candidate> top_candidates(const T* logits, std::size_t vocab, std::size_t k);

// Keeps, for each layer whose attention was summarized, its heads' summaries (summarize_heads).
template <class T>
class HeadStatsCollector final : public ModelObserver<T> {
public:
    void attention_done(const LayerAttention& attention) override;
    std::map<std::size_t, std::vector<HeadSummary>> layers;
};

// The induction test (TransformerLens's induction-head detector, from a shell): the sequence
// PREFIX + R + R, R being N ids drawn uniformly with replacement from the vocabulary [0, V) less
// EXCLUDED, with Rng(SEED). A head's induction score is, over the queries i of the second R, the
// mean weight on the key just after the most recent earlier occurrence of token i (i - N + 1 when
// R has no repeats); it is named "induction" from kInductionThreshold on: more than half of each
// such row's weight on the token an induction head copies, the rule the other detectors follow.
inline constexpr double kInductionThreshold = kRoleThreshold;

struct InductionSequence {
    std::vector<std::uint32_t> ids;  // (prefix + 2N)
    std::size_t prefix = 0;          // the BOS (or other leading special tokens)
    std::size_t n = 0;               // N
    std::uint64_t seed = 0;
};

// UsageError "induction: ..." when N is 0 or every id is excluded.
InductionSequence induction_sequence(std::size_t n, std::uint64_t seed, std::size_t vocab,
                                     const std::vector<std::uint32_t>& excluded,
                                     const std::vector<std::uint32_t>& prefix);

// For each query of the second R (positions prefix + N .. prefix + 2N - 1, in order), the key just
// after the most recent earlier occurrence of its token.
std::vector<std::size_t> induction_targets(const InductionSequence& sequence);

// Collects the induction scores of the layers LAYERS flags (empty: all) on a forward of SEQUENCE.
template <class T>
class InductionScorer final : public ModelObserver<T> {
public:
    InductionScorer(const InductionSequence& sequence, std::vector<bool> layers, std::size_t heads);
    bool wants_weights(std::size_t layer) const override;
    void attention_rows(std::size_t layer, std::size_t first, const T* weights, std::size_t count) override;
    void attention_done(const LayerAttention& attention) override;
    std::map<std::size_t, std::vector<double>> scores;  // layer -> (H)

private:
    std::vector<bool> layers_;
    std::size_t heads_, length_, first_query_;
    std::vector<std::size_t> targets_;
    std::vector<double> row_weight_;  // (H, queries of the second R) of the current layer
};

// Keeps the routing of the MoE layers LAYERS flags (empty: all).
template <class T>
class RoutingCollector final : public ModelObserver<T> {
public:
    explicit RoutingCollector(std::vector<bool> layers) : layers_(std::move(layers)) {}
    void expert_routing(const LayerRouting& routing) override {
        if (layers_.empty() || layers_[routing.layer]) layers[routing.layer] = routing;
    }
    std::map<std::size_t, LayerRouting> layers;

private:
    std::vector<bool> layers_;
};

// Everything the trace shows.
struct ModelTrace {
    std::string dir;
    ModelConfig const* config = nullptr;
    std::string dtype;                                         // "float32", "float64"
    std::size_t threads = 0;                                   // 0: every core
    std::vector<TraceToken> tokens;                            // (L)
    std::map<std::size_t, std::vector<HeadSummary>> heads;     // kept layer -> (H)
    std::optional<InductionSequence> induction;
    std::map<std::size_t, std::vector<double>> induction_scores;  // kept layer -> (H)
    std::map<std::size_t, LayerRouting> routing;               // kept MoE layer -> its routing
    std::string predicted;                                     // "next" or "mask" ("" none asked)
    std::vector<Prediction> predictions;
    nlohmann::json outputs = nlohmann::json::object();        // {"hidden_states": FILE or null, ...}
};

// A head's role: "induction" from kInductionThreshold on, else head_role of its detectors.
std::string model_head_role(const HeadSummary& head, std::optional<double> induction);

// The text trace: a header line (family, layers, heads, kv heads, L, dtype), the tokens with their
// ids, per kept layer one line per head (entropy, detectors, induction, role) and, for a MoE layer,
// one line of how many tokens each expert took, the predictions, and the files written.
std::string render_model_text(const ModelTrace& trace);

// The same as one document: {"command": "model", "model": {...}, "tokens": [{"id", "token", "text"}],
// "layers": [{"layer", "heads": [head_stats' fields + "induction"]}, for a mixture of experts "experts":
// [{"ids": [K], "weights": [K]}] per position (null for a dense layer)], "induction": {...} or null,
// "predictions": {"kind", "positions": [{"position", "top": [{"id", "text", "probability", "logit"}]}]},
// "outputs": {...}}.
nlohmann::json model_trace_json(const ModelTrace& trace);

// The trace's "model" object: dir, model_type, sizes, description, config values, dtype, threads
// (null for all cores). Shared by the analyses' JSON (analysis/render.hpp).
nlohmann::json model_summary_json(const std::string& dir, const ModelConfig& config, const std::string& dtype,
                                  std::size_t threads);
// The trace's "tokens": [{id, token, text}].
nlohmann::json tokens_json(const std::vector<TraceToken>& tokens);

}  // namespace attntrace
