// The forward pass of a whole model (forward.hpp): embed -> blocks -> final norm -> head, each a
// named function, on a batch of B sequences of one length L (their rows stacked, (B*L, E)), the
// GEMMs split over the worker threads with what follows each product (bias, activation, the
// gated MLP's product) done by the worker on its block while it is in cache. The sites
// (sites.hpp) are reported where they are computed; a fork there grows the batch.
#include "attntrace/model/forward.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "attntrace/io/ggml_types.hpp"
#include "attntrace/model/activations.hpp"
#include "attntrace/model/norms.hpp"
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "head.hpp"
#include "model_tensors.hpp"
#include "moe.hpp"
#include "products.hpp"

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
template <class T>
bool ObserverList<T>::wants_site(Site site, std::size_t layer) const {
    return std::any_of(list_.begin(), list_.end(), [&](const ModelObserver<T>* o) { return o->wants_site(site, layer); });
}
template <class T>
void ObserverList<T>::at_site(SiteValues<T>& values) {
    for (ModelObserver<T>* o : list_)
        if (o->wants_site(values.site(), values.layer())) o->at_site(values);
}

template <class T>
void ObserverList<T>::expert_routing(const LayerRouting& routing) {
    for (ModelObserver<T>* o : list_) o->expert_routing(routing);
}

namespace {

// The activations of one forward, reused from layer to layer: B sequences of L rows each.
template <class T>
struct Activations {
    std::size_t b = 0, l = 0, e = 0, i = 0;
    Array<T> x;         // (B*L, E) the residual stream
    Array<T> normed;    // (B*L, E) a norm's output: the attention's or the MLP's input (BLOOM's
                        // post-layernorm blocks: the residual after the first norm)
    Array<T> hidden;    // (B*L, I) the MLP's middle
    Array<T> up;        // (B*L, I) the gated MLP's up projection (empty otherwise)
    Array<T> sublayer;  // (B*L, E) the MLP's output kept apart for the mlp_out site, or for the
                        // sandwich block's norm after it (else empty)
    bool gated = false;
    std::size_t threads = 1;
    const ModelTensors* tensors = nullptr;  // the experts a MoE layer reads as its rows choose them

    Activations(const ModelConfig& m, std::size_t workers, const ModelTensors* t)
        : e(m.hidden), i(m.intermediate), gated(m.mlp == Mlp::gated), threads(workers), tensors(t) {}

