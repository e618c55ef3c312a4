#include "attntrace/attention/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attntrace/tensor/numbers.hpp"
#include "attntrace/tensor/stats.hpp"
#include "attntrace/io/torch_format.hpp"

namespace attntrace {

template <class T>
void StageRecorder<T>::stage(const StageView<T>& view) {
    StageRecord<T> rec{std::string(view.name), view.shape, view.note, view.attributes, std::nullopt};
    if (view.values && wants_values(view.name)) rec.values = *view.values;
    stages_.push_back(std::move(rec));
}

template <class T>
const StageRecord<T>* StageRecorder<T>::find(std::string_view name) const {
    for (const auto& s : stages_)
        if (s.name == name) return &s;
    return nullptr;
}

namespace {

// Head H's detector means over its non-empty rows of every batch (NaN where no row has the key, or
// when the core recorded no detector values).
HeadScores head_scores(const RowStats& stats, std::size_t h, std::size_t heads, std::size_t batches) {
    const std::size_t lq = stats.shape.back();
    HeadScoreSums sums(1);
    if (stats.first_token.size() != stats.argmax.size()) return sums.means()[0];
    for (std::size_t b = 0; b < batches; ++b)
        for (std::size_t i = 0; i < lq; ++i) {
            const std::size_t row = (b * heads + h) * lq + i;
            if (stats.argmax[row] < 0) continue;
            sums.add(0, {stats.previous_token[row], stats.diagonal[row], stats.first_token[row], stats.max_weight[row]});
        }
    return sums.means()[0];
}

}  // namespace

std::vector<HeadSummary> summarize_heads(const RowStats& stats, std::size_t max_queries) {
    const Shape& shape = stats.shape;
    if (shape.empty()) return {};
    const std::size_t lq = shape.back();
    const std::size_t heads = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
    const std::size_t batches = heads * lq == 0 ? 0 : stats.entropy.size() / (heads * lq);
    std::vector<HeadSummary> out(heads);
    for (std::size_t h = 0; h < heads; ++h) {
        HeadSummary& s = out[h];
        s.head = h;
        double sum = 0;
        std::size_t rows = 0;
        for (std::size_t b = 0; b < batches; ++b)
            for (std::size_t i = 0; i < lq; ++i) {
                const std::size_t row = (b * heads + h) * lq + i;
                if (stats.argmax[row] < 0 && !std::isnan(stats.entropy[row])) {  // a NaN row is not empty
                    ++s.empty_rows;
                    continue;
                }
                sum += stats.entropy[row];
                ++rows;
            }
        s.mean_entropy = rows ? sum / double(rows) : 0.0;
        s.scores = head_scores(stats, h, heads, batches);
        s.role = head_role(s.scores);
        for (std::size_t i = 0; i < std::min(lq, max_queries) && batches > 0; ++i) {
            const std::size_t row = h * lq + i;
            s.top.push_back({i, stats.argmax[row], stats.max_weight[row], stats.entropy[row]});
        }
    }
    return out;
}

namespace {

// The ASCII notes with terminal typography: " @ " -> " · ", "^T" -> "ᵀ", " * " -> " × ".
std::string prettify(const std::string& note) {
    static const std::pair<std::string_view, std::string_view> swaps[] = {
        {" @ ", " · "}, {"^T", "ᵀ"}, {" * ", " × "}};
    std::string out;
    for (std::size_t i = 0; i < note.size();) {
        bool swapped = false;
        for (const auto& [from, to] : swaps)
            if (note.compare(i, from.size(), from) == 0) {
                out += to;
                i += from.size();
                swapped = true;
                break;
            }
        if (!swapped) out += note[i++];
    }
    return out;
}

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
}

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

template <class T>
nlohmann::json nested(const T*& next, const Shape& shape, std::size_t depth) {
    if (depth == shape.size()) return static_cast<double>(*next++);
    nlohmann::json a = nlohmann::json::array();
    for (std::size_t i = 0; i < shape[depth]; ++i) a.push_back(nested(next, shape, depth + 1));
    return a;
}

// A weight in the head statistics: 2 decimals, or 2 significant digits below 0.01 (so a long
// sequence's spread-out weights do not all read 0.00).
std::string weight_text(double w) {
    if (w >= 0.01 || w == 0) return fixed(w, 2);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1e", w);
    return buf;
}

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// "head 1  previous_token 0.912  diagonal 0.050  first_token 0.020  max_weight 0.930  previous-token"
std::string detector_lines(const RowStats& stats, const std::string& bold, const std::string& dim,
                           const std::string& reset) {
    std::string out = bold + "head detectors" + reset + dim +
                      ": means over batch and query rows of w[i, i-1], w[i, i], w[i, 0] and the row maximum; a head is "
                      "named when its score reaches " + fixed(kRoleThreshold, 1) + reset + "\n";
    for (const auto& h : summarize_heads(stats, 0)) {
        out += "head " + std::to_string(h.head) + "  " + head_scores_text(h.scores);
        if (!h.role.empty()) out += "  " + bold + h.role + reset;
        out += "\n";
    }
    return out;
}

}  // namespace

std::string head_scores_text(const HeadScores& scores) {
    auto score = [](const char* name, double v) {
        return std::string(name) + " " + (std::isnan(v) ? std::string("-") : fixed(v, 3));
    };
    return score("previous_token", scores.previous_token) + "  " + score("diagonal", scores.diagonal) + "  " +
           score("first_token", scores.first_token) + "  " + score("max_weight", scores.max_weight);
}

