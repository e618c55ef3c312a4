#include "attntrace/check/diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/stats.hpp"

namespace attntrace {

namespace {

struct Hypothesis {
    std::string code;
    std::string detail;
    std::function<StageValues()> stages;  // every stage as the mistake computes them
};

// The sizes the hypotheses need, read from the reference's stages.
struct Dims {
    std::size_t E = 0, H = 1, G = 1, P = 0, Pv = 0, Lq = 0, Lk = 0;
    double scale = 0;          // the reference's
    std::string scale_origin;  // "1/sqrt(P), P = 3 the head dim" or "the given scale"
};

// H, G, P, Pv from q_heads (B, H, Lq, P), k_heads, v_heads; Lq, Lk from weights (..., Lq, Lk).
Dims dims_of(const CheckProblem& p, const StageValues& ref) {
    Dims d;
    const auto& w = ref.at("weights");
    const std::size_t r = w.dimension();
    d.Lq = w.shape()[r - 2], d.Lk = w.shape()[r - 1];
    d.E = p.query.shape().back();
    if (p.is_mha) {
        const auto& qh = ref.at("q_heads");
        const auto& kh = ref.at("k_heads");
        d.H = qh.shape()[qh.dimension() - 3], d.P = qh.shape().back();
        d.G = kh.shape()[kh.dimension() - 3], d.Pv = ref.at("v_heads").shape().back();
    } else {
        d.P = d.E, d.Pv = p.value.shape().back();
    }
    d.scale = p.options.scale ? *p.options.scale : 1 / std::sqrt(static_cast<double>(d.P));
    d.scale_origin = p.options.scale ? "the given scale" : "1/sqrt(P), P = " + std::to_string(d.P) + " the head dim";
    return d;
}

// The hypothesis that runs P changed by MODIFY (inputs, params, masks or options).
Hypothesis rerun(const CheckProblem& p, std::string code, std::string detail, std::function<void(CheckProblem&)> modify) {
    return {std::move(code), std::move(detail), [&p, modify = std::move(modify)] {
                CheckProblem q = p;
                modify(q);
                return run_stages(q);
            }};
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

// The least-squares factor c with U ≈ c·R over the finite pairs; nullopt when undefined.
std::optional<double> fitted_factor(const Array<double>& u, const Array<double>& r) {
    if (u.size() != r.size()) return std::nullopt;
    double ur = 0, rr = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        const double a = u.data()[i], b = r.data()[i];
        if (std::isfinite(a) && std::isfinite(b)) ur += a * b, rr += b * b;
    }
    if (rr == 0 || !std::isfinite(ur / rr) || ur == 0) return std::nullopt;
    return ur / rr;
}

// The file of STAGE among FILES, or nullptr.
const StageFile* file_of(const std::vector<StageFile>& files, std::string_view stage) {
    for (const auto& f : files)
        if (f.stage == stage) return &f;
    return nullptr;
}

void add_scale_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p, const StageValues& ref,
                          const std::vector<StageFile>& files, const Dims& d) {
    const std::string right = short_number(d.scale) + " = " + d.scale_origin;
    auto with_scale = [](double s) { return [s](CheckProblem& q) { q.options.scale = s; }; };
    if (!near(d.scale, 1)) out.push_back(rerun(p, "missing_scale", "scores not multiplied by the scale " + right, with_scale(1)));
    const double E = static_cast<double>(d.E), P = static_cast<double>(d.P), Lk = static_cast<double>(d.Lk);
    std::vector<std::pair<double, std::string>> named = {
        {1 / std::sqrt(E), "1/sqrt(E), E = " + std::to_string(d.E) + " the embedding dim"},
        {1 / std::sqrt(P), "1/sqrt(P), P = " + std::to_string(d.P)},
        {1 / P, "1/P, P = " + std::to_string(d.P)},
        {1 / E, "1/E, E = " + std::to_string(d.E)},
        {std::sqrt(P), "sqrt(P): multiplied instead of divided"},
        {1 / std::sqrt(Lk), "1/sqrt(Lk), Lk = " + std::to_string(d.Lk) + " the number of keys"}};
    if (p.is_mha) named.push_back({1 / std::sqrt(static_cast<double>(d.H * d.P)), "1/sqrt(H*P)"});
    const StageFile* scores = file_of(files, "scores");
    if (scores)
        if (auto c = fitted_factor(scores->values, ref.at("scores"))) named.push_back({*c * d.scale, "a factor fitted from the scores"});
    std::vector<double> tried{d.scale, 1};
    for (const auto& [value, name] : named) {
        const double candidate = value;  // clang 14 cannot capture a structured binding in a lambda
        if (std::any_of(tried.begin(), tried.end(), [&](double t) { return near(t, candidate); })) continue;
        tried.push_back(value);
        out.push_back(rerun(p, "wrong_scale", "scores scaled by " + short_number(value) + " = " + name + ", instead of " + right,
                            with_scale(value)));
    }
}

// Softmax over the query axis (-2) of masked scores (..., Lq, Lk): each column sums to 1.
Array<double> softmax_over_queries(const Array<double>& s) {
    Array<double> w = s;
    const std::size_t r = s.dimension(), lq = s.shape()[r - 2], lk = s.shape()[r - 1];
    const std::size_t blocks = (lq && lk) ? s.size() / (lq * lk) : 0;
    for (std::size_t b = 0; b < blocks; ++b)
        for (std::size_t j = 0; j < lk; ++j) {
            double* col = w.data() + b * lq * lk + j;
            double m = -std::numeric_limits<double>::infinity(), sum = 0;
            for (std::size_t i = 0; i < lq; ++i) m = std::max(m, col[i * lk]);
            for (std::size_t i = 0; i < lq; ++i) sum += col[i * lk] = std::isinf(m) ? 0 : std::exp(col[i * lk] - m);
            for (std::size_t i = 0; i < lq; ++i) col[i * lk] = sum > 0 ? col[i * lk] / sum : 0;
        }
    return w;
}

// out (M, Lq, X) = w (M, Lq, Lk) · v (M/H*G, Lk, X): block m = n*H + h reads kv block n*G + h/(H/G).
// COLUMN_SUMS: the blog's sum over the query axis instead, out[m, j] = (sum_i w[m, i, j]) v[m, j].
Array<double> weighted_values(const Array<double>& w, const Array<double>& v, std::size_t H, std::size_t G,
                              bool column_sums) {
    const std::size_t r = w.dimension(), lq = w.shape()[r - 2], lk = w.shape()[r - 1], x = v.shape().back();
    Shape shape(w.shape().begin(), w.shape().end());
    shape.back() = x;
    Array<double> out = Array<double>::from_shape(shape);
    out.fill(0);
    const std::size_t blocks = (lq && lk) ? w.size() / (lq * lk) : 0;
    for (std::size_t m = 0; m < blocks; ++m) {
        const double* wm = w.data() + m * lq * lk;
        const double* vm = v.data() + ((m / H) * G + (m % H) / (H / G)) * lk * x;
        double* om = out.data() + m * lq * x;
        for (std::size_t i = 0; i < lq; ++i)
            for (std::size_t j = 0; j < lk; ++j) {
                const double a = wm[i * lk + j];
                const std::size_t row = column_sums ? j : i;  // the blog's: row j gets key j's value times its column sum
                if (row < lq)
                    for (std::size_t c = 0; c < x; ++c) om[row * x + c] += a * vm[j * x + c];
            }
    }
    return out;
}

// The output from MERGED (B, Lq, H*Pv) (mha): merged @ W_o^T + b_o, or merged itself with no W_o.
StageValues with_merged(const CheckProblem& p, StageValues run, Array<double> merged) {
    if (!p.params.w_o) {
        run["output"] = merged;
        run["merged"] = std::move(merged);
        return run;
    }
    const auto& wo = *p.params.w_o;
    const std::size_t po = wo.shape()[0], hp = wo.shape()[1], rows = merged.size() / hp;
    Array<double> out = Array<double>::from_shape(run.at("output").shape());
    for (std::size_t row = 0; row < rows; ++row)
        for (std::size_t o = 0; o < po; ++o) {
            double s = p.params.b_o ? p.params.b_o->data()[o] : 0;
            for (std::size_t c = 0; c < hp; ++c) s += merged.data()[row * hp + c] * wo.data()[o * hp + c];
            out.data()[row * po + o] = s;
        }
    run["output"] = out;
    run["merged"] = std::move(merged);
    return run;
}

// The stages after the context from CONTEXT (mha (B, H, Lq, Pv); sdpa: the output itself).
StageValues with_context(const CheckProblem& p, StageValues run, const Array<double>& ctx, const Dims& d) {
    if (!p.is_mha) {
        run["output"] = ctx;
        return run;
    }
    run["context"] = ctx;
    Array<double> merged = Array<double>::from_shape(run.at("merged").shape());
    const std::size_t n = ctx.size() / (d.H * d.Lq * d.Pv);
    for (std::size_t b = 0; b < n; ++b)
        for (std::size_t h = 0; h < d.H; ++h)
            for (std::size_t i = 0; i < d.Lq; ++i)
                for (std::size_t c = 0; c < d.Pv; ++c)
                    merged.data()[(b * d.Lq + i) * d.H * d.Pv + h * d.Pv + c] = ctx.data()[((b * d.H + h) * d.Lq + i) * d.Pv + c];
    return with_merged(p, std::move(run), std::move(merged));
}

// Weights computed some other way, and everything after them.
StageValues with_weights(const CheckProblem& p, StageValues run, const Array<double>& w, const Dims& d) {
    run["weights"] = w;
    const Array<double>& v = p.is_mha ? run.at("v_heads") : p.value;
    return with_context(p, run, weighted_values(w, v, p.is_mha ? d.H : 1, p.is_mha ? d.G : 1, false), d);
}

// softmax_axis: weights (..., Lq, Lk) normalized over Lq, then the stages after them.
void add_axis_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p, const StageValues& ref, const Dims& d) {
    out.push_back({"softmax_axis", "softmax over the query axis (each column of the weights sums to 1) instead of the keys",
                   [&p, &ref, d] { return with_weights(p, ref, softmax_over_queries(ref.at("masked_scores")), d); }});
}