    std::size_t rows() const { return b * l; }
    // B sequences of L: the scratch arrays sized for them (X and NORMED keep their rows).
    void resize(std::size_t sequences, std::size_t length) {
        b = sequences, l = length;
        fit(x, {rows(), e}), fit(normed, {rows(), e}), fit(hidden, {rows(), i});
        fit(up, {gated ? rows() : 0, i});
    }
    static void fit(Array<T>& a, const Shape& shape) {
        if (shape_of(a) != shape) a = Array<T>::from_shape(shape);
    }
};

// Rows [0, B*L) of A, then for each entry s of FROM the L rows of sequence s: A grown by forks.
template <class T>
void append_sequences(Array<T>& a, std::size_t b, std::size_t l, const std::vector<std::size_t>& from) {
    const std::size_t width = a.shape()[1];
    Array<T> grown = Array<T>::from_shape({(b + from.size()) * l, width});
    std::copy(a.data(), a.data() + b * l * width, grown.data());
    for (std::size_t k = 0; k < from.size(); ++k)
        std::copy_n(a.data() + from[k] * l * width, l * width, grown.data() + (b + k) * l * width);
    a = std::move(grown);
}

// Reports SITE of layer N, VALUES (B*L rows of WIDTH) of the batch in A, to the observer when it
// asks: VALUES become what it left, and the batch grows by the sequences it forked (their residual
// stream, and BLOOM's normed residual, copied from the sequences they came from). head_out is
// read only: no fork there.
template <class T>
void report_site(ModelObserver<T>& observer, Site site, std::size_t n, Array<T>& values, Activations<T>& a,
                 std::size_t heads = 0, const T* bias = nullptr) {
    if (!observer.wants_site(site, n)) return;
    const std::size_t width = values.shape()[1];
    SiteValues<T> sv(site, n, a.b, a.l, width, heads, bias);
    std::copy(values.begin(), values.end(), sv.values().begin());
    observer.at_site(sv);
    const std::vector<std::size_t>& from = sv.forked_from();
    if (site == Site::head_out && !from.empty()) throw std::logic_error("head_out is read only: no fork there");
    if (!from.empty()) values = Array<T>::from_shape({sv.sequences() * a.l, width});
    std::copy(sv.values().begin(), sv.values().end(), values.begin());
    if (from.empty()) return;
    if (&values != &a.x) append_sequences(a.x, a.b, a.l, from);
    append_sequences(a.normed, a.b, a.l, from);
    a.resize(a.b + from.size(), a.l);
}

template <class T>
NormWeights<T> norm_of(NormKind kind, double eps, const std::optional<Array<T>>& w, const std::optional<Array<T>>& b) {
    return {kind, w ? w->data() : nullptr, b ? b->data() : nullptr, eps};
}

// ---- the stages -----------------------------------------------------------------------------

// Gemma's embedding normalizer sqrt(E) as the model computes it: a float32 tensor
// (GemmaTextScaledWordEmbedding's embed_scale buffer, torch.tensor(hidden_size**0.5)) cast to the
// embeddings' dtype DTYPE ("BF16", "F16", "F32", ...): sqrt(3072) = 55.4256 is 55.5 in bf16.
double embedding_normalizer(std::size_t e, const std::string& dtype) {
    const float f = static_cast<float>(std::sqrt(static_cast<double>(e)));
    // round to nearest even, keeping F16's 10 or BF16's 7 mantissa bits (sqrt(E) is a normal
    // number of both, far from their largest)
    const int dropped = dtype == "F16" ? 13 : dtype == "BF16" ? 16 : 0;
    if (dropped == 0) return f;
    std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t half = (1u << (dropped - 1)) - 1u;
    bits += half + ((bits >> dropped) & 1u);
    return std::bit_cast<float>(bits & ~((1u << dropped) - 1u));
}

// embed: hidden_states[0] of each sequence of IDS into A.x: the token rows, plus the family's
// position and token type rows, through its embedding norm.
template <class T>
void embed(const Model& model, const std::vector<std::vector<std::uint32_t>>& ids, Activations<T>& a) {
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const ModelTensor& tokens = *ModelTensors::find(t.embeddings, Canonical::token_embedding);
    for (std::size_t s = 0; s < a.b; ++s)
        gather_rows(t, tokens, std::vector<std::size_t>(ids[s].begin(), ids[s].end()), a.x.data() + s * a.l * a.e);
    if (m.scale_embeddings) {  // Gemma: x sqrt(E) as the embeddings' dtype holds it
        const T normalizer = T(embedding_normalizer(m.hidden, tokens.stored.dtype));
        for (T& v : a.x) v *= normalizer;
    }
    if (m.embedding == Embedding::tokens) return;
    const T* positions = nullptr;
    if (m.embedding == Embedding::tokens_positions || m.embedding == Embedding::bert) {
        for (std::size_t s = 0; s < a.b; ++s)
            gather_rows(t, *ModelTensors::find(t.embeddings, Canonical::position_embedding),
                        position_ids(ids[s], m.position_offset, m.padding_idx), a.normed.data() + s * a.l * a.e);
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
    add_and_norm(a.x.data(), positions, type_row ? type_row->data() : nullptr, normed ? a.x.data() : nullptr, a.rows(),
                 a.e, norm_of(m.norm, m.norm_eps, w, b), a.threads);
}

// head_out: head h's Z columns [h*Pv, (h+1)*Pv) times W_o's columns of that head (the rows of
// that head where W_o is stored (H*Pv, E) as Conv1D), (B*L, H*E).
template <class T>
Array<T> head_outputs(const Array<T>& z, const WeightView<T>& w_o, std::size_t heads, std::size_t threads) {
    const std::size_t rows = z.shape()[0], hp = z.shape()[1], pv = hp / heads, e = w_o.out;
    Array<T> out = Array<T>::from_shape({rows, heads * e});
    parallel_for(heads, threads, [&](std::size_t h, std::size_t) {
        const T* w = w_o.conv1d ? w_o.w + h * pv * e : w_o.w + h * pv;
        multiply_weight(z.data() + h * pv, hp, rows, pv, w, w_o.conv1d ? e : hp, w_o.conv1d, e, T(0), out.data() + h * e,
                        heads * e);
    });
    return out;
}

// The output projection (E, H*Pv) of W as the products read it: w_o, where the file holds it, or
// its quantized bytes.
template <class T>
WeightView<T> output_projection(const LayerWeights<T>& w) {
    const MhaParams<T>& p = w.attn;
    const T* b_o = p.b_o ? p.b_o->data() : nullptr;
    if (w.w_o_quantized) return {nullptr, w.w_o_quantized->rows, w.w_o_quantized->cols, false, b_o, &*w.w_o_quantized};
    if (const auto& in_place = p.w_o_in_place) return {in_place->data, in_place->out, in_place->in, in_place->conv1d, b_o};
    return {p.w_o->data(), p.w_o->shape()[0], p.w_o->shape()[1], false, b_o};
}

// W_o dequantized (E, H*Pv) where it is kept quantized, for head_outputs' column blocks.
template <class T>
std::optional<Array<T>> dequantized(const WeightView<T>& w_o) {
    if (!w_o.quantized) return std::nullopt;
    Array<T> w = Array<T>::from_shape({w_o.out, w_o.in});
    dequantize_row(w_o.quantized->type, w_o.quantized->bytes, w.data(), w.size());
    return w;
}

// attention: layer C's self-attention on IN (B*L, E) (already through its norm), as mha --model
// runs it, up to the heads' context z; the z site (which may fork); the output projection.
// Returns the attention's output (B*L, E) for the batch as it is after the z site.
template <class T>
Array<T> attention(Array<T>& in, const BlockWeights<T>& w, const LayerConfig& c, const ForwardOptions& o,
                   ModelObserver<T>& observer, Activations<T>& a, const NormWeights<T>* post_norm = nullptr) {
    const PositionStages<T> positions = positions_for_layer(c, w.attention, true);
    const bool summarized = o.attention_layers.empty() || o.attention_layers[c.layer];
    AttentionOptions ao;
    ao.scale = c.scale;
    ao.softcap = c.softcap;
    ao.threads = o.threads;
    ao.row_stats = summarized && o.row_stats;
    ao.pooled_cells = summarized ? o.pooled_cells : 0;
    if (observer.wants_weights(c.layer))
        ao.weights_sink = [&](std::size_t first, const void* data, std::size_t count) {
            observer.attention_rows(c.layer, first, static_cast<const T*>(data), count);
        };
    const MhaConfig config{c.heads, c.kv_heads, false, false};  // the output projection is ours, after z
    in.reshape({a.b, a.l, a.e});
    AttentionResult<T> r = mha(in, in, in, w.attention.attn, config, Masks<T>{}, ao, static_cast<Observer<T>*>(nullptr),
                               positions.any() ? &positions : nullptr);
    in.reshape({a.rows(), a.e});
    observer.attention_done({c.layer, r.row_stats ? &*r.row_stats : nullptr, r.pooled ? &*r.pooled : nullptr,
                             r.empty_rows, r.scale});
    Array<T> z = std::move(r.output);
    z.reshape({a.rows(), z.size() / a.rows()});
    report_site(observer, Site::z, c.layer, z, a, c.heads);
    const WeightView<T> w_o = output_projection(w.attention);
    if (observer.wants_site(Site::head_out, c.layer)) {
        const std::optional<Array<T>> w_o_values = dequantized(w_o);
        WeightView<T> dense = w_o;
        if (w_o_values) dense.w = w_o_values->data(), dense.quantized = nullptr;
        Array<T> per_head = head_outputs(z, dense, c.heads, a.threads);
        report_site(observer, Site::head_out, c.layer, per_head, a, c.heads, w_o.bias);
    }
    Array<T> out = Array<T>::from_shape({a.rows(), a.e});
    linear(z.data(), a.rows(), w_o, out.data(), a.e, T(0), a.threads);
    if (post_norm)  // the sandwich block: attn_out is after post_attention_layernorm
        add_and_norm(out.data(), nullptr, nullptr, out.data(), a.rows(), a.e, *post_norm, a.threads);
    report_site(observer, Site::attn_out, c.layer, out, a);
    return out;
}

// mlp: OUT (B*L, E) := fc_out(act(fc_in IN)) (+ its bias) + BETA · OUT, or with the gated MLP
// fc_out(act(gate IN) * fc_in IN): the first products and the activation by column blocks, each
// worker activating its own block, then the second product.
template <class T>
void mlp(const ModelConfig& m, const BlockWeights<T>& w, const T* in, T* out, T beta, Activations<T>& a) {
    T* h = a.hidden.data();
    const auto bias = [](const Linear<T>& l, std::size_t c0) { return l.b ? l.b->data() + c0 : nullptr; };
    const WeightView<T> first = view_of(w.gate ? *w.gate : w.fc_in), up = view_of(w.fc_in);
    const auto first_q = quantized_input(in, a.rows(), first, a.threads);  // in quantized once (quantized weights)
    const auto up_q = w.gate ? quantized_input(in, a.rows(), up, a.threads, first_q) : std::nullopt;
    split_product(a.rows(), a.i, a.threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        product(in, r0, r1, c0, c1, first, h, a.i, T(0), first_q);
        if (!w.gate) return activate(m.activation, h + r0 * a.i + c0, r1 - r0, c1 - c0, a.i, bias(w.fc_in, c0));
        product(in, r0, r1, c0, c1, up, a.up.data(), a.i, T(0), up_q);
        activate_gated(m.activation, h + r0 * a.i + c0, a.i, a.up.data() + r0 * a.i + c0, a.i, r1 - r0, c1 - c0,
                       bias(*w.gate, c0), bias(w.fc_in, c0));
    });
    linear(h, a.rows(), view_of(w.fc_out), out, a.e, beta, a.threads);
}

// The MLP of layer N on IN, added to the residual RESIDUAL (both (B*L, E), in A's arrays): straight
// into it, or, when the mlp_out site is asked for, computed apart, reported (and maybe forked),
// then added. IN and RESIDUAL name arrays of A, so that a fork grows them.
// layer_mlp: layer N's MLP, dense (mlp) or, where the config makes it sparse, the mixture of
// experts (moe.hpp), OUT := MLP(IN) + BETA · OUT.
template <class T>
void layer_mlp(const ModelConfig& m, const BlockWeights<T>& w, std::size_t n, const T* in, T* out, T beta,
               Activations<T>& a, ModelObserver<T>& observer) {
    if (!m.moe || !m.moe->sparse[n]) return mlp(m, w, in, out, beta, a);
    moe_mlp(m, w, *a.tensors, n, in, a.rows(), out, beta, a.threads, observer);
}

template <class T>
void mlp_into(const ModelConfig& m, const BlockWeights<T>& w, std::size_t n, Array<T> Activations<T>::*in,
              Array<T> Activations<T>::*residual, Activations<T>& a, ModelObserver<T>& observer) {
    if (!observer.wants_site(Site::mlp_out, n))
        return layer_mlp(m, w, n, (a.*in).data(), (a.*residual).data(), T(1), a, observer);
    Activations<T>::fit(a.sublayer, {a.rows(), a.e});
    layer_mlp(m, w, n, (a.*in).data(), a.sublayer.data(), T(0), a, observer);
    report_site(observer, Site::mlp_out, n, a.sublayer, a);
    add_and_norm((a.*residual).data(), a.sublayer.data(), nullptr, nullptr, a.rows(), a.e, NormWeights<T>{}, a.threads);
}

// The pre-attention norm of layer C (its input_layernorm / ln_1).
template <class T>
NormWeights<T> attention_norm(const LayerConfig& c, const BlockWeights<T>& w) {
    return norm_of(c.norm, c.norm_eps, w.attention.norm_weight, w.attention.norm_bias);
}

template <class T>
NormWeights<T> mlp_norm(const ModelConfig& m, const BlockWeights<T>& w) {
    return norm_of(m.norm, m.norm_eps, w.mlp_norm_weight, w.mlp_norm_bias);
}

// pre_norm_block: x += attn(norm1 x); x += mlp(norm2 x). BLOOM's post_layernorm variant takes
// both residuals from the normed values: a = norm1 x; h = norm2(a + attn a); x = h + mlp h.
template <class T>
void pre_norm_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                    const ForwardOptions& o, ModelObserver<T>& observer) {
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.rows(), a.e, attention_norm(c, w), a.threads);
    const Array<T> attn = attention(a.normed, w, c, o, observer, a);
    if (m.residual == Residual::post_layernorm) {
        add_and_norm(a.normed.data(), attn.data(), nullptr, a.x.data(), a.rows(), a.e, mlp_norm(m, w), a.threads);
        return mlp_into(m, w, c.layer, &Activations<T>::x, &Activations<T>::x, a, observer);  // x = h; x += mlp(h)
    }
    add_and_norm(a.x.data(), attn.data(), nullptr, a.normed.data(), a.rows(), a.e, mlp_norm(m, w), a.threads);
    mlp_into(m, w, c.layer, &Activations<T>::normed, &Activations<T>::x, a, observer);
}

