// The stages a model layer adds around the core (positions.hpp): normed before the projections,
// q_rotary / k_rotary after the split into heads, and its share of the mask plan.
#include "position_stages.hpp"

#include "attntrace/tensor/errors.hpp"

namespace attntrace::stages {

template <class T>
std::optional<Array<T>> normed(const Array<T>& x, const PositionStages<T>* pos, const Shape& shape,
                               const Reporter<T>& rep) {
    if (!pos || pos->norm == NormKind::none) return std::nullopt;
    Array<T> out = x;
    const std::size_t e = x.dimension() ? x.shape().back() : 0;
    const std::size_t rows = e ? x.size() / e : 0;
    if (pos->norm == NormKind::layer_norm) {
        layer_norm(out.data(), rows, e, pos->norm_weight, pos->norm_bias, pos->norm_eps);
    } else {
        rms_norm(out.data(), rows, e, e, pos->norm_weight, pos->norm_eps);
    }
    rep.report("normed", shape, pos->norm == NormKind::layer_norm ? "LayerNorm(query)" : "RMSNorm(query)",
               {{"eps", pos->norm_eps}}, &out);
    return out;
}

namespace {

// "RMSNorm per head, then rotate-half rotary on 8 dims": the q_rotary / k_rotary note.
std::string rotary_note(const std::optional<Rotary>& rotary, bool qk_norm, bool whole) {
    std::string note = qk_norm ? (whole ? "RMSNorm over the projection, then " : "RMSNorm per head, then ") : "";
    if (!rotary) return note + "no rotary";
    return note + (rotary->style == RotaryStyle::half ? "rotate-half" : "interleaved") + " rotary on " +
           std::to_string(rotary->dims) + " dims";
}

// One of q_rotary / k_rotary: the per-head norm, the rotation from position POS0, the report.
template <class T>
void rotate(const char* name, const HeadRows<T>& x, std::size_t b, std::size_t p, const T* norm,
            const PositionStages<T>& pos, std::size_t pos0, const Shape& shown, const Reporter<T>& rep, std::size_t threads) {
    if (norm) {  // per head (Qwen3: P values each), or over the row's whole projection (OLMo 2: heads*P)
        const std::size_t rows = pos.qk_norm_whole ? 1 : x.heads, d = pos.qk_norm_whole ? x.heads * p : p;
        for (std::size_t r = 0; r < b * x.l; ++r) rms_norm(x.base + r * x.ld, rows, d, p, norm, pos.qk_norm_eps);
    }
    if (pos.rotary) apply_rotary(x.base, b, x.l, x.heads, p, x.ld, *pos.rotary, pos0, threads);
    std::optional<Array<T>> vals;
    if (rep.wants(name)) {
        vals = Array<T>::from_shape({b, x.heads, x.l, p});
        T* dst = vals->data();
        for (std::size_t bi = 0; bi < b; ++bi)
            for (std::size_t h = 0; h < x.heads; ++h)
                for (std::size_t i = 0; i < x.l; ++i, dst += p) {
                    const T* src = x.base + (bi * x.l + i) * x.ld + h * p;
                    std::copy(src, src + p, dst);
                }
        vals->reshape(shown);
    }
    rep.report(name, shown, rotary_note(pos.rotary, norm != nullptr, pos.qk_norm_whole),
               {{"heads", x.heads}, {"rotary_dims", pos.rotary ? pos.rotary->dims : 0}}, vals ? &*vals : nullptr);
}

}  // namespace

template <class T>
void positions(const PositionStages<T>* pos, std::size_t b, std::size_t p, const HeadRows<T>& q, const HeadRows<T>& k,
               const Shape& q_shown, const Shape& k_shown, MaskPlan<T>& plan, std::size_t alibi_heads,
               const Reporter<T>& rep, std::size_t threads) {
    if (!pos) return;
    if (pos->rotary && pos->rotary->dims > p)
        throw UsageError("rotary dims: " + std::to_string(pos->rotary->dims) + " is past the head dim " +
                         std::to_string(p));
    if (pos->rotary || pos->q_norm) {
        const std::size_t shift = pos->visibility.lower_right && k.l > q.l ? k.l - q.l : 0;
        rotate("q_rotary", q, b, p, pos->q_norm, *pos, shift, q_shown, rep, threads);
        rotate("k_rotary", k, b, p, pos->k_norm, *pos, 0, k_shown, rep, threads);
    }
    if (pos->visibility.any()) {
        plan.visibility = pos->visibility;
        plan.visibility.causal = plan.visibility.causal || plan.causal;
    }
    if (!pos->alibi.empty()) {
        if (pos->alibi.size() != alibi_heads)
            throw UsageError("ALiBi: " + std::to_string(pos->alibi.size()) + " slopes for " +
                             std::to_string(alibi_heads) + " heads");
        plan.alibi = pos->alibi.data();
        plan.alibi_heads = alibi_heads;
    }
    auto add = [&](const std::string& s) { plan.description += (plan.description.empty() ? "" : " & ") + s; };
    if (!pos->alibi.empty()) add("ALiBi (+ slope_h * j)");
    if (pos->visibility.causal && !plan.description.starts_with("causal")) add("causal");
    if (pos->visibility.window) add("window " + std::to_string(*pos->visibility.window));
    if (pos->visibility.lower_right) plan.description += " (lower-right aligned)";
}

template std::optional<Array<float>> normed(const Array<float>&, const PositionStages<float>*, const Shape&,
                                            const Reporter<float>&);
template std::optional<Array<double>> normed(const Array<double>&, const PositionStages<double>*, const Shape&,
                                             const Reporter<double>&);
template void positions(const PositionStages<float>*, std::size_t, std::size_t, const HeadRows<float>&,
                        const HeadRows<float>&, const Shape&, const Shape&, MaskPlan<float>&, std::size_t,
                        const Reporter<float>&, std::size_t);
template void positions(const PositionStages<double>*, std::size_t, std::size_t, const HeadRows<double>&,
                        const HeadRows<double>&, const Shape&, const Shape&, MaskPlan<double>&, std::size_t,
                        const Reporter<double>&, std::size_t);

}  // namespace attntrace::stages
