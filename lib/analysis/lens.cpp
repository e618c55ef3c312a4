// The logit lens (lens.hpp).
#include "attntrace/analysis/lens.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "attntrace/analysis/metric.hpp"
#include "attntrace/model/forward.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

// Keeps the residual stream at the lens's layers: resid_pre l, and resid_final for l = N.
template <class T>
class ResidualRecorder final : public ModelObserver<T> {
public:
    ResidualRecorder(const std::vector<std::size_t>& layers, std::size_t n) : n_(n) {
        for (std::size_t l : layers) kept[l];
    }
    bool wants_site(Site site, std::size_t layer) const override {
        return kept.count(layer) && (site == (layer == n_ ? Site::resid_final : Site::resid_pre));
    }
    void at_site(SiteValues<T>& v) override {
        kept[v.layer()].assign(v.sequence(0), v.sequence(0) + v.length() * v.width());
    }
    std::map<std::size_t, std::vector<T>> kept;  // layer -> (L, E)

private:
    std::size_t n_;
};

LensCell cell_of(const std::vector<Candidate>& top, const std::optional<std::uint32_t>& target, double probability,
                 std::size_t rank) {
    return {top, target ? probability : 0.0, target ? rank : 0};
}

}  // namespace

template <class T>
LensResult logit_lens(const Model& model, const std::vector<std::uint32_t>& ids, const LensOptions& o) {
    const ModelConfig& m = model.config;
    const std::size_t n = m.layers.size(), l = ids.size(), e = m.hidden, v = m.vocab;
    if (!model.has_head()) throw UsageError("logits: " + model.head_missing);
    LensResult r;
    r.length = l;
    r.layers = o.layers;
    if (r.layers.empty())
        for (std::size_t k = 0; k <= n; ++k) r.layers.push_back(k);
    for (std::size_t k : r.layers)
        if (k > n) throw UsageError("lens layers: " + std::to_string(k) + " is past the model's " + std::to_string(n));
    if (o.target && *o.target >= v) throw UsageError("target: id " + std::to_string(*o.target) + " is past the vocabulary");
    ResidualRecorder<T> recorder(r.layers, n);
    ForwardOptions fo;
    fo.threads = o.threads;
    fo.row_stats = false;
    ForwardPass<T> pass(model, fo, recorder);
    pass.embed({ids});
    pass.run_until(std::min(n, r.layers.back() + 1));
    // the rows of every kept layer, unembedded a budget's worth at a time
    const std::size_t rows = r.layers.size() * l;
    const std::size_t chunk = std::max<std::size_t>(1, o.budget / (v * sizeof(T) + 1));
    r.cells.reserve(rows);
    for (std::size_t r0 = 0; r0 < rows; r0 += chunk) {
        const std::size_t r1 = std::min(rows, r0 + chunk);
        Array<T> x = Array<T>::from_shape({r1 - r0, e});
        for (std::size_t i = r0; i < r1; ++i) {
            const std::vector<T>& kept = recorder.kept.at(r.layers[i / l]);
            std::copy_n(kept.data() + (i % l) * e, e, x.data() + (i - r0) * e);
        }
        const Array<T> logits = unembed(model, x, o.threads);
        for (std::size_t i = 0; i < r1 - r0; ++i) {
            const T* row = logits.data() + i * v;
            const double p = o.target ? std::exp(log_softmax(row, v)[*o.target]) : 0.0;
            r.cells.push_back(cell_of(top_candidates(row, v, o.top), o.target, p, o.target ? rank_of(row, v, *o.target) : 0));
        }
    }
    return r;
}

template LensResult logit_lens<float>(const Model&, const std::vector<std::uint32_t>&, const LensOptions&);
template LensResult logit_lens<double>(const Model&, const std::vector<std::uint32_t>&, const LensOptions&);

}  // namespace attntrace