// parallel_block (NeoX use_parallel_residual): x + attn(norm1 x) + mlp(norm2 x).
template <class T>
void parallel_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                    const ForwardOptions& o, ModelObserver<T>& observer) {
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.rows(), a.e, attention_norm(c, w), a.threads);
    const Array<T> attn = attention(a.normed, w, c, o, observer, a);
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.rows(), a.e, mlp_norm(m, w), a.threads);
    add_and_norm(a.x.data(), attn.data(), nullptr, nullptr, a.rows(), a.e, NormWeights<T>{}, a.threads);
    mlp_into(m, w, c.layer, &Activations<T>::normed, &Activations<T>::x, a, observer);
}

// post_norm_block (BERT): h = norm1(x + attn x); x = norm2(h + mlp h).
template <class T>
void post_norm_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                     const ForwardOptions& o, ModelObserver<T>& observer) {
    const Array<T> attn = attention(a.x, w, c, o, observer, a);
    add_and_norm(a.x.data(), attn.data(), nullptr, a.x.data(), a.rows(), a.e, mlp_norm(m, w), a.threads);
    mlp_into(m, w, c.layer, &Activations<T>::x, &Activations<T>::x, a, observer);  // x = h + mlp(h)
    add_and_norm(a.x.data(), nullptr, nullptr, a.x.data(), a.rows(), a.e,
                 norm_of(m.norm, m.norm_eps, w.out_norm_weight, w.out_norm_bias), a.threads);
}

