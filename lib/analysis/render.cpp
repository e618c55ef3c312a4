// The analyses' text and JSON (render.hpp).
#include "attntrace/analysis/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attntrace/tensor/numbers.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

constexpr std::size_t kLineWidth = 100, kCellChars = 14;

// Code points of S (its display width for the Latin, Greek and Cyrillic of most tokens).
std::size_t width_of(const std::string& s) {
    return std::size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// S cut to N code points, "…" for the rest.
std::string clipped(const std::string& s, std::size_t n) {
    if (width_of(s) <= n) return s;
    std::size_t points = 0, at = 0;
    for (; at < s.size(); ++at)
        if ((static_cast<unsigned char>(s[at]) & 0xC0) != 0x80 && points++ == n - 1) break;
    return s.substr(0, at) + "…";
}

std::string padded_left(const std::string& s, std::size_t w) { return std::string(w - std::min(w, width_of(s)), ' ') + s; }
std::string padded_right(const std::string& s, std::size_t w) { return s + std::string(w - std::min(w, width_of(s)), ' '); }

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

// 4 significant digits: "-1.234", "0.0001234", "nan"; a sign before positive changes with SIGNED.
std::string short_number(double v, bool is_signed = false) {
    char buf[64];
    std::snprintf(buf, sizeof buf, is_signed ? "%+.4g" : "%.4g", v);
    return buf;
}

json candidates_json(const AnalysisContext& c, const std::vector<Candidate>& top) {
    json out = json::array();
    for (const Candidate& k : top) out.push_back({{"id", k.id}, {"text", c.token_text(k.id)}, {"probability", k.probability}});
    return out;
}

std::string candidates_text(const AnalysisContext& c, const std::vector<Candidate>& top) {
    std::string out;
    for (const Candidate& k : top) out += (out.empty() ? "" : ", ") + c.token_label(k.id) + " " + fixed(k.probability, 3);
    return out;
}

json header_json(const AnalysisContext& c) {
    return {{"command", c.command}, {"model", model_summary_json(c.dir, *c.config, c.dtype, c.threads)},
            {"tokens", tokens_json(c.tokens)}};
}

std::string header_text(const AnalysisContext& c) {
    std::string out = c.command + " " + c.dir + ": " + std::to_string(c.tokens.size()) + " tokens, " + c.dtype + "\n  " +
                      describe_model(*c.config) + "\ntokens:";
    std::size_t line = 7;
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
        const std::string item = "  " + std::to_string(i) + ":" + clipped(c.token_label(c.tokens[i].id), 12);
        if (line + width_of(item) > kLineWidth) out += "\n       ", line = 7;
        out += item, line += width_of(item);
    }
    return out + "\n";
}

std::string token_at(const AnalysisContext& c, std::size_t position) {
    return position < c.tokens.size() ? c.token_label(c.tokens[position].id) : "";
}

}  // namespace

std::string text_table(const std::string& corner, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::vector<std::string>& cells) {
    std::size_t side = width_of(corner), w = 1;
    for (const auto& s : row_labels) side = std::max(side, width_of(s));
    for (const auto& s : col_labels) w = std::max(w, width_of(s));
    for (const auto& s : cells) w = std::max(w, width_of(s));
    const std::size_t per = std::max<std::size_t>(1, (kLineWidth - side) / (w + 2)), cols = col_labels.size();
    std::string out;
    for (std::size_t c0 = 0; c0 < cols; c0 += per) {
        const std::size_t c1 = std::min(cols, c0 + per);
        if (c0) out += "\n";
        out += padded_right(corner, side);
        for (std::size_t c = c0; c < c1; ++c) out += "  " + padded_left(col_labels[c], w);
        out += "\n";
        for (std::size_t r = 0; r < row_labels.size(); ++r) {
            out += padded_right(row_labels[r], side);
            for (std::size_t c = c0; c < c1; ++c) out += "  " + padded_left(cells[r * cols + c], w);
            out += "\n";
        }
    }
    return out;
}