// The blog's torch.sum(weights.unsqueeze(-1) * V, dim=1): tested, but in no code of the vocabulary.
void add_sum_axis_pattern(std::vector<Hypothesis>& out, const CheckProblem& p, const StageValues& ref, const Dims& d) {
    if (d.Lq != d.Lk) return;
    out.push_back({"unknown",
                   "the weighted values were summed over the query axis instead of the keys: row j is key j's value "
                   "times column j's weight sum (e.g. torch.sum(weights.unsqueeze(-1) * V, dim=1))",
                   [&p, &ref, d] {
                       const Array<double>& v = p.is_mha ? ref.at("v_heads") : p.value;
                       return with_context(p, ref, weighted_values(ref.at("weights"), v, p.is_mha ? d.H : 1,
                                                                   p.is_mha ? d.G : 1, true), d);
                   }});
}


// ---- projections (mha) ---------------------------------------------------------------------------

struct Projection {
    const char* letter;                              // "K"
    const char* weight;                              // "W_k"
    const char* bias;                                // "b_k"
    Array<double> MhaParams<double>::*w;             // (rows, E)
    std::optional<Array<double>> MhaParams<double>::*b;
};

const Projection projections[3] = {{"Q", "W_q", "b_q", &MhaParams<double>::w_q, &MhaParams<double>::b_q},
                                   {"K", "W_k", "b_k", &MhaParams<double>::w_k, &MhaParams<double>::b_k},
                                   {"V", "W_v", "b_v", &MhaParams<double>::w_v, &MhaParams<double>::b_v}};

