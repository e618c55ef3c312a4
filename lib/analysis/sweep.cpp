// A sweep of interventions over forks of a forward pass (sweep.hpp).
#include "sweep.hpp"

#include <algorithm>
#include <map>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"

namespace attntrace {

namespace {

struct Fork {
    std::size_t layer_index = 0, k = 0;
};

// One pass: the forks it makes, in the order they are made, from the layer of the first.
struct Pass {
    std::vector<Fork> forks;
    std::size_t first_layer = 0;
};

// Forks SWEEP's forks at its site of each layer of PASS, in order, editing each.
template <class T>
class ForkMaker final : public ModelObserver<T> {
public:
    ForkMaker(const Sweep<T>& sweep, const Pass& pass) : sweep_(sweep) {
        for (const Fork& f : pass.forks) at_[sweep.layers[f.layer_index]].push_back(f);
    }
    bool wants_site(Site site, std::size_t layer) const override { return site == sweep_.site && at_.count(layer); }
    void at_site(SiteValues<T>& values) override {
        const std::vector<Fork>& forks = at_.at(values.layer());
        const std::size_t first = values.fork(sweep_.fork_of, forks.size());
        for (std::size_t i = 0; i < forks.size(); ++i) sweep_.edit(values, first + i, values.layer(), forks[i].k);
    }

private:
    const Sweep<T>& sweep_;
    std::map<std::size_t, std::vector<Fork>> at_;
};

// Keeps the bases' residual stream entering each layer of STARTS.
template <class T>
class ResidualKeeper final : public ModelObserver<T> {
public:
    explicit ResidualKeeper(const std::vector<std::size_t>& starts) {
        for (std::size_t n : starts) kept[n];
    }
    bool wants_site(Site site, std::size_t layer) const override { return site == Site::resid_pre && kept.count(layer); }
    void at_site(SiteValues<T>& values) override {
        Array<T>& x = kept[values.layer()];
        x = Array<T>::from_shape({values.sequences() * values.length(), values.width()});
        std::copy(values.values().begin(), values.values().end(), x.begin());
    }
    std::map<std::size_t, Array<T>> kept;
};

std::vector<Pass> plan_passes(std::size_t layers, std::size_t per_layer, std::size_t capacity,
                              const std::vector<std::size_t>& swept) {
    std::vector<Pass> passes;
    for (std::size_t i = 0; i < layers; ++i)
        for (std::size_t k = 0; k < per_layer; ++k) {
            if (passes.empty() || passes.back().forks.size() == capacity) passes.push_back({{}, swept[i]});
            passes.back().forks.push_back({i, k});
        }
    return passes;
}

}  // namespace

std::size_t sequences_within(const ModelConfig& config, std::size_t length, std::size_t threads, std::size_t element,
                             std::uint64_t budget) {
    ForwardOptions o;
    o.threads = threads;
    o.logit_positions = {0};
    auto fits = [&](std::size_t b) { return forward_memory_bytes(config, length, o, element, b) <= budget; };
    if (!fits(1)) return 0;
    std::size_t lo = 1, hi = 2;
    while (hi < (std::size_t{1} << 20) && fits(hi)) lo = hi, hi *= 2;
    while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

template <class T>
Array<T> run_sweep(const Model& model, const Sweep<T>& sweep,
                   const std::function<void(std::size_t, std::size_t, const T*)>& on_fork) {
    const ModelConfig& m = model.config;
    const std::size_t b0 = sweep.bases.size(), length = sweep.bases.front().size(), v = m.vocab;
    const std::size_t most = sequences_within(m, length, sweep.threads, sizeof(T), sweep.budget);
    if (most <= b0)
        throw InputError("memory budget: a pass of " + std::to_string(b0 + 1) + " sequences of " + std::to_string(length) +
                         " tokens needs more than " + byte_size_string(sweep.budget) + "; raise it or use fewer tokens");
    const std::vector<Pass> passes = plan_passes(sweep.layers.size(), sweep.per_layer, most - b0, sweep.layers);
    std::vector<std::size_t> starts;
    for (const Pass& p : passes)
        if (p.first_layer > 0) starts.push_back(p.first_layer);
    ForwardOptions o;
    o.threads = sweep.threads;
    o.row_stats = false;
    ResidualKeeper<T> keeper(starts);
    Array<T> base_logits;
    bool have_base = false;
    if (!starts.empty() || passes.empty()) {  // the bases alone, keeping where later passes start
        ForwardPass<T> base(model, o, keeper);
        base.embed(sweep.bases, sweep.what);
        base.run_until(m.layers.size());
        base_logits = base.logits({sweep.position});
        have_base = true;
    }
    for (const Pass& p : passes) {
        ForkMaker<T> maker(sweep, p);
        ForwardPass<T> pass(model, o, maker);
        if (p.first_layer == 0)
            pass.embed(sweep.bases, sweep.what);
        else
            pass.resume(p.first_layer, keeper.kept.at(p.first_layer), b0);
        pass.run_until(m.layers.size());
        const Array<T> logits = pass.logits({sweep.position});  // (B0 + forks, V)
        if (!have_base) {
            have_base = true;
            base_logits = Array<T>::from_shape({b0, v});
            std::copy_n(logits.data(), b0 * v, base_logits.data());
        }
        for (std::size_t i = 0; i < p.forks.size(); ++i)
            on_fork(p.forks[i].layer_index, p.forks[i].k, logits.data() + (b0 + i) * v);
    }
    return base_logits;
}

template Array<float> run_sweep(const Model&, const Sweep<float>&,
                                const std::function<void(std::size_t, std::size_t, const float*)>&);
template Array<double> run_sweep(const Model&, const Sweep<double>&,
                                 const std::function<void(std::size_t, std::size_t, const double*)>&);

}  // namespace attntrace