std::string value_table(const std::string& corner, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const double* values) {
    std::vector<std::string> cells;
    for (std::size_t i = 0; i < row_labels.size() * col_labels.size(); ++i) cells.push_back(short_number(values[i]));
    return text_table(corner, row_labels, col_labels, cells);
}

std::vector<std::pair<std::size_t, std::size_t>> largest_entries(const double* values, std::size_t rows,
                                                                 std::size_t cols, std::size_t k) {
    std::vector<std::size_t> order(rows * cols);
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto magnitude = [&](std::size_t i) { return std::isnan(values[i]) ? INFINITY : std::abs(values[i]); };
    k = std::min(k, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(), [&](std::size_t a, std::size_t b) {
        return magnitude(a) > magnitude(b) || (magnitude(a) == magnitude(b) && a < b);
    });
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < k; ++i) out.push_back({order[i] / cols, order[i] % cols});
    return out;
}

std::string metric_text(const AnalysisContext& c, const Metric& m) {
    auto named = [&](std::uint32_t id) { return c.token_label(id) + " (id " + std::to_string(id) + ")"; };
    std::string what = std::string(metric_kind_name(m.kind)) + " of " + named(m.target);
    if (m.versus) what += " - " + named(*m.versus);
    return what + " at position " + std::to_string(m.position) + " (" + token_at(c, m.position) + ")";
}

json metric_json(const Metric& m) {
    return {{"kind", metric_kind_name(m.kind)}, {"position", m.position}, {"target", m.target},
            {"versus", m.versus ? json(*m.versus) : json()}};
}

// ---- lens -------------------------------------------------------------------------------------

std::string lens_text(const AnalysisContext& c, const LensResult& r, const std::optional<std::uint32_t>& target,
                      std::size_t position) {
    std::string out = header_text(c);
    out += "logit lens: the residual stream after each layer's blocks, through the final norm and the head;\n"
           "each cell the most likely token and its probability\n";
    std::vector<std::string> rows, cols, cells, target_cells;
    for (std::size_t k : r.layers) rows.push_back(std::to_string(k));
    for (std::size_t p = 0; p < r.length; ++p) cols.push_back(std::to_string(p) + " " + clipped(token_at(c, p), 8));
    for (std::size_t k = 0; k < r.layers.size(); ++k)
        for (std::size_t p = 0; p < r.length; ++p) {
            const LensCell& cell = r.cell(k, p);
            const Candidate& best = cell.top.front();
            cells.push_back(clipped(c.token_label(best.id), kCellChars - 5) + " " + fixed(best.probability, 2).substr(1));
            if (target) target_cells.push_back(fixed(cell.target_probability, 3) + " #" + std::to_string(cell.target_rank));
        }
    out += text_table("layer", rows, cols, cells);
    if (target) {
        out += "\nprobability and rank of " + c.token_label(*target) + " (id " + std::to_string(*target) + ")\n";
        out += text_table("layer", rows, cols, target_cells);
    }
    const std::size_t last = std::min(position, r.length - 1);
    if (!r.cells.empty() && r.cell(0, last).top.size() > 1) {
        out += "\ntop " + std::to_string(r.cell(0, last).top.size()) + " at position " + std::to_string(last) + " (" +
               token_at(c, last) + "):\n";
        for (std::size_t k = 0; k < r.layers.size(); ++k)
            out += "  layer " + std::to_string(r.layers[k]) + ": " + candidates_text(c, r.cell(k, last).top) + "\n";
    }
    return out;
}

json lens_json(const AnalysisContext& c, const LensResult& r, const std::optional<std::uint32_t>& target) {
    json layers = json::array();
    for (std::size_t k = 0; k < r.layers.size(); ++k) {
        json positions = json::array();
        for (std::size_t p = 0; p < r.length; ++p) {
            const LensCell& cell = r.cell(k, p);
            json item = {{"position", p}, {"top", candidates_json(c, cell.top)}};
            if (target) item["target"] = {{"probability", cell.target_probability}, {"rank", cell.target_rank}};
            positions.push_back(std::move(item));
        }
        layers.push_back({{"layer", r.layers[k]}, {"positions", std::move(positions)}});
    }
    json out = header_json(c);
    out["target"] = target ? json(*target) : json();
    out["layers"] = std::move(layers);
    return out;
}

