#include "picture_flags.hpp"

#include <unistd.h>

#include <cstdlib>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/pictures/heatmap.hpp"
#include "attntrace/pictures/labels.hpp"
#include "attntrace/pictures/plot.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "flag_parsing.hpp"

using namespace attntrace;

void add_scale_flag(CLI::App& cmd, std::string& target, const char* flag) {
    cmd.add_option(flag, target,
                   "the pictures' colour scale: row (default: each row to its own maximum, so a sink does not wash "
                   "out the rest), linear or log");
}

ColourScale colour_scale(const PictureFlags& f) {
    if (f.scale.empty()) return kDefaultColourScale;
    const auto s = parse_colour_scale(f.scale);
    if (!s) throw UsageError(std::string(f.scale_flag) + ": '" + f.scale + "' is not a colour scale; use linear, row or log");
    return *s;
}

void add_picture_flags(CLI::App& cmd, PictureFlags& f, bool with_report, const char* scale_flag) {
    cmd.add_flag("--heatmap", f.heatmap,
                 "print each head's weights as a heatmap after the trace (colour on a terminal, ASCII otherwise)");
    cmd.add_option("--plot", f.plot, "write the heads' heatmaps as a picture: FILE.png or FILE.svg");
    if (with_report) cmd.add_option("--report", f.report, "write a self-contained HTML report: FILE.html");
    cmd.add_option("--labels", f.labels, "query tokens for the pictures: text, one per line, or a JSON array");
    cmd.add_option("--key-labels", f.key_labels, "key tokens (default: --labels when there are as many keys)");
    cmd.add_option("--show-heads", f.show_heads, "the heads to picture, e.g. 0,3 (default: all)");
    cmd.add_option("--batch", f.batch, "the batch row to picture (default 0)");
    f.scale_flag = scale_flag;
    add_scale_flag(cmd, f.scale, scale_flag);
}

namespace {

bool ends_with(const std::string& s, const char* suffix) {
    const std::string t = suffix;
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

void check_picture_flags(const PictureFlags& f) {
    if (!f.plot.empty() && !ends_with(f.plot, ".png") && !ends_with(f.plot, ".svg"))
        throw UsageError("--plot: '" + f.plot + "' must end in .png or .svg");
    if (!f.report.empty() && !ends_with(f.report, ".html"))
        throw UsageError("--report: '" + f.report + "' must end in .html");
    if (!f.show_heads.empty() && !parse_uint_list(f.show_heads))
        throw UsageError("--show-heads: '" + f.show_heads + "' is not a list of head numbers like 0,3");
    if (!f.any() && (!f.labels.empty() || !f.key_labels.empty() || !f.show_heads.empty() || f.batch != 0))
        throw UsageError("--labels, --key-labels, --show-heads and --batch need --heatmap, --plot or --report");
    colour_scale(f);
    if (!f.any() && !f.scale.empty())
        throw UsageError(std::string(f.scale_flag) + ": a colour scale needs --heatmap, --plot or --report");
}

std::vector<std::size_t> shown_heads(const PictureFlags& f) {
    std::vector<std::size_t> heads;
    if (f.show_heads.empty()) return heads;
    const auto list = parse_uint_list(f.show_heads);  // checked by check_picture_flags
    for (auto h : list.value()) heads.push_back(static_cast<std::size_t>(h));
    return heads;
}

AxisLabels load_axis_labels(const PictureFlags& f, std::size_t lq, std::size_t lk) {
    AxisLabels out;
    if (!f.labels.empty()) out.query = load_labels(f.labels);
    if (!f.key_labels.empty()) out.key = load_labels(f.key_labels);
    else if (lq == lk) out.key = out.query;
    auto check = [](const std::vector<std::string>& labels, std::size_t n, const std::string& flag,
                    const std::string& file, const char* what) {
        if (!labels.empty() && labels.size() != n)
            throw InputError(flag + ": " + file + " has " + std::to_string(labels.size()) + " labels but there are " +
                             std::to_string(n) + " " + what);
    };
    check(out.query, lq, "--labels", f.labels, "queries");
    check(out.key, lk, f.key_labels.empty() ? "--labels" : "--key-labels", f.key_labels.empty() ? f.labels : f.key_labels,
          "keys (give --key-labels)");
    return out;
}

bool terminal_style(FILE* stream) {
    const char* no_color = std::getenv("NO_COLOR");
    return isatty(fileno(stream)) && (no_color == nullptr || *no_color == '\0');
}

std::string draw_pictures(const PictureFlags& f, const PooledWeights& weights, const std::string& title,
                          const AxisLabels& labels, FILE* stream, const std::vector<std::string>& names) {
    if (!f.plot.empty()) {
        PlotOptions o{title, labels.query, labels.key, f.batch, shown_heads(f), colour_scale(f)};
        const std::string bytes = naming_flags(kPictureFlagNames, [&] {
            try {
                return ends_with(f.plot, ".png") ? plot_png(weights, o) : plot_svg(weights, o);
            } catch (const OutputError& e) {  // cairo or pango could not be loaded or failed: say which file
                throw OutputError(f.plot + ": " + e.what());
            }
        });
        write_file_atomically(f.plot, bytes);
    }
    if (!f.heatmap) return "";
    HeatmapStyle style;
    style.truecolor = terminal_style(stream);
    const char* columns = std::getenv("COLUMNS");
    const auto width = columns ? parse_uint(columns) : std::nullopt;
    style.width = width && *width >= 8 ? static_cast<std::size_t>(*width) : 80;
    style.batch = f.batch;
    style.heads = shown_heads(f);
    style.names = names;
    style.scale = colour_scale(f);
    return naming_flags(kPictureFlagNames, [&] { return render_heatmaps(weights, style); });
}