// sandwich_block (Gemma 2 / 3, OLMo 2): h = x + post1(attn(norm1 x)); x = h + post2(mlp(norm2 h)),
// norm1 / norm2 a copy where the layer has none (OLMo 2). attn_out and mlp_out are the sublayers'
// outputs after their post norms, as they are added to the residual stream.
template <class T>
void sandwich_block(const ModelConfig& m, const BlockWeights<T>& w, const LayerConfig& c, Activations<T>& a,
                    const ForwardOptions& o, ModelObserver<T>& observer) {
    const NormWeights<T> post_attention = norm_of(m.norm, m.norm_eps, w.post_attention_norm, std::optional<Array<T>>{});
    const NormWeights<T> post_mlp = norm_of(m.norm, m.norm_eps, w.post_mlp_norm, std::optional<Array<T>>{});
    add_and_norm(a.x.data(), nullptr, nullptr, a.normed.data(), a.rows(), a.e, attention_norm(c, w), a.threads);
    Array<T> attn = attention(a.normed, w, c, o, observer, a, &post_attention);
    const NormWeights<T> pre_mlp = w.mlp_norm_weight ? mlp_norm(m, w) : NormWeights<T>{};  // OLMo 2: none
    add_and_norm(a.x.data(), attn.data(), nullptr, a.normed.data(), a.rows(), a.e, pre_mlp, a.threads);
    Activations<T>::fit(a.sublayer, {a.rows(), a.e});
    layer_mlp(m, w, c.layer, a.normed.data(), a.sublayer.data(), T(0), a, observer);
    add_and_norm(a.sublayer.data(), nullptr, nullptr, a.sublayer.data(), a.rows(), a.e, post_mlp, a.threads);
    report_site(observer, Site::mlp_out, c.layer, a.sublayer, a);
    add_and_norm(a.x.data(), a.sublayer.data(), nullptr, nullptr, a.rows(), a.e, NormWeights<T>{}, a.threads);
}

