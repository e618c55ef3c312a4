// The forward pass of a whole model (forward.hpp): embed -> blocks -> final norm -> head, each a
// named function, the GEMMs split over the worker threads with what follows each product (bias,
// activation, the gated MLP's product) done by the worker on its block while it is in cache.
#include "attntrace/model/forward.hpp"

#include <algorithm>

#include "attntrace/model/activations.hpp"
#include "attntrace/model/norms.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "model_tensors.hpp"

namespace attntrace {

template <class T>
bool ObserverList<T>::wants_weights(std::size_t layer) const {
    return std::any_of(list_.begin(), list_.end(), [&](const ModelObserver<T>* o) { return o->wants_weights(layer); });
}
template <class T>
void ObserverList<T>::attention_rows(std::size_t layer, std::size_t first, const T* weights, std::size_t count) {
    for (ModelObserver<T>* o : list_)
        if (o->wants_weights(layer)) o->attention_rows(layer, first, weights, count);
}
template <class T>
void ObserverList<T>::attention_done(const LayerAttention& attention) {
    for (ModelObserver<T>* o : list_) o->attention_done(attention);
}
template <class T>
void ObserverList<T>::hidden_state(std::size_t index, const T* x, std::size_t rows, std::size_t e) {
    for (ModelObserver<T>* o : list_) o->hidden_state(index, x, rows, e);
}

namespace {

// The activations of one forward, reused from layer to layer.
template <class T>
struct Activations {
    std::size_t l = 0, e = 0, i = 0;
    Array<T> x;       // (L, E) the residual stream
    Array<T> normed;  // (L, E) a norm's output: the attention's or the MLP's input
    Array<T> hidden;  // (L, I) the MLP's middle
    Array<T> up;      // (L, I) the gated MLP's up projection (empty otherwise)
    std::size_t threads = 1;

    Activations(const ModelConfig& m, std::size_t length, std::size_t workers)
        : l(length), e(m.hidden), i(m.intermediate), x(Array<T>::from_shape({l, e})),
          normed(Array<T>::from_shape({l, e})), hidden(Array<T>::from_shape({l, i})),
          up(Array<T>::from_shape({m.mlp == Mlp::gated ? l : 0, i})), threads(workers) {}
};

template <class T>
NormWeights<T> norm_of(NormKind kind, double eps, const std::optional<Array<T>>& w, const std::optional<Array<T>>& b) {
    return {kind, w ? w->data() : nullptr, b ? b->data() : nullptr, eps};
}

// ---- the products ---------------------------------------------------------------------------

// Y[r0:r1, c0:c1] := X[r0:r1] (rows of IN) · W[c0:c1]ᵀ + beta · Y, Y with leading dim LDY.
template <class T>
void product(const T* x, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1, const Linear<T>& w, T* y,
             std::size_t ldy, T beta) {
    const std::size_t in = w.in(), out = w.out();
    const T* b = w.conv1d ? w.weight() + c0 : w.weight() + c0 * in;
    gemm<T>(false, !w.conv1d, r1 - r0, c1 - c0, in, T(1), x + r0 * in, in, b, w.conv1d ? out : in, beta,
            y + r0 * ldy + c0, ldy);
}

// Y (rows, out) at LDY := X · Wᵀ + b + beta · Y.
template <class T>
void linear(const T* x, std::size_t rows, const Linear<T>& w, T* y, std::size_t ldy, T beta, std::size_t threads) {
    split_product(rows, w.out(), threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        product(x, r0, r1, c0, c1, w, y, ldy, beta);
        if (!w.b) return;
        const T* b = w.b->data();
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) y[r * ldy + c] += b[c];
    });
}

// ---- the stages -----------------------------------------------------------------------------

// embed: hidden_states[0] into A.x: the token rows, plus the family's position and token type
// rows, through its embedding norm.
template <class T>
void embed(const Model& model, const std::vector<std::uint32_t>& ids, Activations<T>& a) {
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const std::vector<std::size_t> tokens(ids.begin(), ids.end());
    gather_rows(t, *ModelTensors::find(t.embeddings, Canonical::token_embedding), tokens, a.x.data());
    if (m.embedding == Embedding::tokens) return;
    const T* positions = nullptr;
    if (m.embedding == Embedding::tokens_positions || m.embedding == Embedding::bert) {
        gather_rows(t, *ModelTensors::find(t.embeddings, Canonical::position_embedding),
                    position_ids(ids, m.position_offset, m.padding_idx), a.normed.data());
        positions = a.normed.data();
    }
    std::optional<Array<T>> type_row;  // BERT: every token is of type 0
    if (m.embedding == Embedding::bert) {
        type_row = Array<T>::from_shape({m.hidden});
        gather_rows(t, *ModelTensors::find(t.embeddings, Canonical::token_type_embedding), {0}, type_row->data());
    }
    const auto w = load_small<T>(t, t.embeddings, Canonical::embed_norm_weight);
    const auto b = load_small<T>(t, t.embeddings, Canonical::embed_norm_bias);
    const bool normed = m.embedding != Embedding::tokens_positions;
    add_and_norm(a.x.data(), positions, type_row ? type_row->data() : nullptr, normed ? a.x.data() : nullptr, a.l, a.e,
                 norm_of(m.norm, m.norm_eps, w, b), a.threads);
}