Array<double> transposed(const Array<double>& w) { return xt::transpose(w); }

bool square(const Array<double>& w) { return w.dimension() == 2 && w.shape()[0] == w.shape()[1]; }

// Whether bias B (any length) is present with a nonzero value.
bool nonzero(const std::optional<Array<double>>& b) {
    return b && std::any_of(b->begin(), b->end(), [](double x) { return x != 0; });
}

// transposed_weight for each square W (rows, E), wrong_projection for each weight borrowed by the others.
void add_weight_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p) {
    for (const auto& pr : projections)
        if (square(p.params.*(pr.w)))
            out.push_back(rerun(p, "transposed_weight",
                                std::string(pr.weight) + " used as stored: x @ " + pr.weight + " instead of x @ " + pr.weight +
                                    "^T (the " + pr.letter + " projection)",
                                [m = pr.w](CheckProblem& q) { q.params.*m = transposed(q.params.*m); }));
    if (p.params.w_o && square(*p.params.w_o))
        out.push_back(rerun(p, "transposed_weight", "W_o used as stored: merged @ W_o instead of merged @ W_o^T (the output projection)",
                            [](CheckProblem& q) { q.params.w_o = transposed(*q.params.w_o); }));
    for (const auto& src : projections)
        for (unsigned pick = 1; pick < 4; ++pick) {  // which of the two other projections use SRC's weight
            std::vector<const Projection*> targets;
            std::string names;
            unsigned bit = 0;
            for (const auto& t : projections) {
                if (&t == &src) continue;
                if ((pick >> bit++) & 1u) targets.push_back(&t);
            }
            bool fits = true;
            for (const auto* t : targets) {
                fits = fits && (p.params.*(t->w)).shape() == (p.params.*(src.w)).shape();
                names += std::string(names.empty() ? "" : " and ") + t->letter;
            }
            if (!fits) continue;
            out.push_back(rerun(p, "wrong_projection",
                                names + " projected with " + src.weight + " (the " + src.letter + " projection's weight)",
                                [targets, s = &src](CheckProblem& q) {
                                    for (const auto* t : targets) {
                                        q.params.*(t->w) = q.params.*(s->w);
                                        q.params.*(t->b) = q.params.*(s->b);
                                    }
                                }));
        }
}

