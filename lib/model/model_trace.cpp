// The whole-model trace (model_trace.hpp): the observers that summarize each layer's heads and
// score them on the induction sequence, the predictions, and the text and JSON renderers.
#include "attntrace/model/model_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/random.hpp"

namespace attntrace {

template <class T>
std::vector<Candidate> top_candidates(const T* logits, std::size_t vocab, std::size_t k) {
    if (vocab == 0) return {};
    const double max = double(*std::max_element(logits, logits + vocab));
    double sum = 0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - max);
    std::vector<std::uint32_t> order(vocab);
    for (std::size_t v = 0; v < vocab; ++v) order[v] = static_cast<std::uint32_t>(v);
    k = std::min(k, vocab);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    std::vector<Candidate> out;
    for (std::size_t i = 0; i < k; ++i) {
        const double logit = logits[order[i]];
        out.push_back({order[i], "", std::exp(logit - max) / sum, logit});
    }
    return out;
}

template <class T>
void HeadStatsCollector<T>::attention_done(const LayerAttention& a) {
    if (a.row_stats) layers[a.layer] = summarize_heads(*a.row_stats, SIZE_MAX);
}

// ---- induction ------------------------------------------------------------------------------

InductionSequence induction_sequence(std::size_t n, std::uint64_t seed, std::size_t vocab,
                                     const std::vector<std::uint32_t>& excluded, const std::vector<std::uint32_t>& prefix) {
    if (n == 0) throw UsageError("induction: the random sequence needs at least 1 token");
    std::vector<std::uint32_t> pool;
    for (std::size_t v = 0; v < vocab; ++v)
        if (std::find(excluded.begin(), excluded.end(), v) == excluded.end()) pool.push_back(static_cast<std::uint32_t>(v));
    if (pool.empty()) throw UsageError("induction: every id of the vocabulary is a special token");
    Rng rng(seed);
    InductionSequence s{prefix, prefix.size(), n, seed};
    std::vector<std::uint32_t> r(n);
    for (auto& id : r) id = pool[std::min(pool.size() - 1, static_cast<std::size_t>(rng.uniform() * double(pool.size())))];
    s.ids.insert(s.ids.end(), r.begin(), r.end());
    s.ids.insert(s.ids.end(), r.begin(), r.end());
    return s;
}

std::vector<std::size_t> induction_targets(const InductionSequence& s) {
    std::vector<std::size_t> out;
    for (std::size_t i = s.prefix + s.n; i < s.ids.size(); ++i) {
        std::size_t j = i;  // the most recent earlier occurrence of ids[i]; there is one: i - N
        while (s.ids[--j] != s.ids[i]) {
        }
        out.push_back(j + 1);
    }
    return out;
}

template <class T>
InductionScorer<T>::InductionScorer(const InductionSequence& s, std::vector<bool> layers, std::size_t heads)
    : layers_(std::move(layers)), heads_(heads), length_(s.ids.size()), first_query_(s.prefix + s.n),
      targets_(induction_targets(s)), row_weight_(heads * s.n, 0.0) {}

template <class T>
bool InductionScorer<T>::wants_weights(std::size_t layer) const {
    return layers_.empty() || (layer < layers_.size() && layers_[layer]);
}

// The weights come in whole rows of the (H, L, L) plane; each (head, query) row once.
template <class T>
void InductionScorer<T>::attention_rows(std::size_t, std::size_t first, const T* w, std::size_t count) {
    const std::size_t l = length_;
    for (std::size_t row = first / l; row < (first + count) / l; ++row) {
        const std::size_t h = row / l, i = row % l;
        if (i < first_query_) continue;
        row_weight_[h * targets_.size() + (i - first_query_)] = double(w[(row - first / l) * l + targets_[i - first_query_]]);
    }
}

template <class T>
void InductionScorer<T>::attention_done(const LayerAttention& a) {
    if (!wants_weights(a.layer)) return;
    std::vector<double>& out = scores[a.layer];
    out.assign(heads_, 0.0);
    for (std::size_t h = 0; h < heads_; ++h) {
        for (std::size_t q = 0; q < targets_.size(); ++q) out[h] += row_weight_[h * targets_.size() + q];
        out[h] /= double(targets_.size());
    }
    std::fill(row_weight_.begin(), row_weight_.end(), 0.0);
}

std::string model_head_role(const HeadSummary& head, std::optional<double> induction) {
    if (induction && *induction >= kInductionThreshold) return "induction";
    return head.role;
}

#define ATTNTRACE_MODEL_TRACE(T)                                                               \
    template std::vector<Candidate> top_candidates(const T*, std::size_t, std::size_t);        \
    template class HeadStatsCollector<T>;                                                      \
    template class InductionScorer<T>;
ATTNTRACE_MODEL_TRACE(float)
ATTNTRACE_MODEL_TRACE(double)

}  // namespace attntrace