template <class T>
void block(const ModelConfig& m, const BlockWeights<T>& w, std::size_t n, Activations<T>& a, const ForwardOptions& o,
           ModelObserver<T>& observer) {
    report_site(observer, Site::resid_pre, n, a.x, a);
    const LayerConfig& c = m.layers[n];
    switch (m.residual) {
    case Residual::pre_norm:
    case Residual::post_layernorm: return pre_norm_block(m, w, c, a, o, observer);
    case Residual::parallel: return parallel_block(m, w, c, a, o, observer);
    case Residual::post_norm: return post_norm_block(m, w, c, a, o, observer);
    case Residual::sandwich: return sandwich_block(m, w, c, a, o, observer);
    }
}

}  // namespace

// ---- ForwardPass --------------------------------------------------------------------------------

template <class T>
struct ForwardPass<T>::State {
    const Model& model;
    ForwardOptions options;
    ModelObserver<T>& observer;
    Activations<T> a;
    BlockWeights<T> w;  // one block at a time, each read into the previous one's arrays
    std::size_t next = 0;
    bool started = false;
    std::unique_ptr<PagesAhead> pages_ahead;  // the first block's memory, made while the run starts

    State(const Model& m, const ForwardOptions& o, ModelObserver<T>& obs)
        : model(m), options(o), observer(obs), a(m.config, thread_count(o.threads), m.tensors.get()) {
        options.threads = a.threads;
    }
};