// The projection mistakes (mha): weights as above, context_from_input (needs Ev = G*Pv), missing_bias.
void add_projection_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p, const Dims& d) {
    if (!p.is_mha) return;
    add_weight_hypotheses(out, p);
    if (d.G * d.Pv == p.value.shape().back()) {
        const bool bias = p.params.b_v.has_value();
        out.push_back(rerun(p, "context_from_input",
                            std::string("weights multiplied by the value input itself instead of V = value @ W_v^T") +
                                (bias ? " + b_v" : ""),
                            [e = p.value.shape().back()](CheckProblem& q) {
                                q.params.w_v = xt::eye<double>(e);
                                q.params.b_v.reset();
                            }));
    }
    for (const auto& pr : projections)
        if (nonzero(p.params.*(pr.b)))
            out.push_back(rerun(p, "missing_bias", std::string(pr.bias) + " left out of the " + pr.letter + " projection",
                                [m = pr.b](CheckProblem& q) { (q.params.*m).reset(); }));
    if (nonzero(p.params.b_o))
        out.push_back(rerun(p, "missing_bias", "b_o left out of the output projection", [](CheckProblem& q) { q.params.b_o.reset(); }));
}

// ---- head split (mha) ----------------------------------------------------------------------------

// Row h*DIM + p of the result is row p*HEADS + h of W (a weight (HEADS*DIM, E) or a bias
// (HEADS*DIM)): the heads read as (L, P, H) instead of (L, H, P).
Array<double> regroup_rows(const Array<double>& w, std::size_t heads, std::size_t dim) {
    Array<double> r = w;
    const std::size_t cols = w.size() / (heads * dim);
    for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t q = 0; q < dim; ++q)
            std::copy_n(w.data() + (q * heads + h) * cols, cols, r.data() + (h * dim + q) * cols);
    return r;
}

// The inverse along the last axis of A (..., HEADS*DIM): out[..., p*HEADS + h] = a[..., h*DIM + p].
// FORWARD: the same direction as regroup_rows, for W_o's columns.
Array<double> regroup_last(const Array<double>& a, std::size_t heads, std::size_t dim, bool forward) {
    Array<double> r = a;
    const std::size_t n = heads * dim, rows = a.size() / n;
    for (std::size_t row = 0; row < rows; ++row)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t q = 0; q < dim; ++q) {
                const std::size_t ours = h * dim + q, theirs = q * heads + h;
                r.data()[row * n + (forward ? ours : theirs)] = a.data()[row * n + (forward ? theirs : ours)];
            }
    return r;
}

