// attntrace lens MODEL (--text S | --text-file F | --ids ...) [--target S] [--top K] [--layers SPEC]
// [-o F.npy] [--plot F.png|F.svg]: the logit lens, every layer's prediction at every position
// (docs/interventions.md).
#include "analysis_session.hpp"
#include "attntrace/analysis/lens.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/model/layer_spec.hpp"
#include "commands.hpp"

using namespace attntrace;

namespace {

struct LensFlags : AnalysisFlags {
    std::size_t top = 1;
    std::string layers;
};

// (K, L) of the target's probability.
Array<double> target_probabilities(const LensResult& r) {
    Array<double> out = Array<double>::from_shape({r.layers.size(), r.length});
    for (std::size_t i = 0; i < r.cells.size(); ++i) out.data()[i] = r.cells[i].target_probability;
    return out;
}

MatrixPicture lens_picture(const AnalysisContext& c, const LensResult& r, const std::optional<std::uint32_t>& target) {
    MatrixPicture m;
    m.title = "logit lens: " + describe_model(*c.config);
    m.lines.push_back("each cell: the most likely next token after that layer's blocks, through the final norm and the head");
    if (target) m.lines.push_back("colour: the probability of " + c.token_label(*target) + " (id " + std::to_string(*target) + ")");
    m.row_axis = "layer", m.col_axis = "input token";
    for (std::size_t k : r.layers) m.row_labels.push_back(std::to_string(k));
    for (std::size_t p = 0; p < r.length; ++p) m.col_labels.push_back(std::to_string(p) + " " + c.token_label(c.tokens[p].id));
    for (const LensCell& cell : r.cells) {
        m.values.push_back(target ? cell.target_probability : cell.top.front().probability);
        m.cell_text.push_back(c.token_label(cell.top.front().id));
    }
    m.top = 1;
    m.legend = target ? "probability of the target" : "probability of the top token";
    return m;
}

template <class T>
void run_lens(const LensFlags& f) {
    check_analysis_outputs(f, {{"-o", f.output}, {"--plot", f.plot}});
    const AnalysisSession s = open_analysis(f);
    const ModelConfig& m = s.model.config;
    const MetricRequest request = metric_request(s, f, false, false);  // the target, if any
    if (!f.output.empty() && !request.target) throw UsageError("-o: writes the target's probability; give --target");
    LensOptions o;
    o.top = f.top;
    o.target = request.target;
    o.threads = f.threads;
    const std::vector<bool> kept =
        naming_flags({{"layers", "--layers"}}, [&] { return parse_layer_spec(f.layers, m.layers.size() + 1); });
    for (std::size_t k = 0; k < kept.size(); ++k)
        if (kept[k]) o.layers.push_back(k);
    const LensResult r = logit_lens<T>(s.model, s.seq.ids, o);
    const AnalysisContext c = analysis_context<T>(s, f, "lens");
    if (!f.output.empty()) save_tensor(f.output, target_probabilities(r), FileFormat::npy);
    if (!f.plot.empty()) write_matrix_picture(f.plot, lens_picture(c, r, request.target));
    print_analysis(f, f.format == TraceFormat::json ? lens_json(c, r, request.target) : nlohmann::json(),
                   f.format == TraceFormat::json ? "" : lens_text(c, r, request.target, f.position.value_or(SIZE_MAX)));
}

}  // namespace

void setup_lens(CLI::App& app) {
    auto run = [](const LensFlags& f) { with_precision(f.dtype, [&]<class T>() { run_lens<T>(f); }); };
    auto [f, cmd] = add_command<LensFlags>(app, "lens", "The logit lens: what each layer predicts at every position", run);
    add_analysis_flags(*cmd, *f, false);
    cmd->get_option("--position")->description("with --top K > 1, the position whose K tokens the text lists (default: the last)");
    cmd->add_option("--top", f->top, "the K most likely tokens per layer and position (default 1)")->check(positive_integer(1000));
    cmd->add_option("--layers", f->layers, "the layers shown, 0 (the embeddings) to N (the model's output): e.g. 0-3,12");
    cmd->footer(R"(Examples:
  attntrace lens tests/fixtures/models/full_gpt2 --text "the cat sat on the mat"
  attntrace lens gpt2/ --text "The capital of France is" --target " Paris" -o p.npy --plot lens.png
  attntrace lens gpt2/ --text "x y z" --top 5 --format json | jq '.layers[-1].positions[-1].top')");
}
