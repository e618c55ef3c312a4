// Pictures of a whole model run (model_pictures.hpp).
#include "model_pictures.hpp"

#include <cstdlib>

#include "attntrace/io/atomic_write.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/model/layer_spec.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/token_display.hpp"
#include "flag_parsing.hpp"
#include "picture_flags.hpp"

using namespace attntrace;

bool wants_model_pictures(const ModelFlags& f) {
    return f.heatmap || !f.plot.empty() || !f.report.empty() || !f.rollout.empty();
}

void check_model_picture_flags(const ModelFlags& f) {
    auto ends = [](const std::string& s, const char* tail) { return s.ends_with(tail); };
    if (!f.plot.empty() && !ends(f.plot, ".png") && !ends(f.plot, ".svg"))
        throw UsageError("--plot: '" + f.plot + "' must end in .png or .svg");
    if (!f.report.empty() && !ends(f.report, ".html")) throw UsageError("--report: '" + f.report + "' must end in .html");
    if (!f.rollout.empty() && !ends(f.rollout, ".npy")) throw UsageError("--rollout: '" + f.rollout + "' must end in .npy");
    if (!f.scale.empty() && !parse_colour_scale(f.scale))
        throw UsageError("--scale: '" + f.scale + "' is not a colour scale; use linear, row or log");
    if (!f.scale.empty() && !f.heatmap && f.plot.empty() && f.report.empty())
        throw UsageError("--scale: a colour scale needs --heatmap, --plot or --report");
    if (!f.each_line.empty() && wants_model_pictures(f))
        throw UsageError("--heatmap/--plot/--report/--rollout: not with --each-line (pictures are of one text)");
}

std::size_t picture_cells(const ModelFlags& f, std::size_t length) {
    // the report opens a head at full resolution (up to kModelPictureCells a side); the plot and the
    // heatmap draw at most a few hundred cells a side
    if (!f.heatmap && f.plot.empty() && f.report.empty()) return 0;  // --rollout alone
    const std::size_t cells = f.report.empty() ? 256 : kModelPictureCells;
    return std::min(cells, std::max<std::size_t>(length, 1));
}

std::uint64_t picture_bytes(const ModelSession& s, std::size_t length, std::size_t element) {
    const ModelFlags& f = s.flags;
    if (!wants_model_pictures(f)) return 0;
    const std::uint64_t layers = kept_layers(s.kept).size(), heads = s.model.config.heads;
    const std::uint64_t cells = picture_cells(f, length);
    std::uint64_t bytes = layers * heads * cells * cells * sizeof(float);  // the pooled weights kept
    if (!f.rollout.empty() || !f.report.empty()) bytes += 3 * std::uint64_t(length) * length * element;
    if (!f.plot.empty()) bytes += model_plot_bytes(layers, heads, length);
    if (!f.report.empty()) bytes += 2 * heads * cells * cells;  // a layer's bytes and their deflated copy
    return bytes;
}

template <class T>
PictureCollector<T>::PictureCollector(const ModelSession& s, std::size_t length) : kept_(s.kept) {
    if (!s.flags.rollout.empty() || !s.flags.report.empty()) rollout.emplace(s.model.config.heads, length);
}

template <class T>
bool PictureCollector<T>::wants_weights(std::size_t layer) const {
    return rollout && layer < kept_.size() && kept_[layer];
}

template <class T>
void PictureCollector<T>::attention_rows(std::size_t, std::size_t first, const T* w, std::size_t count) {
    rollout->add(first, w, count);
}

template <class T>
void PictureCollector<T>::attention_done(const LayerAttention& a) {
    if (a.layer >= kept_.size() || !kept_[a.layer]) return;
    if (rollout) rollout->finish_layer();
    if (!a.pooled) return;  // --rollout alone keeps no weights
    layers.push_back(a.layer);
    weights.push_back(*a.pooled);
}