// attention: layer C's self-attention on IN (L, E) (already through its norm), as mha --model
// runs it; what the observers ask for goes to them. Returns the output projection's (L, E).
template <class T>
Array<T> attention(const Array<T>& in, const BlockWeights<T>& w, const LayerConfig& c, const ForwardOptions& o,
                   ModelObserver<T>& observer) {
    const PositionStages<T> positions = positions_for_layer(c, w.attention, true);
    const bool summarized = o.attention_layers.empty() || o.attention_layers[c.layer];
    AttentionOptions ao;
    ao.scale = c.scale;
    ao.threads = o.threads;
    ao.row_stats = summarized && o.row_stats;
    ao.pooled_cells = summarized ? o.pooled_cells : 0;
    if (observer.wants_weights(c.layer))
        ao.weights_sink = [&](std::size_t first, const void* data, std::size_t count) {
            observer.attention_rows(c.layer, first, static_cast<const T*>(data), count);
        };
    const MhaConfig config{c.heads, c.kv_heads, true, false};
    AttentionResult<T> r = mha(in, in, in, w.attention.attn, config, Masks<T>{}, ao, static_cast<Observer<T>*>(nullptr),
                               positions.any() ? &positions : nullptr);
    observer.attention_done({c.layer, r.row_stats ? &*r.row_stats : nullptr, r.pooled ? &*r.pooled : nullptr,
                             r.empty_rows, r.scale});
    return std::move(r.output);
}

// mlp: OUT (L, E) += fc_out(act(fc_in IN)) (+ its bias), or with the gated MLP
// fc_out(act(gate IN) * fc_in IN): the first products and the activation by column blocks, each
// worker activating its own block, then the second product accumulated into OUT (the residual).
template <class T>
void mlp(const ModelConfig& m, const BlockWeights<T>& w, const T* in, T* out, Activations<T>& a) {
    T* h = a.hidden.data();
    const auto bias = [](const Linear<T>& l, std::size_t c0) { return l.b ? l.b->data() + c0 : nullptr; };
    split_product(a.l, a.i, a.threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        product(in, r0, r1, c0, c1, w.gate ? *w.gate : w.fc_in, h, a.i, T(0));
        if (!w.gate) return activate(m.activation, h + r0 * a.i + c0, r1 - r0, c1 - c0, a.i, bias(w.fc_in, c0));
        product(in, r0, r1, c0, c1, w.fc_in, a.up.data(), a.i, T(0));
        activate_gated(m.activation, h + r0 * a.i + c0, a.i, a.up.data() + r0 * a.i + c0, a.i, r1 - r0, c1 - c0,
                       bias(*w.gate, c0), bias(w.fc_in, c0));
    });
    linear(h, a.l, w.fc_out, out, a.e, T(1), a.threads);
}

// The pre-attention norm of layer C (its input_layernorm / ln_1).
template <class T>
NormWeights<T> attention_norm(const LayerConfig& c, const BlockWeights<T>& w) {
    return norm_of(c.norm, c.norm_eps, w.attention.norm_weight, w.attention.norm_bias);
}

// pre_norm_block: x += attn(norm1 x); x += mlp(norm2 x). BLOOM's post_layernorm variant takes
// both residuals from the normed values: a = norm1 x; h = norm2(a + attn a); x = h + mlp h.
template <class T>
void pre_norm_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                    const ForwardOptions& o, ModelObserver<T>& observer) {
    const NormWeights<T> norm2 = norm_of(m.norm, m.norm_eps, w.mlp_norm_weight, w.mlp_norm_bias);
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.l, a.e, attention_norm(c, w),
                 a.threads);
    const Array<T> attn = attention(a.normed, w, c, o, observer);
    if (m.residual == Residual::post_layernorm) {
        add_and_norm(a.normed.data(), attn.data(), nullptr, a.x.data(), a.l, a.e, norm2, a.threads);
        return mlp(m, w, a.x.data(), a.x.data(), a);  // x = h; x += mlp(h)
    }
    add_and_norm(a.x.data(), attn.data(), nullptr, a.normed.data(), a.l, a.e, norm2, a.threads);
    mlp(m, w, a.normed.data(), a.x.data(), a);
}