// ---- ablate -----------------------------------------------------------------------------------

namespace {

const char* ablation_name(Ablation a) { return a == Ablation::zero ? "zero" : "mean"; }

std::string heads_list(const std::vector<HeadRef>& heads) {
    std::string out;
    for (const HeadRef& h : heads) out += (out.empty() ? "" : ", ") + std::to_string(h.layer) + "." + std::to_string(h.head);
    return out;
}

std::string each_text(const AnalysisContext& c, const Array<double>& v) {
    const std::size_t n = v.shape()[0], h = v.shape()[1];
    std::vector<std::string> rows, cols;
    for (std::size_t i = 0; i < n; ++i) rows.push_back(std::to_string(i));
    for (std::size_t j = 0; j < h; ++j) cols.push_back("head " + std::to_string(j));
    std::string out = value_table("layer", rows, cols, v.data());
    out += "the heads that matter most:";
    for (const auto& [layer, head] : largest_entries(v.data(), n, h, 5))
        out += "  " + std::to_string(layer) + "." + std::to_string(head) + " " + short_number(v.data()[layer * h + head], true);
    (void)c;
    return out + "\n";
}

}  // namespace

template <class T>
std::string ablation_text(const AnalysisContext& c, const AblationResult<T>& r, Ablation ablation) {
    std::string out = header_text(c) + "metric: " + metric_text(c, r.metric) + "\n";
    out += "clean: " + short_number(r.clean) + "  top " + std::to_string(r.clean_top.size()) + ": " +
           candidates_text(c, r.clean_top) + "\n";
    if (r.values) {
        out += "metric(ablated) - metric(clean), each head " + std::string(ablation_name(ablation)) + "-ablated alone:\n";
        return out + each_text(c, *r.values);
    }
    out += "ablated " + heads_list(r.heads) + " (" + ablation_name(ablation) + " ablation): " + short_number(r.ablated) +
           " (change " + short_number(r.ablated - r.clean, true) + "), KL(clean || ablated) " + short_number(r.kl) + "\n";
    return out + "  top " + std::to_string(r.ablated_top.size()) + ": " + candidates_text(c, r.ablated_top) + "\n";
}

template <class T>
json ablation_json(const AnalysisContext& c, const AblationResult<T>& r, Ablation ablation) {
    json out = header_json(c);
    json metric = metric_json(r.metric);
    metric["clean"] = r.clean;
    out["metric"] = std::move(metric);
    out["ablation"] = ablation_name(ablation);
    out["clean_top"] = candidates_json(c, r.clean_top);
    if (r.values) {
        json rows = json::array();
        const std::size_t n = r.values->shape()[0], h = r.values->shape()[1];
        for (std::size_t i = 0; i < n; ++i) rows.push_back(std::vector<double>(r.values->data() + i * h, r.values->data() + (i + 1) * h));
        out["values"] = std::move(rows);
        return out;
    }
    json heads = json::array();
    for (const HeadRef& h : r.heads) heads.push_back({h.layer, h.head});
    out["ablated"] = {{"heads", heads}, {"metric", r.ablated}, {"kl", r.kl}, {"top", candidates_json(c, r.ablated_top)}};
    return out;
}

// ---- attribute --------------------------------------------------------------------------------

namespace {

std::string component_name(const Component& k) {
    switch (k.kind) {
    case ComponentKind::head: return "head " + std::to_string(*k.layer) + "." + std::to_string(*k.head);
    case ComponentKind::attn_bias: return "attn bias " + std::to_string(*k.layer);
    case ComponentKind::attn: return "attn " + std::to_string(*k.layer);
    case ComponentKind::mlp: return "mlp " + std::to_string(*k.layer);
    default: return component_kind_name(k.kind);
    }
}

}  // namespace

