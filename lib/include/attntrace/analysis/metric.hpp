#pragma once
// What the analyses measure at one position of a run (lens, ablate, attribute, patch): the logit
// of a target token minus that of a "versus" token, or without one the target's log-probability
// (ablate, attribute) or its logit (patch), and the distributions compared by KL divergence.
//
// Legend: V vocabulary.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attntrace {

enum class MetricKind : std::uint8_t {
    logit_diff,  // logit[target] - logit[versus]
    log_prob,    // log softmax(logits)[target]
    logit,       // logit[target]
};

// "logit_diff", "log_prob", "logit".
const char* metric_kind_name(MetricKind kind);

struct Metric {
    MetricKind kind = MetricKind::log_prob;
    std::size_t position = 0;             // P
    std::uint32_t target = 0;
    std::optional<std::uint32_t> versus;  // with logit_diff
};

// METRIC of one row of logits (V), in double.
template <class T>
double metric_value(const Metric& metric, const T* logits, std::size_t vocab);

// log softmax of LOGITS (V), in double (max-subtracted; NaN stays NaN).
template <class T>
std::vector<double> log_softmax(const T* logits, std::size_t vocab);

// KL(p ‖ q) = Σ p · (log p − log q) of two log-distributions (V); terms with p = 0 count 0.
double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q);

// The 1-based rank of ID among LOGITS (V): 1 + the count of logits larger than its own (ties
// share the better rank).
template <class T>
std::size_t rank_of(const T* logits, std::size_t vocab, std::uint32_t id);

}  // namespace attntrace