// With more than one thread, the pages of the activations and of the first block's weights' copies
// are made by a helper (PagesAhead, tensor/buffer.hpp) while this thread embeds and the read workers
// wait: the first block's read into fresh memory took 24-48 ms on the AMD EPYC VM (the later ones
// 4 ms), and pread fills pages already made at its own speed. The region: the weights' copies and a
// quarter more for the activations, which ask first; at most 512 MiB. The whole GPT-2-small run:
// 396 -> 382 and 399 -> 382 ms (medians of 21 interleaved runs, twice; docs/performance.md).
template <class T>
std::unique_ptr<PagesAhead> first_block_pages(const Model& model, std::size_t threads) {
    if (threads < 2 || !model.tensors || model.config.layers.empty()) return nullptr;
    const std::size_t bytes = block_copy_bytes<T>(*model.tensors, 0);
    if (bytes < (std::size_t{4} << 20)) return nullptr;  // a small model's: not worth a thread
    return std::make_unique<PagesAhead>(std::min(bytes + bytes / 4, std::size_t{512} << 20));
}

template <class T>
ForwardPass<T>::ForwardPass(const Model& model, const ForwardOptions& options, ModelObserver<T>& observer)
    : state_(std::make_unique<State>(model, options, observer)) {}
template <class T>
ForwardPass<T>::~ForwardPass() = default;