// parallel_block (NeoX use_parallel_residual): x + attn(norm1 x) + mlp(norm2 x).
template <class T>
void parallel_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                    const ForwardOptions& o, ModelObserver<T>& observer) {
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.l, a.e, attention_norm(c, w),
                 a.threads);
    const Array<T> attn = attention(a.normed, w, c, o, observer);
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.l, a.e,
                 norm_of(m.norm, m.norm_eps, w.mlp_norm_weight, w.mlp_norm_bias), a.threads);
    add_and_norm(a.x.data(), attn.data(), nullptr, nullptr, a.l, a.e, NormWeights<T>{}, a.threads);
    mlp(m, w, a.normed.data(), a.x.data(), a);
}

// post_norm_block (BERT): h = norm1(x + attn x); x = norm2(h + mlp h).
template <class T>
void post_norm_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                     const ForwardOptions& o, ModelObserver<T>& observer) {
    const Array<T> attn = attention(a.x, w, c, o, observer);
    add_and_norm(a.x.data(), attn.data(), nullptr, a.x.data(), a.l, a.e,
                 norm_of(m.norm, m.norm_eps, w.mlp_norm_weight, w.mlp_norm_bias), a.threads);
    mlp(m, w, a.x.data(), a.x.data(), a);  // x = h + mlp(h)
    add_and_norm(a.x.data(), nullptr, nullptr, a.x.data(), a.l, a.e,
                 norm_of(m.norm, m.norm_eps, w.out_norm_weight, w.out_norm_bias), a.threads);
}

template <class T>
void block(const ModelConfig& m, const BlockWeights<T>& w, std::size_t n, Activations<T>& a, const ForwardOptions& o,
           ModelObserver<T>& observer) {
    const LayerConfig& c = m.layers[n];
    switch (m.residual) {
    case Residual::pre_norm:
    case Residual::post_layernorm: return pre_norm_block(m, w, c, a, o, observer);
    case Residual::parallel: return parallel_block(m, w, c, a, o, observer);
    case Residual::post_norm: return post_norm_block(m, w, c, a, o, observer);
    }
}

// final_norm: the norm after the last block, in place (none for BERT).
template <class T>
void final_norm(const Model& model, Activations<T>& a) {
    const ModelConfig& m = model.config;
    if (!m.final_norm) return;
    const ModelTensors& t = *model.tensors;
    const auto w = load_small<T>(t, t.final_norm, Canonical::final_norm_weight);
    const auto b = load_small<T>(t, t.final_norm, Canonical::final_norm_bias);
    add_and_norm(a.x.data(), nullptr, nullptr, a.x.data(), a.l, a.e, norm_of(m.norm, m.norm_eps, w, b),
                 a.threads);
}

// The masked-LM head's transform (BERT cls.predictions.transform, RoBERTa lm_head.dense /
// layer_norm) of X (P, E): norm(act(dense X)).
template <class T>
Array<T> mlm_transform(const Model& model, const Array<T>& x, std::size_t threads) {
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const std::size_t p = x.shape()[0];
    Linear<T> dense{*load_small<T>(t, t.head, Canonical::head_dense), load_small<T>(t, t.head, Canonical::head_dense_bias),
                    false, nullptr, {}};
    Array<T> y = Array<T>::from_shape({p, m.hidden});
    linear(x.data(), p, dense, y.data(), m.hidden, T(0), threads);
    activate(m.head_activation, y.data(), p, m.hidden, m.hidden, nullptr);
    const auto w = load_small<T>(t, t.head, Canonical::head_norm_weight);
    const auto b = load_small<T>(t, t.head, Canonical::head_norm_bias);
    add_and_norm(y.data(), nullptr, nullptr, y.data(), p, m.hidden,
                 norm_of(NormKind::layer_norm, m.norm_eps, w, b), threads);
    return y;
}

// head: logits (P, V) of X (P, E) after the final norm: X · Wᵀ (+ bias), W (V, E) the head's
// own or the token embeddings, read in blocks of kHeadRows vocabulary rows, one block per task,
// each worker converting its block into its own buffer, or reading it in place when the file
// holds it as T, its pages dropped after: W is never held whole.
template <class T>
Array<T> head(const Model& model, const Array<T>& final, std::size_t threads, T* destination = nullptr) {
    constexpr std::size_t kHeadRows = 512;
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const Array<T> x = m.head == Head::masked_lm ? mlm_transform(model, final, threads) : final;
    const ModelTensor* w = m.tied ? ModelTensors::find(t.embeddings, Canonical::token_embedding)
                                  : ModelTensors::find(t.head, Canonical::head_decoder);
    const auto bias = load_small<T>(t, t.head, Canonical::head_bias);
    const std::size_t p = x.shape()[0], e = m.hidden, v = m.vocab, blocks = (v + kHeadRows - 1) / kHeadRows;
    Array<T> held;  // empty when the caller gave the (P, V) logits their place
    T* logits = destination ? destination : (held = Array<T>::from_shape({p, v})).data();
    threads = std::min(threads, blocks);
    const T* in_file = t.files->in_place<T>(w->stored.name, 0, 0);  // each block's pages mapped by its task
    std::vector<std::vector<T>> staged(in_file ? 0 : threads, std::vector<T>(kHeadRows * e));
    parallel_for(blocks, threads, [&](std::size_t blk, std::size_t worker) {
        const std::size_t v0 = blk * kHeadRows, v1 = std::min(v, v0 + kHeadRows);
        const T* rows = in_file ? t.files->in_place<T>(w->stored.name, v0, v1) : staged[worker].data();
        if (!in_file) t.files->read_rows(w->stored.name, v0, v1, staged[worker].data());
        gemm<T>(false, true, p, v1 - v0, e, T(1), x.data(), e, rows, e, T(0), logits + v0, v);
        if (bias)
            for (std::size_t r = 0; r < p; ++r)
                for (std::size_t c = v0; c < v1; ++c) logits[r * v + c] += bias->data()[c];
        if (in_file) t.files->release(w->stored.name, v0, v1);
    });
    return held;
}

