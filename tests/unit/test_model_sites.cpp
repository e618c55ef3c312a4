// Sites of the forward pass (sites.hpp, forward.hpp): the values reported add up as the residual
// stream does, a replaced value changes what follows, and a fork runs as the same sequence would
// run alone. On the whole-model fixtures of tests/fixtures/models/full_* in float64, where every
// identity holds to rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

#include "attntrace/io/tensor_io.hpp"
#include "attntrace/model/forward.hpp"
#include "attntrace/model/model.hpp"
#include "test_helpers.hpp"

using namespace attntrace;

namespace {

const std::string kModels = std::string(ATTNTRACE_FIXTURES) + "/models/";

std::vector<std::uint32_t> fixture_ids(const std::string& name) {
    const LoadedTensor<double> t = load_tensor<double>(kModels + name + "/ids.npy");
    return {t.array.begin(), t.array.end()};
}

// Keeps every site's values of sequence 0 by (site, layer); at (EDIT_SITE, EDIT_LAYER) calls EDIT.
struct Recorder final : ModelObserver<double> {
    std::map<std::pair<Site, std::size_t>, std::vector<double>> kept;
    std::optional<std::pair<Site, std::size_t>> edit_at;
    std::function<void(SiteValues<double>&)> edit;

    bool wants_site(Site, std::size_t) const override { return true; }
    void at_site(SiteValues<double>& v) override {
        if (edit_at && *edit_at == std::pair{v.site(), v.layer()}) edit(v);
        const double* s = v.sequence(0);
        kept[{v.site(), v.layer()}] = std::vector<double>(s, s + v.length() * v.width());
    }
};

double max_diff(const double* a, const double* b, std::size_t n) {
    double d = 0;
    for (std::size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

Array<double> run_logits(const Model& model, const std::vector<std::uint32_t>& ids, ModelObserver<double>& o) {
    ForwardOptions options;
    options.all_logits = true;
    return *forward<double>(model, ids, options, o).logits;
}

}  // namespace

TEST_CASE("sites: resid_pre + attn_out + mlp_out is the next resid_pre, and the heads' head_out + b_o is attn_out") {
    for (const char* name : {"full_gpt2", "full_llama", "full_neox", "full_bloom"}) {
        CAPTURE(name);
        const Model model = open_model(kModels + name);
        const auto ids = fixture_ids(name);
        Recorder r;
        const Array<double> logits = run_logits(model, ids, r);
        ModelObserver<double> none;
        const Array<double> plain = run_logits(model, ids, none);
        CHECK(max_diff(logits.data(), plain.data(), logits.size()) < 1e-12);  // asking for sites changes nothing
        const ModelConfig& m = model.config;
        const std::size_t l = ids.size(), e = m.hidden, n_layers = m.layers.size();
        for (std::size_t n = 0; n < n_layers; ++n) {
            const auto& x = r.kept.at({Site::resid_pre, n});
            const auto& attn = r.kept.at({Site::attn_out, n});
            const auto& mlp = r.kept.at({Site::mlp_out, n});
            const auto& next = n + 1 < n_layers ? r.kept.at({Site::resid_pre, n + 1}) : r.kept.at({Site::resid_final, n_layers});
            std::vector<double> sum(l * e);
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = x[i] + attn[i] + mlp[i];
            CHECK(max_diff(sum.data(), next.data(), sum.size()) < 1e-10);
            const auto& heads = r.kept.at({Site::head_out, n});
            const auto& z = r.kept.at({Site::z, n});
            CHECK(z.size() == l * m.heads * m.head_dim);
            std::vector<double> total(l * e, 0.0);
            for (std::size_t p = 0; p < l; ++p)
                for (std::size_t h = 0; h < m.heads; ++h)
                    for (std::size_t c = 0; c < e; ++c) total[p * e + c] += heads[(p * m.heads + h) * e + c];
            // attn_out - the heads' sum is b_o, the same at every position
            for (std::size_t p = 1; p < l; ++p)
                for (std::size_t c = 0; c < e; ++c)
                    CHECK(std::abs((attn[p * e + c] - total[p * e + c]) - (attn[c] - total[c])) < 1e-10);
        }
    }
}

TEST_CASE("sites: a z replaced by zeros is the head ablated, and a fork runs as the sequence would alone") {
    const Model model = open_model(kModels + "full_llama");
    const auto ids = fixture_ids("full_llama");
    const ModelConfig& m = model.config;
    const std::size_t l = ids.size(), v = m.vocab, p = m.head_dim, layer = 1, head = 2;
    auto zero_head = [&](SiteValues<double>& s, std::size_t b) {
        for (std::size_t i = 0; i < l; ++i)
            for (std::size_t c = 0; c < p; ++c) s.sequence(b)[i * m.heads * p + head * p + c] = 0;
    };
    // one run, head 2 of layer 1 zeroed
    Recorder ablated;
    ablated.edit_at = {Site::z, layer};
    ablated.edit = [&](SiteValues<double>& s) { zero_head(s, 0); };
    const Array<double> alone = run_logits(model, ids, ablated);
    ModelObserver<double> none;
    const Array<double> clean = run_logits(model, ids, none);
    CHECK(max_diff(alone.data(), clean.data(), alone.size()) > 1e-3);  // the head matters

    // the same as a fork of the clean sequence at that site, next to it in one batch
    Recorder forking;
    forking.edit_at = {Site::z, layer};
    forking.edit = [&](SiteValues<double>& s) {
        const std::size_t b = s.fork(0);
        CHECK(b == 1);
        CHECK(s.sequences() == 2);
        zero_head(s, b);
    };
    ForwardPass<double> pass(model, ForwardOptions{}, forking);
    pass.embed({ids});
    pass.run_until(m.layers.size());
    CHECK(pass.sequences() == 2);
    std::vector<std::size_t> all(l);
    for (std::size_t i = 0; i < l; ++i) all[i] = i;
    const Array<double> both = pass.logits(all);
    REQUIRE(both.shape()[0] == 2 * l);
    CHECK(max_diff(both.data(), clean.data(), l * v) < 1e-10);
    CHECK(max_diff(both.data() + l * v, alone.data(), l * v) < 1e-10);
}

TEST_CASE("sites: resuming from a kept residual stream gives the same logits; forks of forks copy their source") {
    const Model model = open_model(kModels + "full_gpt2");
    const auto ids = fixture_ids("full_gpt2");
    const std::size_t l = ids.size();
    Recorder r;
    const Array<double> clean = run_logits(model, ids, r);
    const auto& x1 = r.kept.at({Site::resid_pre, 1});
    Array<double> x = Array<double>::from_shape({l, model.config.hidden});
    std::copy(x1.begin(), x1.end(), x.begin());
    ModelObserver<double> none;
    ForwardPass<double> pass(model, ForwardOptions{}, none);
    pass.resume(1, x, 1);
    pass.run_until(model.config.layers.size());
    const Array<double> resumed = pass.logits({l - 1});
    CHECK(max_diff(resumed.data(), clean.data() + (l - 1) * model.config.vocab, model.config.vocab) < 1e-12);

    SiteValues<double> s(Site::attn_out, 0, 2, 3, 4, 0);
    for (std::size_t i = 0; i < 24; ++i) s.values()[i] = double(i);
    const std::size_t first = s.fork(1, 2);
    CHECK(first == 2);
    CHECK(s.fork(3) == 4);  // a fork of a fork: its source is sequence 1
    CHECK(s.sequences() == 5);
    CHECK(s.forked_from() == std::vector<std::size_t>{1, 1, 1});
    CHECK(s.sequence(4)[0] == 12.0);
    CHECK(site_named("z") == Site::z);
    CHECK(site_name(Site::resid_final) == "resid_final");
    CHECK(!site_named("hook_z"));
}