nlohmann::json head_summary_json(const HeadSummary& h) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& t : h.top)
        top.push_back({{"query", t.query},
                       {"key", t.key < 0 ? nlohmann::json() : nlohmann::json(t.key)},
                       {"weight", t.weight},
                       {"entropy", t.entropy}});
    return {{"head", h.head},
            {"mean_entropy", h.mean_entropy},
            {"empty_rows", h.empty_rows},
            {"previous_token", finite_or_null(h.scores.previous_token)},
            {"diagonal", finite_or_null(h.scores.diagonal)},
            {"first_token", finite_or_null(h.scores.first_token)},
            {"max_weight", finite_or_null(h.scores.max_weight)},
            {"role", h.role.empty() ? nlohmann::json() : nlohmann::json(h.role)},
            {"top", top}};
}

template <class T>
std::string render_text_trace(const TraceContext& context, const std::vector<StageRecord<T>>& stages,
                              const std::optional<RowStats>& row_stats, const TextStyle& style) {
    const std::string bold = style.color ? "\x1b[1m" : "";
    const std::string dim = style.color ? "\x1b[2m" : "";
    const std::string reset = style.color ? "\x1b[0m" : "";
    std::size_t name_w = 0, shape_w = 0;
    for (const auto& s : stages) {
        name_w = std::max(name_w, s.name.size());
        shape_w = std::max(shape_w, shape_string(s.shape).size());
    }
    std::string out = bold + context.header + reset + "\n";
    for (const auto& s : stages) {
        out += bold + pad(s.name, name_w) + reset + "  " + pad(shape_string(s.shape), shape_w) + "  " + dim +
               (style.unicode ? prettify(s.note) : s.note) + reset + "\n";
        if (style.values && s.values && !s.attributes.contains("same_as")) out += torch_str(*s.values) + "\n";
    }
    std::string written;
    auto wrote = [&](const std::string& what, const nlohmann::json& file) {
        if (!file.is_string()) return;
        const std::string path = file.template get<std::string>();
        written += (written.empty() ? "" : ", ") + what + " " + (path == "-" ? "stdout" : path);
    };
    if (context.outputs.is_object()) {
        wrote("output", context.outputs.value("output", nlohmann::json()));
        wrote("attn_weights", context.outputs.value("attn_weights", nlohmann::json()));
        for (const auto& d : context.outputs.value("dumps", nlohmann::json::array()))
            wrote(d.value("stage", std::string()), d.value("file", nlohmann::json()));
    }
    if (!written.empty()) out += dim + "wrote " + written + reset + "\n";
    if (row_stats) {
        const bool batched = row_stats->shape.size() > 2;
        out += bold + "head statistics" + reset + dim + ": mean entropy of the weight rows (nats); per query" +
               (batched ? " of batch 0" : "") + ", the key with the most weight" + reset + "\n";
        const std::string arrow = style.unicode ? "→" : "->";
        for (const auto& h : summarize_heads(*row_stats, style.top_queries)) {
            out += "head " + std::to_string(h.head) + "  entropy " + fixed(h.mean_entropy, 3);
            if (h.empty_rows) out += "  empty rows " + std::to_string(h.empty_rows);
            out += " ";
            for (const auto& t : h.top) {
                out += " q";
                out += std::to_string(t.query);
                out += arrow;
                if (t.key < 0) {
                    out += std::isnan(t.entropy) ? "nan" : "none";
                } else {
                    out += 'k';
                    out += std::to_string(t.key);
                    out += ' ';
                    out += weight_text(t.weight);
                }
            }
            out += "\n";
        }
        if (!row_stats->first_token.empty()) out += detector_lines(*row_stats, bold, dim, reset);
    }
    return out;
}

template <class T>
nlohmann::json trace_json(const TraceContext& context, const std::vector<StageRecord<T>>& stages,
                          const std::optional<RowStats>& row_stats, std::size_t empty_rows, bool with_values) {
    nlohmann::json doc;
    doc["command"] = context.command;
    doc["options"] = context.options;
    doc["inputs"] = context.inputs;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : stages) {
        nlohmann::json st{{"name", s.name}, {"shape", s.shape}, {"note", s.note}, {"attributes", s.attributes}};
        st["stats"] = nullptr;
        if (s.values) {
            const TensorStats ts = tensor_stats(*s.values);
            st["stats"] = {{"min", finite_or_null(ts.min)},   {"max", finite_or_null(ts.max)},
                           {"mean", finite_or_null(ts.mean)}, {"nan", ts.nan_count},
                           {"inf", ts.inf_count}};  // min/max/mean over the finite values
            if (with_values) {
                const T* next = s.values->data();
                st["data"] = nested(next, s.shape, 0);
            }
        }
        list.push_back(std::move(st));
    }
    doc["stages"] = std::move(list);
    nlohmann::json heads = nlohmann::json::array();
    if (row_stats) {
        for (const auto& h : summarize_heads(*row_stats, SIZE_MAX)) heads.push_back(head_summary_json(h));
    }
    doc["head_stats"] = std::move(heads);
    doc["empty_rows"] = empty_rows;
    doc["outputs"] = context.outputs;
    return doc;
}

template class StageRecorder<float>;
template class StageRecorder<double>;
template std::string render_text_trace(const TraceContext&, const std::vector<StageRecord<float>>&,
                                       const std::optional<RowStats>&, const TextStyle&);
template std::string render_text_trace(const TraceContext&, const std::vector<StageRecord<double>>&,
                                       const std::optional<RowStats>&, const TextStyle&);
template nlohmann::json trace_json(const TraceContext&, const std::vector<StageRecord<float>>&,
                                   const std::optional<RowStats>&, std::size_t, bool);
template nlohmann::json trace_json(const TraceContext&, const std::vector<StageRecord<double>>&,
                                   const std::optional<RowStats>&, std::size_t, bool);

}  // namespace attntrace