std::string attribution_text(const AnalysisContext& c, const Attribution& a) {
    std::string out = header_text(c) + "metric: " + metric_text(c, a.metric) + "\n";
    out += "model " + short_number(a.value) + "; the components sum to " + short_number(a.sum) + " (difference " +
           short_number(a.sum - a.value) + ")\n";
    std::vector<double> values;
    for (const Component& k : a.components) values.push_back(k.value);
    out += "the 10 largest components:\n";
    for (const auto& [i, unused] : largest_entries(values.data(), values.size(), 1, 10))
        out += "  " + padded_right(component_name(a.components[i]), 16) + short_number(values[i], true) + "\n";
    return out;
}

json attribution_json(const AnalysisContext& c, const Attribution& a) {
    json out = header_json(c);
    json metric = metric_json(a.metric);
    metric["value"] = a.value;
    out["metric"] = std::move(metric);
    json components = json::array();
    for (const Component& k : a.components)
        components.push_back({{"kind", component_kind_name(k.kind)}, {"layer", k.layer ? json(*k.layer) : json()},
                              {"head", k.head ? json(*k.head) : json()}, {"value", k.value}});
    out["components"] = std::move(components);
    out["sum"] = a.sum;
    return out;
}

// ---- patch ------------------------------------------------------------------------------------

std::string patch_text(const AnalysisContext& c, const PatchResult& r) {
    std::string out = header_text(c);
    std::string differ;
    for (std::size_t i = 0; i < c.corrupt_tokens.size() && i < c.tokens.size(); ++i)
        if (c.corrupt_tokens[i].id != c.tokens[i].id)
            differ += "  " + std::to_string(i) + ":" + clipped(c.token_label(c.corrupt_tokens[i].id), 12);
    out += "corrupted, where it differs:" + (differ.empty() ? std::string("  nowhere") : differ) + "\n";
    out += "metric: " + metric_text(c, r.metric) + "\n";
    out += "clean " + short_number(r.clean) + ", corrupted " + short_number(r.corrupt) + "\n";
    const bool head = r.site == PatchSite::head;
    const std::size_t n = r.values.shape()[0], w = r.values.shape()[1];
    out += std::string("patched ") + patch_site_name(r.site) + (head ? " (z at every position)" : " at each position") +
           ": (m_patched - m_corrupt) / (m_clean - m_corrupt), 1 restores the clean answer\n";
    std::vector<std::string> rows, cols;
    for (std::size_t i = 0; i < n; ++i) rows.push_back(std::to_string(i));
    for (std::size_t j = 0; j < w; ++j) cols.push_back(head ? "head " + std::to_string(j) : std::to_string(j) + " " + clipped(token_at(c, j), 6));
    out += value_table("layer", rows, cols, r.values.data());
    out += "the sites that restore most:";
    for (const auto& [layer, k] : largest_entries(r.values.data(), n, w, 5))
        out += "  " + std::to_string(layer) + (head ? "." : "@") + std::to_string(k) + " " + short_number(r.values.data()[layer * w + k]);
    return out + "\n";
}

json patch_json(const AnalysisContext& c, const PatchResult& r) {
    json out = header_json(c);
    out["tokens"] = {{"clean", tokens_json(c.tokens)}, {"corrupt", tokens_json(c.corrupt_tokens)}};
    json metric = metric_json(r.metric);
    metric["clean"] = r.clean;
    metric["corrupt"] = r.corrupt;
    out["metric"] = std::move(metric);
    out["site"] = patch_site_name(r.site);
    json rows = json::array();
    const std::size_t n = r.values.shape()[0], w = r.values.shape()[1];
    for (std::size_t i = 0; i < n; ++i) rows.push_back(std::vector<double>(r.values.data() + i * w, r.values.data() + (i + 1) * w));
    out["values"] = std::move(rows);
    return out;
}

template std::string ablation_text(const AnalysisContext&, const AblationResult<float>&, Ablation);
template std::string ablation_text(const AnalysisContext&, const AblationResult<double>&, Ablation);
template json ablation_json(const AnalysisContext&, const AblationResult<float>&, Ablation);
template json ablation_json(const AnalysisContext&, const AblationResult<double>&, Ablation);

}  // namespace attntrace