// head_split: W_q, W_k (H*P, E), W_v (H*Pv, E) rows regrouped as (P, H); W_o's columns and merged
// (B, Lq, H*Pv) regrouped back when the merge is wrong too. Needs G = H > 1.
void add_head_split_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p, const Dims& d) {
    if (!p.is_mha || d.H < 2 || d.G != d.H || (d.P < 2 && d.Pv < 2)) return;
    auto split = [d](CheckProblem& q) {
        auto& prm = q.params;
        prm.w_q = regroup_rows(prm.w_q, d.H, d.P), prm.w_k = regroup_rows(prm.w_k, d.H, d.P);
        prm.w_v = regroup_rows(prm.w_v, d.H, d.Pv);
        if (prm.b_q) prm.b_q = regroup_rows(*prm.b_q, d.H, d.P);
        if (prm.b_k) prm.b_k = regroup_rows(*prm.b_k, d.H, d.P);
        if (prm.b_v) prm.b_v = regroup_rows(*prm.b_v, d.H, d.Pv);
    };
    out.push_back({"head_split",
                   "heads split and merged as (L, P, H) instead of (L, H, P): head h took columns h, H + h, 2H + h, ... "
                   "(e.g. reshape(L, P, H))",
                   [&p, d, split] {
                       CheckProblem q = p;
                       split(q);
                       if (q.params.w_o) q.params.w_o = regroup_last(*q.params.w_o, d.H, d.Pv, true);
                       StageValues run = run_stages(q);
                       run["merged"] = regroup_last(run.at("merged"), d.H, d.Pv, false);
                       if (!p.params.w_o) run["output"] = run.at("merged");
                       return run;
                   }});
    out.push_back(rerun(p, "head_split",
                        "heads split as (L, P, H) instead of (L, H, P) (head h took columns h, H + h, ...), merged as (L, H, P)",
                        split));
}

// head_merge: the heads split right but merged as (L, P, H): merged column p*H + h holds head h's
// column p (the context's axes in the wrong order before the reshape). Needs H > 1 and Pv > 1.
void add_head_merge_hypothesis(std::vector<Hypothesis>& out, const CheckProblem& p, const StageValues& ref, const Dims& d) {
    if (!p.is_mha || d.H < 2 || d.Pv < 2) return;
    out.push_back({"head_merge",
                   "heads split right but merged as (L, P, H) instead of (L, H, P): merged column p*H + h holds head "
                   "h's column p (e.g. context.permute(0, 2, 3, 1) before the reshape, instead of transpose(1, 2))",
                   [&p, &ref, d] { return with_merged(p, ref, regroup_last(ref.at("merged"), d.H, d.Pv, false)); }});
}

// ---- masks ---------------------------------------------------------------------------------------

// 1 where MASKED_SCORES (any shape) allows the key, 0 where it is -inf.
Array<double> allowed(const Array<double>& masked_scores) {
    Array<double> a = masked_scores;
    for (double& x : a) x = x == -std::numeric_limits<double>::infinity() ? 0 : 1;
    return a;
}

// Masks with FORBIDDEN (B, H, Lq, Lk) or (..., Lq, Lk), nonzero = not allowed, as their only mask.
Masks<double> only_mask(Array<double> forbidden) {
    Masks<double> m;
    m.attn_mask = std::move(forbidden);
    m.attn_mask_is_bool = true;
    m.attn_mask_name = "the hypothesis' mask";
    return m;
}

// mask_inverted (when the reference masks anything) and causal_offset (with --causal), as (.., Lq, Lk) bool masks.
void add_mask_hypotheses(std::vector<Hypothesis>& out, const CheckProblem& p, const StageValues& ref) {
    const auto& ms = ref.at("masked_scores");
    if (std::any_of(ms.begin(), ms.end(), [](double x) { return x == -std::numeric_limits<double>::infinity(); }))
        out.push_back(rerun(p, "mask_inverted", "masked and allowed keys swapped (the mask read the other way round)",
                            [a = allowed(ms)](CheckProblem& q) { q.masks = only_mask(a); }));
    if (!p.masks.causal) return;
    for (const long offset : {-1L, 1L}) {
        std::string detail = offset < 0 ? "causal mask excludes the diagonal: query i sees keys j < i (e.g. torch.triu(ones, diagonal=0) as the mask)"
                                        : "causal mask one key too wide: query i sees keys j <= i + 1 (e.g. torch.triu(ones, diagonal=2) as the mask)";
        out.push_back({"causal_offset", std::move(detail), [&p, offset] {
                           CheckProblem q = p;
                           q.masks.causal = false;
                           Array<double> a = allowed(run_stages(q).at("masked_scores"));
                           const std::size_t r = a.dimension(), lq = a.shape()[r - 2], lk = a.shape()[r - 1];
                           for (std::size_t k = 0; k < a.size(); ++k) {
                               const long i = static_cast<long>((k / lk) % lq), j = static_cast<long>(k % lk);
                               a.data()[k] = (a.data()[k] != 0 && j <= i + offset) ? 0 : 1;  // 1 = not allowed
                           }
                           q.masks = only_mask(std::move(a));
                           return run_stages(q);
                       }});
    }
}