template <class T>
void ForwardPass<T>::embed(const std::vector<std::vector<std::uint32_t>>& ids, const std::string& what) {
    State& s = *state_;
    if (ids.empty()) throw InputError(what + ": no sequences to run");
    for (const auto& seq : ids) {
        check_ids(s.model.config, seq, what);
        if (seq.size() != ids.front().size())
            throw InputError(what + ": sequences of " + std::to_string(ids.front().size()) + " and " +
                             std::to_string(seq.size()) + " tokens cannot run as one batch");
    }
    const SingleThreadedBlas blas;  // our workers split every product; BLAS runs inside them
    if (!s.started && s.next == 0) s.pages_ahead = first_block_pages<T>(s.model, s.a.threads);
    s.a.resize(ids.size(), ids.front().size());
    timeline_mark("forward: embedding");
    attntrace::embed(s.model, ids, s.a);
    s.next = 0, s.started = true;
    s.observer.hidden_state(0, s.a.x.data(), s.a.rows(), s.a.e);
}

template <class T>
void ForwardPass<T>::resume(std::size_t layer, Array<T> x, std::size_t sequences) {
    State& s = *state_;
    const std::size_t e = s.model.config.hidden;
    if (sequences == 0 || x.dimension() != 2 || x.shape()[1] != e || x.shape()[0] % sequences != 0 ||
        layer > s.model.config.layers.size())
        throw ShapeError("resume: a residual stream of shape " + shape_string(x.shape()) + " for " +
                         std::to_string(sequences) + " sequences at layer " + std::to_string(layer));
    const std::size_t length = x.shape()[0] / sequences;
    s.a.x = std::move(x);
    s.a.resize(sequences, length);
    s.next = layer, s.started = true;
}

template <class T>
void ForwardPass<T>::run_until(std::size_t layer) {
    State& s = *state_;
    const ModelConfig& m = s.model.config;
    if (!s.started) throw UsageError("forward: run_until before embed or resume");
    layer = std::min(layer, m.layers.size());
    const SingleThreadedBlas blas;
    for (; s.next < layer; ++s.next) {
        const std::size_t n = s.next;
        timeline_mark("forward: reading a layer's weights");
        load_block(*s.model.tensors, n, s.w);
        timeline_mark("forward: a layer's weights ready");
        block(m, s.w, n, s.a, s.options, s.observer);
        release_block(*s.model.tensors, n);
        if (n + 1 == m.layers.size()) {
            report_site(s.observer, Site::resid_final, m.layers.size(), s.a.x, s.a);
            s.w = {};  // the head's blocks take its place
            final_norm_rows(s.model, s.a.x.data(), s.a.rows(), s.a.threads);
            timeline_mark("forward: every layer run");
        }
        s.observer.hidden_state(n + 1, s.a.x.data(), s.a.rows(), s.a.e);
    }
}

template <class T>
std::size_t ForwardPass<T>::next_layer() const { return state_->next; }
template <class T>
std::size_t ForwardPass<T>::sequences() const { return state_->a.b; }
template <class T>
std::size_t ForwardPass<T>::length() const { return state_->a.l; }
template <class T>
const Array<T>& ForwardPass<T>::residual() const { return state_->a.x; }

