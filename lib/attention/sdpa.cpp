// sdpa: softmax(Q·Kᵀ·scale + masks)·V with no projections; each of Q's leading indices is a head.
#include <algorithm>

#include "attention_stages.hpp"
#include "position_stages.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"

namespace attntrace {
namespace {

// The sizes of one sdpa call, checked once at the entry.
struct SdpaShape {
    Shape qs, ks, vs;  // (..., Lq, E), (..., Lk, E), (..., Lk, Ev)
    Shape lead;        // Q's leading dims (...): the head index
    std::size_t lq = 0, lk = 0, e = 0, ev = 0;

    Shape with(std::size_t rows, std::size_t cols) const {  // (..., rows, cols)
        Shape s = lead;
        s.push_back(rows), s.push_back(cols);
        return s;
    }
};

SdpaShape check_sdpa_inputs(const Shape& qs, const Shape& ks, const Shape& vs, const AttentionOptions& options) {
    const auto &qn = options.query_name, &kn = options.key_name, &vn = options.value_name;
    if (qs.size() < 2) throw ShapeError(qn + ": query of shape " + shape_string(qs) + " needs at least 2 dims (..., Lq, E)");
    if (ks.size() != qs.size() || vs.size() != qs.size())
        throw ShapeError((ks.size() != qs.size() ? kn : vn) + ": shape " +
                         shape_string(ks.size() != qs.size() ? ks : vs) + " but query " + qn + " has shape " +
                         shape_string(qs) + " (Q, K and V need the same number of dims)");
    const std::size_t r = qs.size();
    for (std::size_t d = 0; d + 2 < r; ++d) {
        if (ks[d] != qs[d] || vs[d] != qs[d])
            throw ShapeError((ks[d] != qs[d] ? kn : vn) + ": shape " + shape_string(ks[d] != qs[d] ? ks : vs) +
                             " but query has shape " + shape_string(qs) + " (leading dims must be equal)");
    }
    const SdpaShape s{qs, ks, vs, Shape(qs.begin(), qs.end() - 2), qs[r - 2], ks[r - 2], qs[r - 1], vs[r - 1]};
    if (ks[r - 1] != s.e)
        throw ShapeError(kn + ": shape " + shape_string(ks) + " but query has shape " + shape_string(qs) +
                         " (K's last dim must equal Q's E = " + std::to_string(s.e) + ")");
    if (vs[r - 2] != s.lk)
        throw ShapeError(vn + ": shape " + shape_string(vs) + " but key has shape " + shape_string(ks) +
                         " (V must have Lk = " + std::to_string(s.lk) + " rows)");
    return s;
}

// split_heads: head n is Q[n] (Lq, E), K[n] (Lk, E), V[n] (Lk, Ev) and writes O[n] (Lq, Ev).
template <class T>
stages::HeadBatch<T> split_heads(const Array<T>& q, const Array<T>& k, const Array<T>& v, const SdpaShape& s,
                                 Array<T>& output) {
    stages::HeadBatch<T> hb;
    hb.lq = s.lq, hb.lk = s.lk, hb.p = s.e, hb.pv = s.ev;
    hb.q = q.data(), hb.k = k.data(), hb.v = v.data(), hb.o = output.data();
    hb.ldq = s.e, hb.ldk = s.e, hb.ldv = s.ev, hb.ldo = s.ev;
    std::size_t n_heads = 1;
    for (std::size_t d : s.lead) n_heads *= d;
    for (std::size_t n = 0; n < n_heads; ++n) {
        hb.q_off.push_back(n * s.lq * s.e);
        hb.k_off.push_back(n * s.lk * s.e);
        hb.v_off.push_back(n * s.lk * s.ev);
        hb.o_off.push_back(n * s.lq * s.ev);
    }
    return hb;
}

}  // namespace

template <class T>
AttentionResult<T> sdpa(const Array<T>& q_in, const Array<T>& k_in, const Array<T>& v, const Masks<T>& masks,
                        const AttentionOptions& options, Observer<T>* observer, const PositionStages<T>* positions) {
    const SdpaShape s = check_sdpa_inputs(shape_of(q_in), shape_of(k_in), shape_of(v), options);
    // q_rotary / k_rotary rewrite copies of Q and K, each leading index one head of E dims
    const bool rotate = positions && positions->rotary;
    std::optional<Array<T>> q_rot, k_rot;
    if (rotate) q_rot = q_in, k_rot = k_in;
    const Array<T>& q = rotate ? *q_rot : q_in;
    const Array<T>& k = rotate ? *k_rot : k_in;
    MaskPlan<T> plan = plan_sdpa_masks(masks, s.lead, s.lq, s.lk);
    const SingleThreadedBlas blas;
    const Reporter<T> rep{observer, true};
    report_inputs(rep, q_in, k_in, v, s.qs, s.ks, s.vs, options);

    AttentionResult<T> result;
    const T scale = options.scale ? T(*options.scale) : stages::default_scale<T>(s.e);
    result.scale = scale;
    result.output = Array<T>::from_shape(s.with(s.lq, s.ev));  // (..., Lq, Ev)
    stages::HeadBatch<T> heads = split_heads(q, k, v, s, result.output);
    const std::size_t n = heads.count();
    stages::positions<T>(positions, n, s.e, {rotate ? q_rot->data() : nullptr, 1, s.lq, s.e},
                         {rotate ? k_rot->data() : nullptr, 1, s.lk, s.e}, s.qs, s.ks, plan,
                         s.lead.empty() ? 1 : s.lead.back(), rep);
    stages::Kept<T> kept = stages::plan_kept(rep, options, s.with(s.lq, s.lk));
    // scores -> mask -> softmax -> context
    const T softcap = stages::checked_softcap<T>(options);
    result.softcap = double(softcap);
    result.empty_rows =
        stages::attend(heads, plan, scale, softcap, kept, thread_count(options.threads), options.progress);
    report_attention(rep, kept.report(), s.with(s.lq, s.lk), scale, softcap, plan.description, result.empty_rows);
    report_sdpa_output(rep, result.output);
    result.row_stats = std::move(kept.stats);
    if (kept.pooled) result.pooled = std::move(*kept.pooled).finish();  // (..., cells, cells)
    if (options.need_weights) result.weights = std::move(kept.weights);
    return result;
}

template AttentionResult<float> sdpa(const Array<float>&, const Array<float>&, const Array<float>&,
                                     const Masks<float>&, const AttentionOptions&, Observer<float>*,
                                     const PositionStages<float>*);
template AttentionResult<double> sdpa(const Array<double>&, const Array<double>&, const Array<double>&,
                                      const Masks<double>&, const AttentionOptions&, Observer<double>*,
                                      const PositionStages<double>*);

}  // namespace attntrace
