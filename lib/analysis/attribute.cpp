// Direct logit attribution (attribute.hpp).
#include "attntrace/analysis/attribute.hpp"

#include <cmath>
#include <map>

#include "attntrace/model/forward.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

// The components of the residual stream at one position, as the forward reaches them.
template <class T>
class ComponentRecorder final : public ModelObserver<T> {
public:
    // HEADS: each head's head_out, else each layer's attn_out.
    ComponentRecorder(std::size_t position, bool heads) : p_(position), heads_(heads) {}
    bool wants_site(Site site, std::size_t layer) const override {
        return (site == Site::resid_pre && layer == 0) || site == (heads_ ? Site::head_out : Site::attn_out) ||
               site == Site::mlp_out || site == Site::resid_final;
    }
    void at_site(SiteValues<T>& v) override {
        const T* row = v.sequence(0) + p_ * v.width();
        std::vector<double> values(row, row + v.width());
        if (v.site() == Site::head_out || v.site() == Site::attn_out) {
            heads[v.layer()] = std::move(values);
            if (v.bias()) bias[v.layer()].assign(v.bias(), v.bias() + v.width() / v.heads());
        } else if (v.site() == Site::mlp_out) {
            mlp[v.layer()] = std::move(values);
        } else {
            (v.site() == Site::resid_pre ? embed : final) = std::move(values);
        }
    }
    std::vector<double> embed, final;                        // (E)
    std::map<std::size_t, std::vector<double>> heads, bias, mlp;  // layer -> (H*E) or attn_out's (E), (E), (E)

private:
    std::size_t p_;
    bool heads_;
};

// (c - mean(c)) / σ · wd under a LayerNorm, c / rms · wd under an RMSNorm: SCALE is σ or rms,
// CENTRED whether c is centred.
double through_norm(const double* c, std::size_t e, const std::vector<double>& wd, double scale, bool centred) {
    double mean = 0;
    if (centred) {
        for (std::size_t i = 0; i < e; ++i) mean += c[i];
        mean /= double(e);
    }
    double dot = 0;
    for (std::size_t i = 0; i < e; ++i) dot += (c[i] - mean) * wd[i];
    return dot / scale;
}

// σ = sqrt(var(x) + eps) (LayerNorm, biased variance) or rms = sqrt(mean(x²) + eps) of X.
double norm_scale(const std::vector<double>& x, NormKind kind, double eps) {
    const double n = double(x.size());
    double mean = 0, sq = 0;
    for (double v : x) mean += v;
    mean /= n;
    for (double v : x) sq += kind == NormKind::layer_norm ? (v - mean) * (v - mean) : v * v;
    return std::sqrt(sq / n + eps);
}

}  // namespace

const char* component_kind_name(ComponentKind kind) {
    switch (kind) {
    case ComponentKind::embed: return "embed";
    case ComponentKind::head: return "head";
    case ComponentKind::attn_bias: return "attn_bias";
    case ComponentKind::attn: return "attn";
    case ComponentKind::mlp: return "mlp";
    case ComponentKind::constant: return "constant";
    }
    return "";
}

std::string attribution_refused(const ModelConfig& m) {
    if (m.residual == Residual::post_norm)
        return m.model_type + " normalizes the residual stream after each block (post-norm): its logits are no sum "
                              "of components, so there is no direct logit attribution";
    if (m.residual == Residual::post_layernorm)
        return m.model_type + " with apply_residual_connection_post_layernorm takes its residuals from normed values: "
                              "its logits are no sum of components, so there is no direct logit attribution";
    if (!m.final_norm) return m.model_type + " has no final norm to freeze: no direct logit attribution";
    return "";
}

template <class T>
Attribution attribute(const Model& model, const std::vector<std::uint32_t>& ids, const MetricRequest& request,
                      std::size_t threads) {
    const ModelConfig& m = model.config;
    if (const std::string why = attribution_refused(m); !why.empty()) throw UsageError("attribute: " + why);
    check_metric_request(m, ids.size(), request);
    if (!request.target) throw UsageError("attribute: a target is needed");
    Attribution a;
    a.metric = {request.versus ? MetricKind::logit_diff : MetricKind::logit, request.position, *request.target,
                request.versus};
    const bool by_head = m.residual != Residual::sandwich;  // a post-attention norm: the heads do not add up
    ComponentRecorder<T> rec(request.position, by_head);
    ForwardOptions fo;
    fo.threads = threads;
    fo.row_stats = false;
    ForwardPass<T> pass(model, fo, rec);
    pass.embed({ids});
    pass.run_until(m.layers.size());
    // the model's logits at P before any final soft-capping, from its final residual
    Array<T> final = Array<T>::from_shape({1, m.hidden});
    std::copy(rec.final.begin(), rec.final.end(), final.begin());
    a.value = metric_value(a.metric, unembed(model, final, threads, false).data(), m.vocab);

    std::vector<std::uint32_t> tokens{*request.target};
    if (request.versus) tokens.push_back(*request.versus);
    const Array<T> rows = unembedding_rows<T>(model, tokens);
    const std::vector<T> head_bias = unembedding_bias<T>(model, tokens);
    const FinalNorm<T> norm = final_norm_weights<T>(model);
    const std::size_t e = m.hidden;
    std::vector<double> wd(e);
    double constant = double(head_bias[0]) - (request.versus ? double(head_bias[1]) : 0.0);
    for (std::size_t i = 0; i < e; ++i) {
        const double d = double(rows.data()[i]) - (request.versus ? double(rows.data()[e + i]) : 0.0);
        wd[i] = d * (norm.weight ? double(norm.weight->data()[i]) : 1.0);
        if (norm.bias) constant += double(norm.bias->data()[i]) * d;
    }
    const bool centred = norm.kind == NormKind::layer_norm;
    const double scale = norm_scale(rec.final, norm.kind, norm.eps);
    auto add = [&](ComponentKind kind, std::optional<std::size_t> layer, std::optional<std::size_t> head, const double* c) {
        a.components.push_back({kind, layer, head, through_norm(c, e, wd, scale, centred)});
    };
    add(ComponentKind::embed, std::nullopt, std::nullopt, rec.embed.data());
    for (std::size_t n = 0; n < m.layers.size(); ++n) {
        if (!by_head) add(ComponentKind::attn, n, std::nullopt, rec.heads.at(n).data());
        for (std::size_t h = 0; by_head && h < m.heads; ++h) add(ComponentKind::head, n, h, rec.heads.at(n).data() + h * e);
        if (rec.bias.count(n)) add(ComponentKind::attn_bias, n, std::nullopt, rec.bias.at(n).data());
        add(ComponentKind::mlp, n, std::nullopt, rec.mlp.at(n).data());
    }
    a.components.push_back({ComponentKind::constant, std::nullopt, std::nullopt, constant});
    for (const Component& c : a.components) a.sum += c.value;
    return a;
}

template Attribution attribute<float>(const Model&, const std::vector<std::uint32_t>&, const MetricRequest&, std::size_t);
template Attribution attribute<double>(const Model&, const std::vector<std::uint32_t>&, const MetricRequest&, std::size_t);

}  // namespace attntrace
