#pragma once
// Knocking heads out: a head's z (sites.hpp) replaced at every position, by 0 (zero ablation) or
// by its mean over the positions of the clean run (mean ablation), and what that does to a metric
// at one position (metric.hpp). TransformerLens does it with a hook on blocks.n.attn.hook_z and a
// whole forward pass per ablation; here a list of heads is one extra sequence beside the clean
// one, and every head alone (`each`) one sweep (sweep.hpp): the clean run's forks at each layer's
// z, run together.
//
// Legend: L length, V vocabulary, N layers, H heads.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/analysis/metric.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/model/model_trace.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

enum class Ablation : std::uint8_t { zero, mean };

struct HeadRef {
    std::size_t layer = 0, head = 0;
    bool operator==(const HeadRef&) const = default;
};

// What the metric of an analysis is asked to be: its position, and the target (without one, the
// clean run's most likely token at the position) and the token it is compared with, if any.
struct MetricRequest {
    std::size_t position = 0;
    std::optional<std::uint32_t> target, versus;
};

struct AblationOptions {
    Ablation ablation = Ablation::zero;
    std::size_t top = 5;          // candidates of the clean and the ablated run
    bool logits = false;          // keep the ablated run's logits (L, V)
    std::size_t threads = 0;
    std::uint64_t budget = 0;     // the bytes a forward pass may hold (0: no limit)
};

template <class T>
struct AblationResult {
    Metric metric;                        // the target resolved; logit_diff with a versus, else log_prob
    double clean = 0;                     // the metric of the clean run
    std::vector<Candidate> clean_top;
    // a list of heads ablated together
    std::vector<HeadRef> heads;
    double ablated = 0, kl = 0;           // KL(clean ‖ ablated) at the position
    std::vector<Candidate> ablated_top;
    std::optional<Array<T>> logits;       // (L, V) the ablated run's, with options.logits
    // every head alone: (N, H) metric(ablated) - metric(clean)
    std::optional<Array<double>> values;
};

// Checks REQUEST against MODEL and IDS (UsageError: a position or an id out of range).
void check_metric_request(const ModelConfig& config, std::size_t length, const MetricRequest& request);

// HEADS ablated together.
template <class T>
AblationResult<T> ablate_heads(const Model& model, const std::vector<std::uint32_t>& ids, const std::vector<HeadRef>& heads,
                               const MetricRequest& request, const AblationOptions& options);

// Every head of every layer ablated alone.
template <class T>
AblationResult<T> ablate_each(const Model& model, const std::vector<std::uint32_t>& ids, const MetricRequest& request,
                              const AblationOptions& options);

// "3.5": head 5 of layer 3; "3.5,0.1" a list; UsageError naming SPEC for anything else or a head
// past the model's.
std::vector<HeadRef> parse_heads(const std::string& spec, std::size_t layers, std::size_t heads);

}  // namespace attntrace