// ---- the error pattern when no hypothesis explains the difference -------------------------------

// compare's allclose on U and R of one shape.
bool all_close(const Array<double>& u, const Array<double>& r, Tolerance tol) {
    return compare_tensors(u, r, tol).close;
}

// R (..., M, N) as (..., N, M).
Array<double> last_two_swapped(const Array<double>& r) {
    std::vector<std::size_t> perm(r.dimension());
    for (std::size_t d = 0; d < perm.size(); ++d) perm[d] = d;
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return xt::transpose(r, perm);
}

// What F's stage (any layout) has against RUN's when no hypothesis explains it, in words.
std::string error_pattern(const StageFile& f, const StageValues& run, const ToleranceOverride& override_tol) {
    const Array<double>& r = run.at(f.stage);
    const StageCheck c = check_stage(f, run, override_tol);
    if (c.status == StageStatus::shape_mismatch)
        return "shape " + shape_string(c.file_shape) + " where the trace has " + shape_string(c.reference_shape) +
               "; no layout or known mistake explains it";
    Array<double> u = f.values;
    u.reshape(r.shape());
    if (c.layout.find("L") == std::string::npos) {  // read in the trace's order
        if (auto k = fitted_factor(u, r); k && all_close(u, Array<double>(*k * r), c.tol))
            return "every value is " + short_number(*k) + " times the reference's (a constant factor)";
        const std::size_t n = r.dimension();
        if (n >= 2 && r.shape()[n - 1] == r.shape()[n - 2] && all_close(u, last_two_swapped(r), c.tol))
            return "transposed: the last two axes swapped";
        if (f.stage == "weights") {
            const std::size_t lk = r.shape()[n - 1];
            double lo = INFINITY, hi = -INFINITY;
            for (std::size_t row = 0; row * lk < u.size(); ++row) {
                double s = 0;
                for (std::size_t j = 0; j < lk; ++j) s += u.data()[row * lk + j];
                lo = std::min(lo, s), hi = std::max(hi, s);
            }
            if (!(std::abs(lo - 1) < 1e-3 && std::abs(hi - 1) < 1e-3))
                return "rows sum to " + short_number(lo) + " .. " + short_number(hi) + ", not 1";
        }
    }
    const auto& res = c.result;
    return std::to_string(res.mismatches) + " of " + std::to_string(res.count) + " elements differ, the largest by " +
           short_number(res.max_abs_diff) + (res.max_abs_index ? " at " + index_string(*res.max_abs_index) : "") +
           "; no known mistake reproduces it";
}

}  // namespace

Diagnosis diagnose(const CheckProblem& problem, const StageValues& reference, const std::vector<StageFile>& files,
                   const std::string& first, const ToleranceOverride& tol) {
    const Dims d = dims_of(problem, reference);
    std::vector<Hypothesis> hypotheses;
    add_scale_hypotheses(hypotheses, problem, reference, files, d);
    add_axis_hypotheses(hypotheses, problem, reference, d);
    add_projection_hypotheses(hypotheses, problem, d);
    add_head_split_hypotheses(hypotheses, problem, d);
    add_head_merge_hypothesis(hypotheses, problem, reference, d);
    add_mask_hypotheses(hypotheses, problem, reference);
    add_sum_axis_pattern(hypotheses, problem, reference, d);
    const auto at = std::find_if(files.begin(), files.end(), [&](const StageFile& f) { return f.stage == first; });
    const Hypothesis* best = nullptr;
    std::vector<std::string> best_later;
    for (const auto& h : hypotheses) {
        StageValues run;
        try {
            run = h.stages();
        } catch (const Error&) {
            continue;  // a variant the core refuses (shapes): it explains nothing
        }
        if (check_stage(*at, run, tol).status != StageStatus::match) continue;
        std::vector<std::string> later;
        for (auto f = at + 1; f != files.end(); ++f)
            if (check_stage(*f, run, tol).status == StageStatus::match) later.push_back(f->stage);
        if (!best || later.size() > best_later.size()) best = &h, best_later = later;
    }
    if (!best) return {"unknown", first, error_pattern(*at, reference, tol)};
    std::string detail = best->detail;
    if (!best_later.empty()) {
        detail += "; it also reproduces";
        for (const auto& s : best_later) detail += " " + s;
    }
    return {best->code, first, detail};
}

}  // namespace attntrace