namespace {

// The detector table's row of head SUMMARY of LAYER (the trace's fields).
ModelHead head_row(std::size_t layer, const HeadSummary& summary, const ModelTrace& trace) {
    std::optional<double> induction;
    if (const auto it = trace.induction_scores.find(layer); it != trace.induction_scores.end())
        induction = it->second.at(summary.head);
    ModelHead h{layer, summary.head, model_head_role(summary, induction), head_summary_json(summary)};
    h.scores.erase("head");
    h.scores.erase("top");
    if (induction) h.scores["induction"] = *induction;
    return h;
}

std::string picture_title(const ModelSession& s, std::size_t length) {
    const ModelConfig& m = s.model.config;
    std::string dir = s.flags.model;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir.substr(dir.find_last_of('/') + 1) + ": " + m.model_type + ", " + std::to_string(m.layers.size()) +
           " layers, " + std::to_string(m.heads) + " heads, " + std::to_string(length) + " tokens";
}

template <class T>
ModelPictures picture_data(const ModelSession& s, const Sequence& seq, const ModelTrace& trace, PictureCollector<T>& c) {
    ModelPictures p;
    p.title = picture_title(s, seq.ids.size());
    p.text = seq.text;
    p.ids = seq.ids;
    if (s.tokenizer) p.tokens = display_tokens(*s.tokenizer, seq.ids);
    else for (auto id : seq.ids) p.tokens.push_back(std::to_string(id));
    p.layers = c.layers;
    p.weights = std::move(c.weights);
    for (const auto& [layer, heads] : trace.heads)
        for (const HeadSummary& h : heads) p.heads.push_back(head_row(layer, h, trace));
    for (const Prediction& pr : trace.predictions) {
        nlohmann::json top = nlohmann::json::array();
        for (const Candidate& cand : pr.top) top.push_back({{"text", visible_text(cand.text)}, {"probability", cand.probability}});
        p.predictions.push_back({{"position", pr.position}, {"top", top}});
    }
    if (c.rollout && c.rollout->layers() > 0) p.rollout = pool_weights(c.rollout->rollout(), kModelPictureCells);
    p.scale = s.flags.scale.empty() ? kDefaultColourScale : *parse_colour_scale(s.flags.scale);
    return p;
}

// What DRAW makes for FILE; an OutputError (the font engine or zlib missing) names the file.
template <class F>
std::string drawn(const std::string& file, F&& draw) {
    try {
        return draw();
    } catch (const OutputError& e) {
        throw OutputError(file + ": " + e.what());
    }
}

}  // namespace

template <class T>
std::string draw_model_pictures(const ModelSession& s, const Sequence& seq, const ModelTrace& trace,
                                PictureCollector<T>& collected, FILE* stream) {
    const ModelFlags& f = s.flags;
    // every picture made before any file is written: a failure leaves none
    std::string plot, report, heatmaps;
    if (f.heatmap || !f.plot.empty() || !f.report.empty()) {
        const ModelPictures p = picture_data(s, seq, trace, collected);
        if (!f.plot.empty()) plot = drawn(f.plot, [&] { return f.plot.ends_with(".png") ? model_plot_png(p) : model_plot_svg(p); });
        if (!f.report.empty()) report = drawn(f.report, [&] { return model_report_html(p); });
        if (f.heatmap) {
            const char* columns = std::getenv("COLUMNS");
            const auto width = columns ? parse_uint(columns) : std::nullopt;
            heatmaps = model_heatmaps(p, terminal_style(stream), width && *width >= 8 ? static_cast<std::size_t>(*width) : 80);
        }
    }
    if (!f.rollout.empty()) save_tensor(f.rollout, collected.rollout->rollout(), FileFormat::npy);
    if (!f.plot.empty()) write_file_atomically(f.plot, plot);
    if (!f.report.empty()) write_file_atomically(f.report, report);
    return heatmaps;
}

template class PictureCollector<float>;
template class PictureCollector<double>;
template std::string draw_model_pictures(const ModelSession&, const Sequence&, const ModelTrace&, PictureCollector<float>&, FILE*);
template std::string draw_model_pictures(const ModelSession&, const Sequence&, const ModelTrace&, PictureCollector<double>&, FILE*);