template <class T>
Array<T> ForwardPass<T>::logits(const std::vector<std::size_t>& positions, const LogitsColumns<T>* columns) {
    State& s = *state_;
    const Activations<T>& a = s.a;
    if (s.next != s.model.config.layers.size()) throw UsageError("logits: the forward has not run every layer");
    if (!s.model.has_head()) throw UsageError("logits: " + s.model.head_missing);
    for (std::size_t p : positions)
        if (p >= a.l) throw UsageError("logit positions: " + std::to_string(p) + " is past the sequence");
    const SingleThreadedBlas blas;
    if (positions.size() == a.l) {  // every position: the rows as they are
        bool all = true;
        for (std::size_t i = 0; i < positions.size(); ++i) all = all && positions[i] == i;
        if (all) return head(s.model, a.x, a.threads, columns);
    }
    Array<T> rows = Array<T>::from_shape({a.b * positions.size(), a.e});
    for (std::size_t b = 0; b < a.b; ++b)
        for (std::size_t i = 0; i < positions.size(); ++i)
            std::copy_n(a.x.data() + (b * a.l + positions[i]) * a.e, a.e, rows.data() + (b * positions.size() + i) * a.e);
    return head(s.model, rows, a.threads, columns);
}

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
    ForwardPass<T> pass(model, options, observer);
    pass.embed({ids});
    pass.run_until(layers);
    ForwardResult<T> result;
    result.layers_run = layers;
    if (!need_head) return result;
    std::vector<std::size_t> positions = options.logit_positions;
    if (options.all_logits) {
        positions.resize(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) positions[i] = i;
    }
    LogitsColumns<T> columns;
    if (options.all_logits && options.logits_columns)
        columns = [&to = options.logits_columns](std::size_t first, std::size_t count, const T* block) { to(first, count, block); };
    Array<T> computed = pass.logits(positions, columns ? &columns : nullptr);
    if (!columns) result.logits = std::move(computed);
    return result;
}

std::uint64_t forward_memory_bytes(const ModelConfig& m, std::size_t length, const ForwardOptions& o,
                                   std::size_t element, std::size_t sequences) {
    const std::uint64_t l = std::uint64_t(length) * sequences, e = m.hidden, i = m.intermediate, v = m.vocab;
    const std::uint64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
    const std::uint64_t threads = thread_count(o.threads);
    // one block's weights: q/k/v/o, their stacked copy, the MLP
    std::uint64_t weights = 2 * e * (q + 2 * kv) + e * q + (m.mlp == Mlp::gated ? 3 : 2) * e * i;
    if (m.moe)  // the router, one expert converted at a time, the shared expert; their rows' scratch
        weights += e * m.moe->experts + 3 * e * (m.moe->intermediate + m.moe->shared_intermediate) +
                   l * (m.moe->experts + 2 * e + 2 * std::max(m.moe->intermediate, m.moe->shared_intermediate));
    const std::uint64_t activations = 4 * l * e + (m.mlp == Mlp::gated ? 2 : 1) * l * i + 2 * l * (q + 2 * kv);
    const std::uint64_t attention = threads * 256 * length;  // each worker's block of weight rows
    const std::uint64_t p = (o.all_logits ? length : o.logit_positions.size()) * sequences;
    const std::uint64_t head = p ? p * v + threads * 512 * e : 0;
    return (weights + activations + attention + head) * element;
}

#define ATTNTRACE_FORWARD(T)                                                                                 \
    template class ObserverList<T>;                                                                          \
    template class ForwardPass<T>;                                                                           \
    template ForwardResult<T> forward(const Model&, const std::vector<std::uint32_t>&, const ForwardOptions&, \
                                      ModelObserver<T>&);
ATTNTRACE_FORWARD(float)
ATTNTRACE_FORWARD(double)
}  // namespace attntrace