// The logits asked for: every position, or the rows of LOGIT_POSITIONS.
template <class T>
Array<T> logits(const Model& model, const Activations<T>& a, const ForwardOptions& o) {
    if (o.all_logits) return head(model, a.x, a.threads, static_cast<T*>(o.logits_destination));
    Array<T> rows = Array<T>::from_shape({o.logit_positions.size(), a.e});
    for (std::size_t i = 0; i < o.logit_positions.size(); ++i) {
        const T* src = a.x.data() + o.logit_positions[i] * a.e;
        std::copy(src, src + a.e, rows.data() + i * a.e);
    }
    return head(model, rows, a.threads);
}

}  // namespace

template <class T>
ForwardResult<T> forward(const Model& model, const std::vector<std::uint32_t>& ids, const ForwardOptions& options,
                         ModelObserver<T>& observer) {
    const ModelConfig& m = model.config;
    check_ids(m, ids, "ids");
    for (std::size_t p : options.logit_positions)
        if (p >= ids.size()) throw UsageError("logit positions: " + std::to_string(p) + " is past the sequence");
    const bool need_head = options.all_logits || !options.logit_positions.empty();
    if (need_head && !model.has_head()) throw UsageError("logits: " + model.head_missing);
    const std::size_t layers =
        need_head || options.layers == 0 ? m.layers.size() : std::min(options.layers, m.layers.size());
    const SingleThreadedBlas blas;  // our workers split every product; BLAS runs inside them
    Activations<T> a(m, ids.size(), thread_count(options.threads));
    embed(model, ids, a);
    observer.hidden_state(0, a.x.data(), a.l, a.e);
    BlockWeights<T> w;  // one block at a time, each read into the previous one's arrays
    for (std::size_t n = 0; n < layers; ++n) {
        load_block(*model.tensors, n, w);
        block(m, w, n, a, options, observer);
        release_block(*model.tensors, n);
        if (n + 1 == m.layers.size()) final_norm(model, a);
        observer.hidden_state(n + 1, a.x.data(), a.l, a.e);
    }
    w = {};  // the head's blocks take its place
    ForwardResult<T> result;
    result.layers_run = layers;
    if (need_head) {
        Array<T> computed = logits(model, a, options);
        if (!(options.all_logits && options.logits_destination)) result.logits = std::move(computed);
    }
    return result;
}

std::uint64_t forward_memory_bytes(const ModelConfig& m, std::size_t length, const ForwardOptions& o,
                                   std::size_t element) {
    const std::uint64_t l = length, e = m.hidden, i = m.intermediate, v = m.vocab;
    const std::uint64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
    const std::uint64_t threads = thread_count(o.threads);
    // one block's weights: q/k/v/o, their stacked copy, the MLP
    const std::uint64_t weights = 2 * e * (q + 2 * kv) + e * q + (m.mlp == Mlp::gated ? 3 : 2) * e * i;
    const std::uint64_t activations = 4 * l * e + (m.mlp == Mlp::gated ? 2 : 1) * l * i + 2 * l * (q + 2 * kv);
    const std::uint64_t attention = threads * 256 * l;  // each worker's block of weight rows
    const std::uint64_t p = o.all_logits ? l : o.logit_positions.size();
    const std::uint64_t head = p ? p * v + threads * 512 * e : 0;
    return (weights + activations + attention + head) * element;
}

#define ATTNTRACE_FORWARD(T)                                                                                 \
    template class ObserverList<T>;                                                                          \
    template ForwardResult<T> forward(const Model&, const std::vector<std::uint32_t>&, const ForwardOptions&, \
                                      ModelObserver<T>&);
ATTNTRACE_FORWARD(float)
ATTNTRACE_FORWARD(double)
}  // namespace attntrace
