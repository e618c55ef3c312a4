// The stage report (see stage_report.hpp): every note and attribute of the trace's stages.
#include "attntrace/attention/stage_report.hpp"

#include <algorithm>

#include "attntrace/tensor/numbers.hpp"

namespace attntrace {
namespace {

// "1 head", "2 heads"
std::string count_of(std::size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// (B, L, D) copied out of rows Y (B*L, ld).
template <class T>
Array<T> gather_rows(const T* y, std::size_t b, std::size_t l, std::size_t d, std::size_t ld) {
    Array<T> out = Array<T>::from_shape({b, l, d});
    for (std::size_t r = 0; r < b * l; ++r) std::copy(y + r * ld, y + r * ld + d, out.data() + r * d);
    return out;
}

// (B, H, L, D) gathered from rows Y (B*L, ld) where head h is columns [h*D, (h+1)*D).
template <class T>
Array<T> gather_heads(const T* y, std::size_t b, std::size_t h, std::size_t l, std::size_t d, std::size_t ld) {
    Array<T> out = Array<T>::from_shape({b, h, l, d});
    T* dst = out.data();
    for (std::size_t bi = 0; bi < b; ++bi)
        for (std::size_t hi = 0; hi < h; ++hi)
            for (std::size_t li = 0; li < l; ++li, dst += d) {
                const T* src = y + (bi * l + li) * ld + hi * d;
                std::copy(src, src + d, dst);
            }
    return out;
}

// "query @ W_q^T + b_q   W_q (6, 6)": what a projection computed, with its weight's shape.
template <class T>
std::string projection_note(const char* input, const char* which, const Shape& w, const std::optional<Array<T>>& b,
                            const char* appended = "") {
    std::string note = std::string(input) + " @ W_" + which + "^T";
    if (b) note += std::string(" + b_") + which;
    return note + appended + "   W_" + which + " " + shape_string(w);
}

template <class T>
nlohmann::json projection_attributes(const ProjectionReport<T>& p) {
    return {{"weight", std::string("w_") + p.which}, {"weight_shape", p.w}, {"bias", p.bias.has_value()},
            {"fused", p.fused}};
}

}  // namespace

template <class T>
Shape Reporter<T>::shown(Shape s) const {
    if (!batched && !s.empty()) s.erase(s.begin());
    return s;
}

template <class T>
void Reporter<T>::report(std::string_view name, Shape shape, std::string note, nlohmann::json attributes,
                         Array<T>* values) const {
    if (!observer) return;
    StageView<T> view{name, shown(shape), std::move(note), std::move(attributes), nullptr};
    if (values && wants(name)) {
        if (!batched) values->reshape(view.shape);
        view.values = values;
    }
    observer->stage(view);
}

template <class T>
void report_inputs(const Reporter<T>& rep, const Array<T>& q, const Array<T>& k, const Array<T>& v, const Shape& qs,
                   const Shape& ks, const Shape& vs, const AttentionOptions& options) {
    auto attrs = [](const std::string& file, const char* same) {
        nlohmann::json a{{"file", file}};
        if (same) a["same_as"] = same;
        return a;
    };
    const char* k_same = &k == &q ? "query" : nullptr;
    const char* v_same = &v == &q ? "query" : &v == &k ? "key" : nullptr;
    rep.report("query", qs, options.query_name, attrs(options.query_name, nullptr), const_cast<Array<T>*>(&q));
    rep.report("key", ks, options.key_name + (k_same ? " (same as query)" : ""), attrs(options.key_name, k_same),
               const_cast<Array<T>*>(&k));
    rep.report("value", vs, options.value_name + (v_same ? std::string(" (same as ") + v_same + ")" : ""),
               attrs(options.value_name, v_same), const_cast<Array<T>*>(&v));
}

template <class T>
void report_projection(const Reporter<T>& rep, const ProjectionReport<T>& p, const T* y, std::size_t b,
                       std::size_t l, std::size_t d, std::size_t ld) {
    if (!rep.observer) return;  // (no notes built for nobody)
    std::optional<Array<T>> vals;
    if (rep.wants(p.name)) vals = gather_rows(y, b, l, d, ld);
    rep.report(p.name, {b, l, d}, projection_note(p.input, p.which, p.w, p.bias, p.appended), projection_attributes(p),
               vals ? &*vals : nullptr);
}

template <class T>
void report_output(const Reporter<T>& rep, Array<T>& output, const std::optional<Shape>& w_o,
                   const std::optional<Array<T>>& b_o, bool fused) {
    const Shape shape(output.shape().begin(), output.shape().end());
    if (w_o)
        rep.report("output", shape, projection_note("merged", "o", *w_o, b_o),
                   projection_attributes(ProjectionReport<T>{"output", "merged", "o", *w_o, b_o, fused, ""}), &output);
    else
        rep.report("output", shape, "merged (no output projection)", {}, &output);
}

template <class T>
void report_heads(const Reporter<T>& rep, const char* name, const T* y, std::size_t b, std::size_t heads,
                  std::size_t l, std::size_t d, std::size_t ld) {
    std::optional<Array<T>> vals;
    if (rep.wants(name)) vals = gather_heads(y, b, heads, l, d, ld);
    if (std::string_view(name) == "context") {
        rep.report(name, {b, heads, l, d}, "weights @ V per head", {}, vals ? &*vals : nullptr);
        return;
    }
    rep.report(name, {b, heads, l, d}, "split into " + count_of(heads, "head") + " of " + std::to_string(d),
               {{"heads", heads}, {"head_dim", d}}, vals ? &*vals : nullptr);
}

template <class T>
void report_attention(const Reporter<T>& rep, const AttentionReport<T>& kept, const Shape& plane_shape, T scale,
                      T softcap, const std::string& masks, std::size_t empty_rows) {
    const std::string product = "Q @ K^T * " + format_number(scale);
    if (softcap > T(0))
        rep.report("scores", plane_shape,
                   "tanh(" + product + " / " + format_number(softcap) + ") * " + format_number(softcap),
                   {{"scale", scale}, {"softcap", softcap}}, kept.scores);
    else
        rep.report("scores", plane_shape, product, {{"scale", scale}}, kept.scores);
    rep.report("masked_scores", plane_shape,
               (masks.empty() ? std::string("no mask") : masks) + ", " + std::to_string(empty_rows) +
                   (empty_rows == 1 ? " row" : " rows") + " with no allowed key",
               {{"masks", masks}, {"empty_rows", empty_rows}}, kept.masked_scores);
    rep.report("weights", plane_shape, "softmax over keys", {{"empty_rows", empty_rows}}, kept.weights);
}

template <class T>
void report_merged(const Reporter<T>& rep, Array<T>& merged, bool keep_values) {
    rep.report("merged", Shape(merged.shape().begin(), merged.shape().end()), "heads concatenated", {},
               keep_values ? &merged : nullptr);
}

template <class T>
void report_sdpa_output(const Reporter<T>& rep, Array<T>& output) {
    rep.report("output", Shape(output.shape().begin(), output.shape().end()), "weights @ V", {}, &output);
}

template <class T>
std::string mha_header(const AttentionResult<T>& result, const MhaParams<T>& params, const MhaConfig& config) {
    const std::size_t g = config.kv_heads ? config.kv_heads : config.heads;
    std::string header = "mha: " + count_of(config.heads, "head");
    if (g != config.heads) header += " sharing " + std::to_string(g) + " kv heads";
    header += ", head dim " + std::to_string(result.sizes.head_dim) + ", value head dim " +
              std::to_string(result.sizes.value_head_dim) + ", scale " + format_number(static_cast<T>(result.scale)) +
              ", params " + params.source + " (" + params.scheme + ")";
    if (!params.ignored.empty()) {
        header += ", ignored:";
        for (const auto& n : params.ignored) header += " " + n;
    }
    return header + ", " + std::to_string(result.empty_rows) + " empty rows";
}

template <class T>
std::string sdpa_header(const AttentionResult<T>& result) {
    return "sdpa: scale " + format_number(static_cast<T>(result.scale)) + ", " + std::to_string(result.empty_rows) +
           " empty rows";
}

#define ATTNTRACE_STAGE_REPORT(T)                                                                                \
    template struct Reporter<T>;                                                                                 \
    template void report_inputs(const Reporter<T>&, const Array<T>&, const Array<T>&, const Array<T>&,           \
                                const Shape&, const Shape&, const Shape&, const AttentionOptions&);              \
    template void report_projection(const Reporter<T>&, const ProjectionReport<T>&, const T*, std::size_t,       \
                                    std::size_t, std::size_t, std::size_t);                                      \
    template void report_output(const Reporter<T>&, Array<T>&, const std::optional<Shape>&,                      \
                                const std::optional<Array<T>>&, bool);                                                                           \
    template void report_heads(const Reporter<T>&, const char*, const T*, std::size_t, std::size_t, std::size_t, \
                               std::size_t, std::size_t);                                                        \
    template void report_attention(const Reporter<T>&, const AttentionReport<T>&, const Shape&, T, T,            \
                                   const std::string&, std::size_t);                                             \
    template void report_merged(const Reporter<T>&, Array<T>&, bool);                                            \
    template void report_sdpa_output(const Reporter<T>&, Array<T>&);                                             \
    template std::string mha_header(const AttentionResult<T>&, const MhaParams<T>&, const MhaConfig&);             \
    template std::string sdpa_header(const AttentionResult<T>&);
ATTNTRACE_STAGE_REPORT(float)
ATTNTRACE_STAGE_REPORT(double)

}  // namespace attntrace
