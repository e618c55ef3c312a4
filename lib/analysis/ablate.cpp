// Head ablation (ablate.hpp).
#include "attntrace/analysis/ablate.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>

#include "attntrace/model/forward.hpp"
#include "attntrace/tensor/errors.hpp"
#include "sweep.hpp"

namespace attntrace {

namespace {

// Head H's columns of sequence B of a z site, at every position: 0, or the mean over the
// positions of sequence 0 (the clean run).
template <class T>
void ablate_head(SiteValues<T>& z, std::size_t b, std::size_t head, Ablation ablation) {
    const std::size_t l = z.length(), w = z.width(), p = w / z.heads();
    std::vector<T> fill(p, T(0));
    if (ablation == Ablation::mean) {
        std::vector<double> sum(p, 0.0);
        for (std::size_t i = 0; i < l; ++i)
            for (std::size_t c = 0; c < p; ++c) sum[c] += double(z.sequence(0)[i * w + head * p + c]);
        for (std::size_t c = 0; c < p; ++c) fill[c] = T(sum[c] / double(l));
    }
    for (std::size_t i = 0; i < l; ++i) std::copy(fill.begin(), fill.end(), z.sequence(b) + i * w + head * p);
}

// Ablates HEADS in sequence 1 of the batch (sequence 0 is the clean run).
template <class T>
class ListAblator final : public ModelObserver<T> {
public:
    ListAblator(const std::vector<HeadRef>& heads, Ablation ablation) : ablation_(ablation) {
        for (const HeadRef& h : heads) at_[h.layer].push_back(h.head);
    }
    bool wants_site(Site site, std::size_t layer) const override { return site == Site::z && at_.count(layer); }
    void at_site(SiteValues<T>& z) override {
        for (std::size_t h : at_.at(z.layer())) ablate_head(z, 1, h, ablation_);
    }

private:
    Ablation ablation_;
    std::map<std::size_t, std::vector<std::size_t>> at_;
};

template <class T>
Metric resolve_metric(const MetricRequest& r, const T* clean, std::size_t vocab) {
    Metric m;
    m.position = r.position;
    m.target = r.target ? *r.target : top_candidates(clean, vocab, 1).front().id;
    m.versus = r.versus;
    m.kind = r.versus ? MetricKind::logit_diff : MetricKind::log_prob;
    return m;
}

std::uint64_t budget_or_all(std::uint64_t budget) { return budget ? budget : UINT64_MAX; }

// A decimal count, nothing else ("07" is 7; "", "+1", "1x" are none).
std::optional<std::size_t> count_in(std::string_view text) {
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

}  // namespace

void check_metric_request(const ModelConfig& m, std::size_t length, const MetricRequest& r) {
    if (r.position >= length)
        throw UsageError("position: " + std::to_string(r.position) + " is out of range (the sequence has " +
                         std::to_string(length) + " tokens, positions 0 to " + std::to_string(length - 1) + ")");
    for (const auto& [what, id] : {std::pair{"target", r.target}, std::pair{"versus", r.versus}})
        if (id && *id >= m.vocab)
            throw InputError(std::string(what) + ": id " + std::to_string(*id) + " is past the vocabulary (ids 0 to " +
                             std::to_string(m.vocab - 1) + ")");
}

template <class T>
AblationResult<T> ablate_heads(const Model& model, const std::vector<std::uint32_t>& ids, const std::vector<HeadRef>& heads,
                               const MetricRequest& request, const AblationOptions& o) {
    const ModelConfig& m = model.config;
    check_metric_request(m, ids.size(), request);
    if (!model.has_head()) throw UsageError("logits: " + model.head_missing);
    ListAblator<T> ablator(heads, o.ablation);
    ForwardOptions fo;
    fo.threads = o.threads;
    fo.row_stats = false;
    ForwardPass<T> pass(model, fo, ablator);
    pass.embed({ids, ids});
    pass.run_until(m.layers.size());
    const std::size_t l = ids.size(), v = m.vocab;
    std::vector<std::size_t> positions{request.position};
    if (o.logits) {
        positions.resize(l);
        for (std::size_t i = 0; i < l; ++i) positions[i] = i;
    }
    const Array<T> logits = pass.logits(positions);  // (2 * P, V)
    const std::size_t at = o.logits ? request.position : 0, per = positions.size();
    const T* clean = logits.data() + at * v;
    const T* ablated = logits.data() + (per + at) * v;
    AblationResult<T> r;
    r.metric = resolve_metric(request, clean, v);
    r.clean = metric_value(r.metric, clean, v);
    r.ablated = metric_value(r.metric, ablated, v);
    r.kl = kl_divergence(log_softmax(clean, v), log_softmax(ablated, v));
    r.clean_top = top_candidates(clean, v, o.top);
    r.ablated_top = top_candidates(ablated, v, o.top);
    r.heads = heads;
    if (o.logits) {
        r.logits = Array<T>::from_shape({l, v});
        std::copy_n(logits.data() + l * v, l * v, r.logits->data());
    }
    return r;
}

template <class T>
AblationResult<T> ablate_each(const Model& model, const std::vector<std::uint32_t>& ids, const MetricRequest& request,
                              const AblationOptions& o) {
    const ModelConfig& m = model.config;
    check_metric_request(m, ids.size(), request);
    if (!model.has_head()) throw UsageError("logits: " + model.head_missing);
    Sweep<T> sweep;
    sweep.bases = {ids};
    sweep.site = Site::z;
    sweep.per_layer = m.heads;
    for (std::size_t n = 0; n < m.layers.size(); ++n) sweep.layers.push_back(n);
    sweep.edit = [&](SiteValues<T>& z, std::size_t fork, std::size_t, std::size_t k) { ablate_head(z, fork, k, o.ablation); };
    sweep.position = request.position;
    sweep.threads = o.threads;
    sweep.budget = budget_or_all(o.budget);
    const std::size_t v = m.vocab;
    std::vector<std::vector<T>> rows(m.layers.size() * m.heads);
    const Array<T> clean = run_sweep<T>(model, sweep, [&](std::size_t n, std::size_t k, const T* row) {
        rows[n * m.heads + k].assign(row, row + v);
    });
    AblationResult<T> r;
    r.metric = resolve_metric(request, clean.data(), v);
    r.clean = metric_value(r.metric, clean.data(), v);
    r.clean_top = top_candidates(clean.data(), v, o.top);
    r.values = Array<double>::from_shape({m.layers.size(), m.heads});
    for (std::size_t i = 0; i < rows.size(); ++i) r.values->data()[i] = metric_value(r.metric, rows[i].data(), v) - r.clean;
    return r;
}

std::vector<HeadRef> parse_heads(const std::string& spec, std::size_t layers, std::size_t heads) {
    std::vector<HeadRef> out;
    std::size_t at = 0;
    while (at <= spec.size()) {
        const std::size_t end = std::min(spec.find(',', at), spec.size());
        const std::string item = spec.substr(at, end - at);
        const std::size_t dot = item.find('.');
        const auto layer = dot == std::string::npos ? std::nullopt : count_in(item.substr(0, dot));
        const auto head = dot == std::string::npos ? std::nullopt : count_in(item.substr(dot + 1));
        if (!layer || !head)
            throw UsageError("heads: '" + item + "' is not LAYER.HEAD (e.g. 3.5) in '" + spec + "'");
        if (*layer >= layers || *head >= heads)
            throw UsageError("heads: " + item + " is past the model's (layers 0 to " + std::to_string(layers - 1) +
                             ", heads 0 to " + std::to_string(heads - 1) + ")");
        if (std::find(out.begin(), out.end(), HeadRef{*layer, *head}) == out.end()) out.push_back({*layer, *head});
        at = end + 1;
    }
    return out;
}

#define ATTNTRACE_ABLATE(T)                                                                                    \
    template AblationResult<T> ablate_heads(const Model&, const std::vector<std::uint32_t>&,                   \
                                            const std::vector<HeadRef>&, const MetricRequest&,                 \
                                            const AblationOptions&);                                          \
    template AblationResult<T> ablate_each(const Model&, const std::vector<std::uint32_t>&, const MetricRequest&, \
                                           const AblationOptions&);
ATTNTRACE_ABLATE(float)
ATTNTRACE_ABLATE(double)

}  // namespace attntrace
