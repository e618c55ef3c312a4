// attntrace attribute MODEL (--text S | --ids ...) --target S|--target-id N [--versus S|--versus-id N]
// [--position P] [-o F.npy] [--plot F.png|F.svg]: direct logit attribution (docs/interventions.md).
#include <algorithm>

#include "analysis_session.hpp"
#include "attntrace/analysis/attribute.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"

using namespace attntrace;

namespace {

// Whether A has a component per layer's attention (Gemma 2/3, OLMo 2) instead of per head.
bool by_layer(const Attribution& a) {
    return std::any_of(a.components.begin(), a.components.end(), [](const Component& k) { return k.kind == ComponentKind::attn; });
}

// (N, H) of the heads' contributions ((N, 1) of each layer's attention by_layer), and (N) of the MLPs'.
std::pair<Array<double>, std::vector<double>> head_table(const ModelConfig& m, const Attribution& a) {
    Array<double> heads = Array<double>::from_shape({m.layers.size(), by_layer(a) ? 1 : m.heads});
    heads.fill(0.0);
    std::vector<double> mlps(m.layers.size(), 0.0);
    for (const Component& k : a.components) {
        if (k.kind == ComponentKind::head) heads(*k.layer, *k.head) = k.value;
        if (k.kind == ComponentKind::attn) heads(*k.layer, 0) = k.value;
        if (k.kind == ComponentKind::mlp) mlps[*k.layer] = k.value;
    }
    return {heads, mlps};
}

MatrixPicture attribution_picture(const AnalysisContext& c, const Attribution& a) {
    const ModelConfig& m = *c.config;
    const auto [heads, mlps] = head_table(m, a);
    MatrixPicture p;
    p.title = "direct logit attribution: " + describe_model(m);
    p.lines.push_back("metric: " + metric_text(c, a.metric));
    p.lines.push_back("colour: what each head (and each layer's MLP, last column) writes into it through the frozen final norm");
    const std::size_t cols = heads.shape()[1];
    p.row_axis = "layer", p.col_axis = by_layer(a) ? "sublayer" : "head";
    for (std::size_t n = 0; n < m.layers.size(); ++n) p.row_labels.push_back(std::to_string(n));
    for (std::size_t h = 0; h < cols; ++h) p.col_labels.push_back(by_layer(a) ? "attn" : std::to_string(h));
    p.col_labels.push_back("MLP");
    for (std::size_t n = 0; n < m.layers.size(); ++n) {
        for (std::size_t h = 0; h < cols; ++h) p.values.push_back(heads(n, h));
        p.values.push_back(mlps[n]);
    }
    p.diverging = true;
    p.legend = "contribution to " + std::string(metric_kind_name(a.metric.kind));
    return p;
}

template <class T>
void run_attribute(const AnalysisFlags& f) {
    check_analysis_outputs(f, {{"-o", f.output}, {"--plot", f.plot}});
    const AnalysisSession s = open_analysis(f);
    if (const std::string why = attribution_refused(s.model.config); !why.empty()) throw UsageError("attribute: " + why);
    const MetricRequest request = metric_request(s, f, true);
    const Attribution a = attribute<T>(s.model, s.seq.ids, request, f.threads);
    const AnalysisContext c = analysis_context<T>(s, f, "attribute");
    if (!f.output.empty()) save_tensor(f.output, head_table(s.model.config, a).first, FileFormat::npy);
    if (!f.plot.empty()) write_matrix_picture(f.plot, attribution_picture(c, a));
    const bool json = f.format == TraceFormat::json;
    print_analysis(f, json ? attribution_json(c, a) : nlohmann::json(), json ? "" : attribution_text(c, a));
}

}  // namespace

void setup_attribute(CLI::App& app) {
    auto run = [](const AnalysisFlags& f) { with_precision(f.dtype, [&]<class T>() { run_attribute<T>(f); }); };
    auto [f, cmd] = add_command<AnalysisFlags>(app, "attribute",
                                               "Direct logit attribution: what each head and MLP writes into a logit", run);
    add_analysis_flags(*cmd, *f, true);
    cmd->footer(R"(Examples:
  attntrace attribute tests/fixtures/models/full_gpt2 --ids 5,9,3,7 --target-id 12
  attntrace attribute gpt2/ --text "The Eiffel Tower is in" --target " Paris" --versus " Rome" --plot dla.png)");
}
