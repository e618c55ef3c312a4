// The analyses' metrics (metric.hpp).
#include "attntrace/analysis/metric.hpp"

#include <algorithm>
#include <cmath>

namespace attntrace {

const char* metric_kind_name(MetricKind kind) {
    switch (kind) {
    case MetricKind::logit_diff: return "logit_diff";
    case MetricKind::log_prob: return "log_prob";
    case MetricKind::logit: return "logit";
    }
    return "";
}

template <class T>
std::vector<double> log_softmax(const T* logits, std::size_t vocab) {
    double max = -INFINITY;
    bool nan = false;
    for (std::size_t v = 0; v < vocab; ++v) {
        nan = nan || std::isnan(double(logits[v]));
        max = std::max(max, double(logits[v]));
    }
    std::vector<double> out(vocab, NAN);
    if (nan || vocab == 0) return out;
    double sum = 0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - max);
    const double log_sum = std::log(sum) + max;
    for (std::size_t v = 0; v < vocab; ++v) out[v] = double(logits[v]) - log_sum;
    return out;
}

template <class T>
double metric_value(const Metric& m, const T* logits, std::size_t vocab) {
    switch (m.kind) {
    case MetricKind::logit_diff: return double(logits[m.target]) - double(logits[*m.versus]);
    case MetricKind::logit: return double(logits[m.target]);
    case MetricKind::log_prob: return log_softmax(logits, vocab)[m.target];
    }
    return NAN;
}

double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
    double kl = 0;
    for (std::size_t v = 0; v < log_p.size(); ++v) {
        const double p = std::exp(log_p[v]);
        if (p > 0 || std::isnan(p)) kl += p * (log_p[v] - log_q[v]);
    }
    return kl;
}

template <class T>
std::size_t rank_of(const T* logits, std::size_t vocab, std::uint32_t id) {
    const T own = logits[id];
    return 1 + std::size_t(std::count_if(logits, logits + vocab, [&](T x) { return x > own; }));
}

#define ATTNTRACE_METRIC(T)                                                        \
    template double metric_value(const Metric&, const T*, std::size_t);            \
    template std::vector<double> log_softmax(const T*, std::size_t);              \
    template std::size_t rank_of(const T*, std::size_t, std::uint32_t);
ATTNTRACE_METRIC(float)
ATTNTRACE_METRIC(double)

}  // namespace attntrace
