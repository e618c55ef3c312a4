// Activation patching (patch.hpp).
#include "attntrace/analysis/patch.hpp"

#include <algorithm>
#include <cmath>

#include "attntrace/tensor/errors.hpp"
#include "sweep.hpp"

namespace attntrace {

namespace {

Site site_of(PatchSite p) {
    switch (p) {
    case PatchSite::head: return Site::z;
    case PatchSite::resid: return Site::resid_pre;
    case PatchSite::attn: return Site::attn_out;
    case PatchSite::mlp: return Site::mlp_out;
    }
    return Site::z;
}

// Fork FORK of the corrupted run (sequence 1) takes the clean run's (sequence 0) values of head K
// at every position, or of position K.
template <class T>
void take_clean(SiteValues<T>& s, std::size_t fork, std::size_t k, bool head) {
    const std::size_t w = s.width();
    if (!head) return (void)std::copy_n(s.sequence(0) + k * w, w, s.sequence(fork) + k * w);
    const std::size_t p = w / s.heads();
    for (std::size_t i = 0; i < s.length(); ++i) std::copy_n(s.sequence(0) + i * w + k * p, p, s.sequence(fork) + i * w + k * p);
}

}  // namespace

const char* patch_site_name(PatchSite site) {
    switch (site) {
    case PatchSite::head: return "head";
    case PatchSite::resid: return "resid";
    case PatchSite::attn: return "attn";
    case PatchSite::mlp: return "mlp";
    }
    return "";
}

std::optional<PatchSite> patch_site_named(const std::string& name) {
    for (PatchSite s : {PatchSite::head, PatchSite::resid, PatchSite::attn, PatchSite::mlp})
        if (name == patch_site_name(s)) return s;
    return std::nullopt;
}

template <class T>
PatchResult patch(const Model& model, const std::vector<std::uint32_t>& clean, const std::vector<std::uint32_t>& corrupt,
                  const MetricRequest& request, const PatchOptions& o) {
    const ModelConfig& m = model.config;
    if (clean.size() != corrupt.size())
        throw InputError("patch: the clean prompt is " + std::to_string(clean.size()) + " tokens and the corrupted one " +
                         std::to_string(corrupt.size()) + ": they must be of one length");
    check_metric_request(m, clean.size(), request);
    if (clean == corrupt) throw InputError("patch: the clean and the corrupted prompt are the same tokens: nothing to restore");
    if (!request.target) throw UsageError("target: a target is needed");
    if (!model.has_head()) throw UsageError("logits: " + model.head_missing);
    PatchResult r;
    r.site = o.site;
    r.metric = {request.versus ? MetricKind::logit_diff : MetricKind::logit, request.position, *request.target, request.versus};
    const bool head = o.site == PatchSite::head;
    const std::size_t per = head ? m.heads : clean.size(), n = m.layers.size(), v = m.vocab;
    Sweep<T> sweep;
    sweep.bases = {clean, corrupt};
    sweep.site = site_of(o.site);
    sweep.fork_of = 1;
    sweep.per_layer = per;
    for (std::size_t i = 0; i < n; ++i) sweep.layers.push_back(i);
    sweep.edit = [&](SiteValues<T>& s, std::size_t fork, std::size_t, std::size_t k) { take_clean(s, fork, k, head); };
    sweep.position = request.position;
    sweep.threads = o.threads;
    sweep.budget = o.budget ? o.budget : UINT64_MAX;
    sweep.what = "prompts";
    std::vector<double> patched(n * per, NAN);
    const Array<T> bases = run_sweep<T>(model, sweep, [&](std::size_t layer, std::size_t k, const T* row) {
        patched[layer * per + k] = metric_value(r.metric, row, v);
    });
    r.clean = metric_value(r.metric, bases.data(), v);
    r.corrupt = metric_value(r.metric, bases.data() + v, v);
    const double gap = r.clean - r.corrupt;
    if (std::isnan(gap))
        throw InputError("patch: the metric is NaN on the " + std::string(std::isnan(r.clean) ? "clean" : "corrupted") +
                         " prompt (the model's values hold a NaN there): nothing to normalise by");
    if (!(std::abs(gap) > 1e-6 * std::max({std::abs(r.clean), std::abs(r.corrupt), 1e-30})))
        throw InputError("patch: the metric is " + std::to_string(r.clean) + " on the clean prompt and " +
                         std::to_string(r.corrupt) + " on the corrupted one: nothing to restore");
    r.values = Array<double>::from_shape({n, per});
    for (std::size_t i = 0; i < patched.size(); ++i) r.values.data()[i] = (patched[i] - r.corrupt) / gap + 0.0;  // + 0.0: no -0
    return r;
}

template PatchResult patch<float>(const Model&, const std::vector<std::uint32_t>&, const std::vector<std::uint32_t>&,
                                  const MetricRequest&, const PatchOptions&);
template PatchResult patch<double>(const Model&, const std::vector<std::uint32_t>&, const std::vector<std::uint32_t>&,
                                   const MetricRequest&, const PatchOptions&);

}  // namespace attntrace
