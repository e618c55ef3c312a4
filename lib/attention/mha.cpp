// mha: torch.nn.MultiheadAttention(batch_first=True), as a sequence of named stages.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <tuple>

#include "attention_stages.hpp"
#include "position_stages.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/params_check.hpp"
#include "attntrace/tensor/threads.hpp"

namespace attntrace {
namespace {

// The sizes of one mha call, checked once at the entry. A 2-D input gets B = 1 here and loses its
// B axis again in what is reported and returned.
struct MhaShape {
    Shape qs, ks, vs;    // (B, Lq, Eq), (B, Lk, Ek), (B, Lk, Ev)
    bool batched = true; // the input was 3-D
    std::size_t b = 0, lq = 0, lk = 0, eq = 0, h = 0, g = 0, p = 0, pv = 0;
    std::size_t lk_in = 0;  // the key input's Lk; lk adds the bias_k / zero rows (add_bias_kv, add_zero_attn)
    HeadSizes sizes;     // P, Pv, PO

    Shape plane() const { return {b, h, lq, lk}; }  // (B, H, Lq, Lk)
};

Shape with_batch(Shape s, bool batched) {
    if (!batched) s.insert(s.begin(), 1);
    return s;
}

// torch's add_bias_kv: bias_k (1, 1, G*P) and bias_v (1, 1, G*Pv), both or neither. Returns the
// key rows appended per batch: 1 for the bias row, 1 more with add_zero_attn.
template <class T>
std::size_t check_bias_kv(const MhaParams<T>& params, const MhaConfig& config, std::size_t g, const HeadSizes& sizes) {
    if (params.bias_k.has_value() != params.bias_v.has_value())
        throw InputError(params.source + ": " + (params.bias_k ? "bias_k without bias_v" : "bias_v without bias_k") +
                         " (add_bias_kv=True has both)");
    for (const auto& [name, a, width] : {std::tuple{"bias_k", &params.bias_k, g * sizes.head_dim},
                                         std::tuple{"bias_v", &params.bias_v, g * sizes.value_head_dim}})
        if (*a && shape_of(**a) != Shape{1, 1, width})
            throw ShapeError(params.source + ": " + name + ": shape " + shape_string(shape_of(**a)) +
                             " but expected " + shape_string(Shape{1, 1, width}) + " (1, 1, " +
                             (name[5] == 'k' ? "G*P)" : "G*Pv)"));
    return (params.bias_k ? 1 : 0) + (config.add_zero_attn ? 1 : 0);
}

template <class T>
MhaShape check_mha_inputs(const Array<T>& query, const Array<T>& key, const Array<T>& value,
                          const MhaParams<T>& params, const MhaConfig& config, const AttentionOptions& options) {
    const Shape q0 = shape_of(query), k0 = shape_of(key), v0 = shape_of(value);
    const auto &qn = options.query_name, &kn = options.key_name, &vn = options.value_name;
    if (q0.size() != 2 && q0.size() != 3)
        throw ShapeError(qn + ": query of shape " + shape_string(q0) + " must be (B, L, E) or (L, E)");
    for (const auto& [name, what, s] : {std::tuple{kn, "key", k0}, std::tuple{vn, "value", v0}})
        if (s.size() != q0.size())
            throw ShapeError(name + ": " + what + " of shape " + shape_string(s) + " but query has shape " +
                             shape_string(q0) + " (both batched or both unbatched)");
    const bool batched = q0.size() == 3;
    const Shape qs = with_batch(q0, batched), ks = with_batch(k0, batched), vs = with_batch(v0, batched);
    auto mismatch = [&](const std::string& name, const char* what, const Shape& s, const char* dim, std::size_t got,
                        const char* other, const Shape& os, std::size_t want) {
        return ShapeError(name + ": " + what + " of shape " + shape_string(s) + " has " + dim + " " +
                          std::to_string(got) + " but " + other + " " + shape_string(os) + " has " + dim + " " +
                          std::to_string(want));
    };
    if (ks[0] != qs[0]) throw mismatch(kn, "key", k0, "batch", ks[0], "query", q0, qs[0]);
    if (vs[0] != qs[0]) throw mismatch(vn, "value", v0, "batch", vs[0], "query", q0, qs[0]);
    if (vs[1] != ks[1]) throw mismatch(vn, "value", v0, "length", vs[1], "key", k0, ks[1]);
    const std::size_t g = config.kv_heads == 0 ? config.heads : config.kv_heads;
    const HeadSizes sizes = check_mha_params(params, MhaDims{config.heads, g, qs[2], ks[2], vs[2], config.out_proj});
    const std::size_t appended = check_bias_kv(params, config, g, sizes);
    return {qs, ks, vs, batched, qs[0], qs[1], ks[1] + appended, qs[2], config.heads, g, sizes.head_dim,
            sizes.value_head_dim, ks[1], sizes};
}

// torch's add_bias_kv / add_zero_attn: the masks and positions the appended key rows need.
template <class T>
struct AppendedKeys {
    Masks<T> masks;                              // padded with one allowed column per appended row
    std::optional<PositionStages<T>> positions;  // the caller's, less the causal folded into masks
};

// torch pads attn_mask and key_padding_mask with one allowed column per appended key row. A causal
// mask (the masks' own, or the positions' plain upper-left causal visibility) first becomes the
// equivalent boolean mask over the input keys, as torch takes it, so every query sees the appended
// rows. Valid lengths and positions (rotary, ALiBi, windows, a layer's norms) are refused: torch's
// module has none of them.
template <class T>
AppendedKeys<T> pad_appended_keys(const Masks<T>& masks, const MhaShape& s, const PositionStages<T>* positions) {
    AppendedKeys<T> out{masks, positions ? std::optional(*positions) : std::nullopt};
    bool causal = masks.causal;
    if (out.positions) {
        PositionStages<T>& p = *out.positions;
        const KeyVisibility& v = p.visibility;
        if (p.norm != NormKind::none || p.rotary || p.q_norm || !p.alibi.empty() || v.window || v.lower_right)
            throw UsageError("add_bias_kv / add_zero_attn: not supported with positions (rotary, ALiBi, a window, "
                             "lower-right causal alignment, a layer's norms): torch's nn.MultiheadAttention has none");
        causal = causal || v.causal;
        out.positions.reset();  // nothing left in them
    }
    if (masks.valid_lens)
        throw UsageError("add_bias_kv / add_zero_attn: not supported with valid lengths (torch's "
                         "nn.MultiheadAttention takes a key padding mask instead)");
    out.masks.causal = causal;
    out.masks = pad_key_columns(with_causal_mask(out.masks, s.lq, s.lk_in), s.lk - s.lk_in);
    return out;
}

struct FreeBuffer {
    void operator()(void* p) const noexcept { free_buffer(p); }
};

// The projections q (B*Lq, H*P), k (B*Lk, G*P), v (B*Lk, G*Pv) as rows with leading dims; with one
// input for all three (self-attention) they share one (B*L, H*P + G*P + G*Pv) buffer. The buffers
// are uninitialized (the GEMMs write every element).
template <class T>
struct Projected {
    std::unique_ptr<T[], FreeBuffer> qkv, q_buf, k_buf, v_buf;
    const T *q = nullptr, *k = nullptr, *v = nullptr;
    std::size_t ldq = 0, ldk = 0, ldv = 0;
    bool fused = false;
};

template <class T>
std::unique_ptr<T[], FreeBuffer> rows_buffer(std::size_t n) {
    return std::unique_ptr<T[], FreeBuffer>(BufferAllocator<T>().allocate(n));
}

// The rows of W_q, W_k and W_v: from their arrays, or from the stacked weight read in place.
template <class T>
std::array<std::size_t, 3> in_proj_rows(const MhaParams<T>& params) {
    if (params.in_proj) return {params.in_proj->q_rows, params.in_proj->k_rows, params.in_proj->v_rows};
    return {params.w_q.shape()[0], params.w_k.shape()[0], params.w_v.shape()[0]};
}

// [b_q; b_k; b_v] (H*P + G*P + G*Pv), zeros where a part has none; nullopt when none has one.
template <class T>
std::optional<Array<T>> stacked_bias(const MhaParams<T>& params) {
    if (!params.b_q && !params.b_k && !params.b_v) return std::nullopt;
    const auto [nq, nk, nv] = in_proj_rows(params);
    Array<T> bias = Array<T>::from_shape({nq + nk + nv});
    bias.fill(T(0));
    if (params.b_q) std::copy(params.b_q->begin(), params.b_q->end(), bias.begin());
    if (params.b_k) std::copy(params.b_k->begin(), params.b_k->end(), bias.begin() + nq);
    if (params.b_v) std::copy(params.b_v->begin(), params.b_v->end(), bias.begin() + nq + nk);
    return bias;
}

// [W_q; W_k; W_v] (H*P + G*P + G*Pv, E) and its bias.
template <class T>
std::pair<Array<T>, std::optional<Array<T>>> stacked_in_proj(const MhaParams<T>& params) {
    const std::size_t nq = params.w_q.shape()[0], nk = params.w_k.shape()[0], nv = params.w_v.shape()[0];
    Array<T> w = Array<T>::from_shape({nq + nk + nv, params.w_q.shape()[1]});
    std::copy(params.w_v.begin(), params.w_v.end(),
              std::copy(params.w_k.begin(), params.w_k.end(), std::copy(params.w_q.begin(), params.w_q.end(), w.begin())));
    return {std::move(w), stacked_bias(params)};
}

// Y (ROWS, N) += B (N) on each row.
template <class T>
void add_row_bias(T* y, std::size_t rows, const T* b, std::size_t n, std::size_t threads) {
    parallel_for(rows, threads, [&](std::size_t r, std::size_t) {
        for (std::size_t c = 0; c < n; ++c) y[r * n + c] += b[c];
    });
}

// extend_kv: torch's add_bias_kv / add_zero_attn after the projections: each batch's Lk_in rows of
// k (B*Lk_in, G*P) and v (B*Lk_in, G*Pv) get bias_k / bias_v appended, then a zero row (a zero row
// of every head), into new buffers k (B*Lk, G*P) and v (B*Lk, G*Pv).
template <class T>
void extend_kv(Projected<T>& pr, const MhaParams<T>& params, const MhaShape& s, bool zero_row) {
    auto extend = [&](const T* src, std::size_t ld, std::size_t n, const std::optional<Array<T>>& bias,
                      std::unique_ptr<T[], FreeBuffer>& buf) {
        std::unique_ptr<T[], FreeBuffer> out = rows_buffer<T>(s.b * s.lk * n);
        for (std::size_t bi = 0; bi < s.b; ++bi) {
            T* dst = out.get() + bi * s.lk * n;
            for (std::size_t j = 0; j < s.lk_in; ++j, dst += n)
                std::copy_n(src + (bi * s.lk_in + j) * ld, n, dst);
            if (bias) dst = std::copy_n(bias->data(), n, dst);
            if (zero_row) std::fill_n(dst, n, T(0));
        }
        buf = std::move(out);
        return buf.get();
    };
    pr.k = extend(pr.k, pr.ldk, s.g * s.p, params.bias_k, pr.k_buf);
    pr.v = extend(pr.v, pr.ldv, s.g * s.pv, params.bias_v, pr.v_buf);
    pr.ldk = s.g * s.p, pr.ldv = s.g * s.pv;
}

// Whether the in-projection runs as one product against the stacked weights: self-attention, with
// the stacked weight read in place or a stacked copy of at most 64 MiB.
template <class T>
bool stacks_in_proj(const MhaParams<T>& params, const MhaShape& s, bool self) {
    const std::size_t n = s.h * s.p + s.g * s.p + s.g * s.pv;
    return self && (params.in_proj || n * s.eq * sizeof(T) <= (std::size_t{64} << 20));
}

// context_over_q: q projected straight into MERGED's buffer (B, Lq, H*P) and each head's context
// written over its own q there, instead of a q part in the projections' buffer and a merged
// buffer of fresh pages beside it (at L = 4096, E = 512: 8 MB less memory to fault and clear, and
// the output projection's buffer then reuses the k and v buffer's pages). Only where the fused
// kernels run (a task reads a panel's q before it writes that panel's context: the BLAS path
// accumulates the context while it still reads q), q and context have one layout (P = Pv), and
// the in-projection is one product this file runs (self-attention, not a caller's own product).
template <class T>
bool context_over_q(const MhaParams<T>& params, const MhaShape& s, bool self, const MaskPlan<T>& plan, T softcap,
                    const stages::Kept<T>& kept) {
    if (s.p != s.pv || !stacks_in_proj(params, s, self) || (params.in_proj && params.in_proj->product)) return false;
    stages::HeadBatch<T> sizes;
    sizes.lq = s.lq, sizes.lk = s.lk, sizes.p = s.p, sizes.pv = s.pv;
    return stages::runs_fused(sizes, plan, softcap, kept);
}

// Self-attention's one product against the stacked weight [W_q; W_k; W_v] (where the file holds
// it, or a stacked copy) into PR: one (B*L, H*P + G*P + G*Pv) buffer, or with Q_OUT the q columns
// (B*L, H*P) written at Q_OUT and the k and v columns into a (B*L, G*P + G*Pv) buffer.
template <class T>
void project_stacked(const Array<T>& query, const MhaParams<T>& params, const MhaShape& s, std::size_t threads,
                     Projected<T>& pr, T* q_out) {
    const std::size_t nq = s.h * s.p, nk = s.g * s.p, nv = s.g * s.pv, rows = s.b * s.lq;
    std::optional<Array<T>> stacked, bias;  // the stacked copy of [W_q; W_k; W_v] (none: in place) and its bias
    if (params.in_proj) bias = stacked_bias(params);
    else std::tie(stacked, bias) = stacked_in_proj(params);
    const T* b = bias ? bias->data() : nullptr;
    if (params.in_proj && params.in_proj->product) {
        pr.qkv = rows_buffer<T>(rows * (nq + nk + nv));
        params.in_proj->product(query.data(), rows, pr.qkv.get(), nq + nk + nv, threads);
        if (b) add_row_bias(pr.qkv.get(), rows, b, nq + nk + nv, threads);
        pr.q = pr.qkv.get(), pr.ldq = pr.ldk = pr.ldv = nq + nk + nv;
    } else {
        const StackedInProj<T>* in = params.in_proj ? &*params.in_proj : nullptr;
        const WeightInPlace<T> w = in ? WeightInPlace<T>{in->data, in->out(), in->in, in->conv1d}
                                      : WeightInPlace<T>{stacked->data(), nq + nk + nv, s.eq, false};
        pr.qkv = rows_buffer<T>(rows * (nk + nv + (q_out ? 0 : nq)));
        if (q_out) stages::project_rows_split(query.data(), rows, w, b, nq, q_out, pr.qkv.get(), threads);
        else stages::project_rows(query.data(), rows, w, b, pr.qkv.get(), nq + nk + nv, threads);
        pr.q = q_out ? q_out : pr.qkv.get(), pr.ldq = q_out ? nq : nq + nk + nv;
        pr.ldk = pr.ldv = q_out ? nk + nv : nq + nk + nv;
    }
    pr.k = q_out ? pr.qkv.get() : pr.q + nq;
    pr.v = pr.k + nk;
}

// project: query·W_qᵀ + b_q, key·W_kᵀ + b_k, value·W_vᵀ + b_v. Self-attention on one input runs a
// single GEMM against the stacked weights, as PyTorch's in_proj does. Q_OUT (or null): where q goes
// (B*Lq, H*P), see context_over_q.
template <class T>
Projected<T> project(const Array<T>& query, const Array<T>& key, const Array<T>& value, const MhaParams<T>& params,
                     const MhaShape& s, std::size_t threads, const Reporter<T>& rep, T* q_out) {
    const std::size_t nq = s.h * s.p, nk = s.g * s.p, nv = s.g * s.pv;
    Projected<T> pr;
    // (the stacked copy of the weights is skipped when it would cost more than 64 MiB: a real
    // checkpoint's layer then costs its own size, not twice)
    // (a stacked weight read in place, MhaParams::in_proj, is used as it lies: no copy at all)
    const bool self = &query == &key && &key == &value;
    if (params.in_proj && !self)
        throw UsageError(params.source + ": a stacked in-projection read in place serves self-attention only");
    pr.fused = stacks_in_proj(params, s, self);
    if (pr.fused) {
        project_stacked(query, params, s, threads, pr, q_out);
    } else {
        pr.q_buf = rows_buffer<T>(s.b * s.lq * nq), pr.k_buf = rows_buffer<T>(s.b * s.lk_in * nk);
        pr.v_buf = rows_buffer<T>(s.b * s.lk_in * nv);
        stages::project_rows(query.data(), s.b * s.lq, params.w_q, params.b_q, pr.q_buf.get(), nq, threads);
        stages::project_rows(key.data(), s.b * s.lk_in, params.w_k, params.b_k, pr.k_buf.get(), nk, threads);
        stages::project_rows(value.data(), s.b * s.lk_in, params.w_v, params.b_v, pr.v_buf.get(), nv, threads);
        pr.q = pr.q_buf.get(), pr.k = pr.k_buf.get(), pr.v = pr.v_buf.get();
        pr.ldq = nq, pr.ldk = nk, pr.ldv = nv;
    }
    const bool zero_row = s.lk - s.lk_in > (params.bias_k ? 1 : 0);
    if (s.lk != s.lk_in) extend_kv(pr, params, s, zero_row);
    const char* k_rows = params.bias_k ? (zero_row ? " + bias_k row + zero row" : " + bias_k row")
                                       : (zero_row ? " + zero row" : "");
    const char* v_rows = params.bias_v ? (zero_row ? " + bias_v row + zero row" : " + bias_v row") : k_rows;
    const Shape wq{nq, s.eq}, wk{nk, s.ks[2]}, wv{nv, s.vs[2]};  // (D, E) each, stacked or not
    report_projection(rep, {"q", "query", "q", wq, params.b_q, pr.fused, ""}, pr.q, s.b, s.lq, nq, pr.ldq);
    report_projection(rep, {"k", "key", "k", wk, params.b_k, pr.fused, k_rows}, pr.k, s.b, s.lk, nk, pr.ldk);
    report_projection(rep, {"v", "value", "v", wv, params.b_v, pr.fused, v_rows}, pr.v, s.b, s.lk, nv, pr.ldv);
    return pr;
}

// split_heads: head h of q is columns [h*P, (h+1)*P) of its rows, and query head h reads kv head
// h / (H/G); no data moves. Head (b, h) writes its context into its block of MERGED (B, Lq, H*Pv).
template <class T>
stages::HeadBatch<T> split_heads(const Projected<T>& pr, const MhaShape& s, Array<T>& merged, const Reporter<T>& rep) {
    report_heads(rep, "q_heads", pr.q, s.b, s.h, s.lq, s.p, pr.ldq);
    report_heads(rep, "k_heads", pr.k, s.b, s.g, s.lk, s.p, pr.ldk);
    report_heads(rep, "v_heads", pr.v, s.b, s.g, s.lk, s.pv, pr.ldv);
    stages::HeadBatch<T> hb;
    hb.lq = s.lq, hb.lk = s.lk, hb.p = s.p, hb.pv = s.pv;
    hb.q = pr.q, hb.k = pr.k, hb.v = pr.v, hb.o = merged.data();
    hb.ldq = pr.ldq, hb.ldk = pr.ldk, hb.ldv = pr.ldv, hb.ldo = s.h * s.pv;
    const std::size_t group = s.h / s.g;
    for (std::size_t bi = 0; bi < s.b; ++bi)
        for (std::size_t hi = 0; hi < s.h; ++hi) {
            hb.q_off.push_back(bi * s.lq * pr.ldq + hi * s.p);
            hb.k_off.push_back(bi * s.lk * pr.ldk + (hi / group) * s.p);
            hb.v_off.push_back(bi * s.lk * pr.ldv + (hi / group) * s.pv);
            hb.o_off.push_back(bi * s.lq * s.h * s.pv + hi * s.pv);
        }
    return hb;
}

// merge_heads: each head's context (B, H, Lq, Pv) already sits in its block of MERGED
// (B, Lq, H*Pv); only the report is left.
template <class T>
void merge_heads(Array<T>& merged, const MhaShape& s, const Reporter<T>& rep) {
    report_heads(rep, "context", merged.data(), s.b, s.h, s.lq, s.pv, s.h * s.pv);
    report_merged(rep, merged, rep.wants("merged"));
}

// W_o (PO, H*Pv) as the products read it: its array, or where the file holds it; nullopt without one.
template <class T>
std::optional<WeightInPlace<T>> output_weight(const MhaParams<T>& params) {
    if (const auto& w = params.w_o_in_place) return WeightInPlace<T>{w->data, w->out, w->in, w->conv1d};
    if (params.w_o) return WeightInPlace<T>{params.w_o->data(), params.w_o->shape()[0], params.w_o->shape()[1], false};
    return std::nullopt;
}

// out_project: output (B, Lq, PO) := merged · W_oᵀ + b_o, or merged itself with no W_o; 2-D
// (Lq, PO) for a 2-D input. With W_o and a SINK, each block of rows also goes to the sink as it is
// computed, and STREAMED is set.
template <class T>
Array<T> out_project(Array<T> merged, const MhaParams<T>& params, const MhaConfig& config, const MhaShape& s,
                     std::size_t threads, bool fused, const Reporter<T>& rep,
                     const AttentionOptions::OutputSink& sink, bool& streamed) {
    const std::optional<WeightInPlace<T>> w_o = output_weight(params);
    const bool with_w_o = w_o && config.out_proj;
    Array<T> output = std::move(merged);
    output.reshape({s.b, s.lq, s.h * s.pv});  // its report dropped B for a 2-D input
    if (with_w_o) {
        const std::size_t po = w_o->out;
        Array<T> projected = Array<T>::from_shape({s.b, s.lq, po});
        const Shape final_shape = s.batched ? Shape{s.b, s.lq, po} : Shape{s.lq, po};
        std::function<void(std::size_t, std::size_t)> rows_done;
        if (sink)
            rows_done = [&](std::size_t r0, std::size_t r1) {
                sink(final_shape, r0 * po, projected.data() + r0 * po, (r1 - r0) * po);
            };
        stages::project_rows(output.data(), s.b * s.lq, *w_o, params.b_o ? params.b_o->data() : nullptr, projected.data(),
                             po, threads, rows_done);
        if (sink && s.b * s.lq == 0) sink(final_shape, 0, projected.data(), 0);  // no rows: the shape alone
        streamed = static_cast<bool>(sink);
        output = std::move(projected);
    }
    const std::size_t cols = output.shape()[2];
    report_output(rep, output, with_w_o ? std::optional(Shape{w_o->out, w_o->in}) : std::nullopt, params.b_o, fused);
    if (!s.batched) output.reshape({s.lq, cols});
    return output;
}

// The weights returned: (B, H, Lq, Lk), or averaged over heads (B, Lq, Lk); without B for a 2-D
// input. Nothing unless the options ask.
template <class T>
std::optional<Array<T>> returned_weights(std::optional<Array<T>> weights, const AttentionOptions& options,
                                         const MhaShape& s) {
    if (!options.need_weights || !weights) return std::nullopt;
    if (!options.average_heads) {
        if (!s.batched) weights->reshape({s.h, s.lq, s.lk});
        return weights;
    }
    Array<T> avg = Array<T>::from_shape({s.b, s.lq, s.lk});
    avg.fill(T(0));
    const std::size_t plane = s.lq * s.lk;
    for (std::size_t bi = 0; bi < s.b; ++bi)
        for (std::size_t hi = 0; hi < s.h; ++hi) {
            const T* src = weights->data() + (bi * s.h + hi) * plane;
            T* dst = avg.data() + bi * plane;
            for (std::size_t x = 0; x < plane; ++x) dst[x] += src[x];
        }
    const T inv = T(1) / T(s.h);
    for (auto& x : avg) x *= inv;
    if (!s.batched) avg.reshape({s.lq, s.lk});
    return avg;
}

}  // namespace

template <class T>
AttentionResult<T> mha(const Array<T>& query, const Array<T>& key, const Array<T>& value,
                       const MhaParams<T>& params, const MhaConfig& config, const Masks<T>& masks,
                       const AttentionOptions& options, Observer<T>* observer, const PositionStages<T>* positions) {
    const MhaShape s = check_mha_inputs(query, key, value, params, config, options);
    // add_bias_kv / add_zero_attn: masks padded for the appended key rows
    const std::optional<AppendedKeys<T>> appended =
        s.lk == s.lk_in ? std::nullopt : std::optional(pad_appended_keys(masks, s, positions));
    if (appended) positions = appended->positions ? &*appended->positions : nullptr;
    MaskPlan<T> plan = plan_mha_masks(appended ? appended->masks : masks, s.b, s.h, s.lq, s.lk, s.batched);
    const SingleThreadedBlas blas;
    const std::size_t threads = thread_count(options.threads);
    const Reporter<T> rep{observer, s.batched};
    report_inputs(rep, query, key, value, s.qs, s.ks, s.vs, options);
    // normed: the layer's pre-attention norm of the query, shared by the key and value when they are it
    const std::optional<Array<T>> normed = stages::normed(query, positions, s.qs, rep);
    const Array<T>& q_in = normed ? *normed : query;
    const Array<T>& k_in = normed && &key == &query ? *normed : key;
    const Array<T>& v_in = normed && &value == &query ? *normed : value;

    AttentionResult<T> result;
    result.sizes = s.sizes;
    const T scale = options.scale ? T(*options.scale) : stages::default_scale<T>(s.p);
    result.scale = scale;
    Array<T> merged = Array<T>::from_shape({s.b, s.lq, s.h * s.pv});  // (B, Lq, H*Pv)
    stages::Kept<T> kept = stages::plan_kept(rep, options, s.plane());
    const T softcap = stages::checked_softcap<T>(options);
    const bool self = &q_in == &k_in && &k_in == &v_in;
    T* q_out = context_over_q(params, s, self, plan, softcap, kept) ? merged.data() : nullptr;
    timeline_mark("mha: projections");
    Projected<T> projected = project(q_in, k_in, v_in, params, s, threads, rep, q_out);
    timeline_mark("mha: projected");
    stages::HeadBatch<T> heads = split_heads(projected, s, merged, rep);
    // positions: q/k rewritten in place in the projection buffers this call owns
    stages::positions<T>(positions, s.b, s.p, {const_cast<T*>(projected.q), s.h, s.lq, projected.ldq},
                         {const_cast<T*>(projected.k), s.g, s.lk, projected.ldk}, {s.b, s.h, s.lq, s.p},
                         {s.b, s.g, s.lk, s.p}, plan, s.h, rep, threads);
    // scores -> mask -> softmax -> context (over q where q_out is merged)
    result.softcap = double(softcap);
    result.empty_rows = stages::attend(heads, plan, scale, softcap, kept, threads, options.progress);
    timeline_mark("mha: attended");
    const bool fused = projected.fused;
    projected = {};  // peak memory: free q, k, v before W_o's output
    report_attention(rep, kept.report(), s.plane(), scale, softcap, plan.description, result.empty_rows);
    merge_heads(merged, s, rep);
    result.output = out_project(std::move(merged), params, config, s, threads, fused, rep, options.output_sink,
                                result.output_streamed);
    timeline_mark("mha: output projected");
    result.row_stats = std::move(kept.stats);
    if (kept.pooled) result.pooled = std::move(*kept.pooled).finish();  // (B, H, cells, cells)
    if (result.row_stats && !s.batched) result.row_stats->shape = {s.h, s.lq};
    result.weights = returned_weights(std::move(kept.weights), options, s);
    return result;
}

template AttentionResult<float> mha(const Array<float>&, const Array<float>&, const Array<float>&,
                                    const MhaParams<float>&, const MhaConfig&, const Masks<float>&,
                                    const AttentionOptions&, Observer<float>*, const PositionStages<float>*);
template AttentionResult<double> mha(const Array<double>&, const Array<double>&, const Array<double>&,
                                     const MhaParams<double>&, const MhaConfig&, const Masks<double>&,
                                     const AttentionOptions&, Observer<double>*, const PositionStages<double>*);

}  // namespace attntrace
