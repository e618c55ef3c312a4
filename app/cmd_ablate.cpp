// attntrace ablate MODEL (--text S | --ids ...) (--heads L.H[,L.H...] | --heads each) [--ablation
// zero|mean] [--target S] [--versus S] [--position P] [--top K] [-o F.npy] [--plot F.png|F.svg]
// [--logits F.npy]: heads knocked out, and what it does to the prediction (docs/interventions.md).
#include "analysis_session.hpp"
#include "attntrace/analysis/ablate.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"

using namespace attntrace;

namespace {

struct AblateFlags : AnalysisFlags {
    std::string heads;
    Ablation ablation = Ablation::zero;
    std::size_t top = 5;
    std::string logits;
};

MatrixPicture each_picture(const AnalysisContext& c, const Metric& metric, const Array<double>& values, Ablation a) {
    MatrixPicture m;
    const std::size_t n = values.shape()[0], h = values.shape()[1];
    m.title = "ablate: each head " + std::string(a == Ablation::zero ? "zero" : "mean") + "-ablated alone, " +
              describe_model(*c.config);
    m.lines.push_back("metric: " + metric_text(c, metric));
    m.lines.push_back("colour: metric(ablated) - metric(clean)");
    m.row_axis = "layer", m.col_axis = "head";
    for (std::size_t i = 0; i < n; ++i) m.row_labels.push_back(std::to_string(i));
    for (std::size_t j = 0; j < h; ++j) m.col_labels.push_back(std::to_string(j));
    m.values.assign(values.data(), values.data() + values.size());
    m.diverging = true;
    m.legend = "change in " + std::string(metric_kind_name(metric.kind));
    return m;
}

template <class T>
void run_ablate(const AblateFlags& f) {
    check_analysis_outputs(f, {{"-o", f.output}, {"--plot", f.plot}, {"--logits", f.logits}});
    const AnalysisSession s = open_analysis(f);
    const ModelConfig& m = s.model.config;
    const bool each = f.heads == "each";
    if (each && !f.logits.empty()) throw UsageError("--logits: writes one ablated run's logits, not with --heads each");
    if (!each && (!f.output.empty() || !f.plot.empty()))
        throw UsageError(std::string(f.output.empty() ? "--plot" : "-o") + ": draws or writes --heads each's table");
    const MetricRequest request = metric_request(s, f, false);
    const std::vector<HeadRef> heads =
        each ? std::vector<HeadRef>{} : naming_flags({{"heads", "--heads"}}, [&] { return parse_heads(f.heads, m.layers.size(), m.heads); });
    AblationOptions o;
    o.ablation = f.ablation;
    o.top = f.top;
    o.logits = !f.logits.empty();
    o.threads = f.threads;
    o.budget = analysis_budget(f);
    const AblationResult<T> r = naming_flags({}, [&] {
        return each ? ablate_each<T>(s.model, s.seq.ids, request, o) : ablate_heads<T>(s.model, s.seq.ids, heads, request, o);
    }, kBudgetPhrase);
    const AnalysisContext c = analysis_context<T>(s, f, "ablate");
    if (!f.output.empty()) save_tensor(f.output, *r.values, FileFormat::npy);
    if (!f.plot.empty()) write_matrix_picture(f.plot, each_picture(c, r.metric, *r.values, f.ablation));
    if (r.logits) save_tensor(f.logits, *r.logits, FileFormat::npy);
    const bool json = f.format == TraceFormat::json;
    print_analysis(f, json ? ablation_json(c, r, f.ablation) : nlohmann::json(), json ? "" : ablation_text(c, r, f.ablation));
}

}  // namespace

void setup_ablate(CLI::App& app) {
    auto run = [](const AblateFlags& f) { with_precision(f.dtype, [&]<class T>() { run_ablate<T>(f); }); };
    auto [f, cmd] = add_command<AblateFlags>(app, "ablate", "Knock heads out and measure what the prediction loses", run);
    add_analysis_flags(*cmd, *f, true);
    cmd->add_option("--heads", f->heads, "the heads ablated together, LAYER.HEAD[,...] (e.g. 9.6,10.0), or 'each' alone")
        ->required();
    add_mode_option(*cmd, "--ablation", f->ablation, {{"zero", Ablation::zero}, {"mean", Ablation::mean}},
                    "replace a head's z by 0, or by its mean over the positions of the clean run");
    cmd->add_option("--top", f->top, "the K most likely tokens of the clean and the ablated run (default 5)")
        ->check(positive_integer(1000));
    cmd->add_option("--logits", f->logits, "write the ablated run's (L, vocab) logits (.npy)")->check(file_name());
    cmd->footer(R"(Examples:
  attntrace ablate tests/fixtures/models/full_gpt2 --ids 5,9,3,7 --heads 1.0,2.1
  attntrace ablate gpt2/ --text "When Mary and John went to the store, John gave a drink to" --target " Mary" \
      --versus " John" --heads each --plot heads.png -o heads.npy)");
}
