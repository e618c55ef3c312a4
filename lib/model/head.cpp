// The final norm and the head (head.hpp), and the unembedding the analyses read (forward.hpp).
#include "head.hpp"

#include <cmath>

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>

#include "attntrace/model/activations.hpp"
#include "attntrace/model/forward.hpp"
#include "attntrace/model/norms.hpp"
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "model_tensors.hpp"
#include "products.hpp"

namespace attntrace {

namespace {

template <class T>
NormWeights<T> norm_of(NormKind kind, double eps, const std::optional<Array<T>>& w, const std::optional<Array<T>>& b) {
    return {kind, w ? w->data() : nullptr, b ? b->data() : nullptr, eps};
}

// The masked-LM head's transform (BERT cls.predictions.transform, RoBERTa lm_head.dense /
// layer_norm) of X (R, E): norm(act(dense X)).
template <class T>
Array<T> mlm_transform(const Model& model, const Array<T>& x, std::size_t threads) {
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const std::size_t rows = x.shape()[0];
    const auto dense = load_small<T>(t, t.head, Canonical::head_dense);
    const auto dense_bias = load_small<T>(t, t.head, Canonical::head_dense_bias);
    Array<T> y = Array<T>::from_shape({rows, m.hidden});
    linear(x.data(), rows, WeightView<T>{dense->data(), m.hidden, m.hidden, false, dense_bias ? dense_bias->data() : nullptr, nullptr},
           y.data(), m.hidden, T(0), threads);
    activate(m.head_activation, y.data(), rows, m.hidden, m.hidden, nullptr);
    const auto w = load_small<T>(t, t.head, Canonical::head_norm_weight);
    const auto b = load_small<T>(t, t.head, Canonical::head_norm_bias);
    add_and_norm(y.data(), nullptr, nullptr, y.data(), rows, m.hidden, norm_of(NormKind::layer_norm, m.norm_eps, w, b),
                 threads);
    return y;
}

// The head's (V, E) weight: the LM head's own or the token embeddings.
const ModelTensor& head_weight(const Model& model) {
    const ModelTensors& t = *model.tensors;
    return model.config.tied ? *ModelTensors::find(t.embeddings, Canonical::token_embedding)
                              : *ModelTensors::find(t.head, Canonical::head_decoder);
}

// The head's weight W as its quantized bytes where a float32 forward multiplies by them so.
template <class T>
std::optional<QuantizedMatrix> quantized_head(const ModelTensors& t, const ModelTensor& w) {
    if constexpr (!std::is_same_v<T, float>) return std::nullopt;
    return t.files->quantized(w.stored.name);
}

void require_head(const Model& model) {
    if (!model.has_head()) throw UsageError("logits: " + model.head_missing);
}

}  // namespace

template <class T>
void final_norm_rows(const Model& model, T* x, std::size_t rows, std::size_t threads) {
    const FinalNorm<T> f = final_norm_weights<T>(model);
    if (f.kind == NormKind::none) return;
    add_and_norm(x, nullptr, nullptr, x, rows, model.config.hidden, norm_of(f.kind, f.eps, f.weight, f.bias), threads);
}

// The head's output goes out in blocks of vocabulary columns where a LogitsColumns takes it: as
// many blocks of head_rows columns as 12 MiB of (P, columns) logits hold, at most a quarter of them
// (so that writing one overlaps computing the next), and at least one per thread (a long sequence's
// blocks then pass 12 MiB: at P = 4096, 16 MiB a thread). Each costs one write per row
// of the file (app/model_run.cpp): five calls for GPT-2's 50257 columns at P = 256, each a buffer
// that the layers' freed weight chunks already hold (tensor/buffer.hpp).
constexpr std::size_t logits_block_bytes = std::size_t{12} << 20;

// In blocks of head_rows vocabulary rows, one block per task, each worker converting its block into
// its own buffer, or reading it in place when the file holds it as T, its pages dropped after.
template <class T>
Array<T> head(const Model& model, const Array<T>& final, std::size_t threads, const LogitsColumns<T>* columns, bool capped) {
    const ModelConfig& m = model.config;
    const ModelTensors& t = *model.tensors;
    const Array<T> x = m.head == Head::masked_lm ? mlm_transform(model, final, threads) : final;
    const ModelTensor* w = &head_weight(model);
    const auto bias = load_small<T>(t, t.head, Canonical::head_bias);
    const std::optional<QuantizedMatrix> quantized = quantized_head<T>(t, *w);  // multiplied as its bytes
    // 1024 rows a block for float weights: each product splits X for the AMX kernel again
    // (tensor/weight_gemm.hpp), and 512 spent a third of the head's splitting on X (5 ms here)
    const std::size_t head_rows = quantized ? 512 : 1024;
    const std::size_t p = x.shape()[0], e = m.hidden, v = m.vocab, blocks = (v + head_rows - 1) / head_rows;
    // blocks of head_rows columns in one LogitsColumns call: one for each thread at least
    const std::size_t by_bytes = logits_block_bytes / (std::max<std::size_t>(p, 1) * head_rows * sizeof(T));
    const std::size_t per_write =
        columns ? std::clamp(std::min(by_bytes, (blocks + 3) / 4), std::min(threads, blocks), blocks) : blocks;
    threads = std::min(threads, per_write);
    // each block's pages mapped by its task; or, where the source copies (WeightPages::read), read into its buffer
    const bool mapped = !quantized && !t.files->copies_in_place(w->stored.name);
    const T* in_file = mapped ? t.files->in_place<T>(w->stored.name, 0, 0) : nullptr;
    std::optional<QuantizedRows> x_quantized;  // X's rows quantized once for every block
    if constexpr (std::is_same_v<T, float>)
        if (quantized) x_quantized = quantize_rows(quantized->type, x.data(), p, e, threads);
    t.files->free_copies();  // the layers' weight buffers, for the ones below (pages made, no faults)
    // the (P, V) logits; or, to COLUMNS, two blocks of them: one written alongside while the next is
    // computed, each a buffer of its own, which one of the layers' freed weight chunks holds (GPT-2
    // small: 12 MiB each; as one 24 MiB block they took fresh pages amid the products)
    std::array<Array<T>, 2> held;
    if (columns)
        for (Array<T>& h : held) h = Array<T>::from_shape({p, std::min(v, per_write * head_rows)});
    else
        held[0] = Array<T>::from_shape({p, v});
    // each worker's block of weight rows, read into it where the file is not used in place
    Array<T> staged = Array<T>::from_shape({in_file || quantized ? 0 : threads, head_rows * e});
    if (!columns) {  // the pages first, all at once, not as page faults amid the products
        timeline_mark("head: populating the logits' pages");
        populate_for_writing(held[0].data(), p * v * sizeof(T), threads);
    }
    timeline_mark("head: products");
    // block BLK's (P, v1 - v0) logits into OUT, rows LDO apart
    const auto block = [&](std::size_t blk, std::size_t worker, T* out, std::size_t ldo) {
        const std::size_t v0 = blk * head_rows, v1 = std::min(v, v0 + head_rows);
        if constexpr (std::is_same_v<T, float>)
            if (quantized) quantized_product(quantized->row_range(v0, v1), *x_quantized, out, ldo, 1);
        if (!quantized) {
            T* own = staged.data() + worker * head_rows * e;
            const T* rows = in_file ? t.files->in_place<T>(w->stored.name, v0, v1) : own;
            if (!in_file) t.files->read_rows(w->stored.name, v0, v1, own);
            multiply_weight(x.data(), e, p, e, rows, e, false, v1 - v0, T(0), out, ldo);
        }
        if (bias)
            for (std::size_t r = 0; r < p; ++r)
                for (std::size_t c = v0; c < v1; ++c) out[r * ldo + c - v0] += bias->data()[c];
        if (m.final_softcap && capped)  // Gemma 2/3 *ForCausalLM.forward: logits / c, tanh, * c
            for (std::size_t r = 0; r < p; ++r)
                for (std::size_t c = v0; c < v1; ++c)
                    out[r * ldo + c - v0] = std::tanh(out[r * ldo + c - v0] / T(*m.final_softcap)) * T(*m.final_softcap);
        if (in_file || quantized) t.files->release(w->stored.name, v0, v1);
    };
    std::unique_ptr<Alongside<void>> writing;  // COLUMNS' call on the block before; joined before HELD goes
    for (std::size_t b0 = 0, turn = 0; b0 < blocks; b0 += per_write, turn ^= 1) {
        const std::size_t b1 = std::min(blocks, b0 + per_write), c0 = b0 * head_rows, c1 = std::min(v, b1 * head_rows);
        const std::size_t ldo = columns ? c1 - c0 : v;
        T* const out = columns ? held[turn].data() : held[0].data() + c0;
        parallel_for(b1 - b0, std::min(threads, b1 - b0),
                     [&](std::size_t i, std::size_t worker) { block(b0 + i, worker, out + i * head_rows, ldo); });
        if (!columns) continue;
        if (writing) writing->get();  // the other buffer written (or its error thrown): computed into next
        writing = std::make_unique<Alongside<void>>([columns, c0, c1, out] { (*columns)(c0, c1 - c0, out); });
    }
    if (writing) writing->get();
    timeline_mark("head: products done");
    return columns ? Array<T>() : std::move(held[0]);
}

template <class T>
Array<T> unembed(const Model& model, const Array<T>& x, std::size_t threads, bool capped) {
    require_head(model);
    const SingleThreadedBlas blas;
    threads = thread_count(threads);
    Array<T> normed = x;
    final_norm_rows(model, normed.data(), normed.shape()[0], threads);
    return head<T>(model, normed, threads, nullptr, capped);
}

template <class T>
FinalNorm<T> final_norm_weights(const Model& model) {
    const ModelConfig& m = model.config;
    if (!m.final_norm) return {};
    const ModelTensors& t = *model.tensors;
    return {m.norm, m.norm_eps, load_small<T>(t, t.final_norm, Canonical::final_norm_weight),
            load_small<T>(t, t.final_norm, Canonical::final_norm_bias)};
}

template <class T>
Array<T> unembedding_rows(const Model& model, const std::vector<std::uint32_t>& ids) {
    require_head(model);
    const ModelTensor& w = head_weight(model);
    Array<T> rows = Array<T>::from_shape({ids.size(), model.config.hidden});
    gather_rows(*model.tensors, w, std::vector<std::size_t>(ids.begin(), ids.end()), rows.data());
    return rows;
}

template <class T>
std::vector<T> unembedding_bias(const Model& model, const std::vector<std::uint32_t>& ids) {
    require_head(model);
    const ModelTensors& t = *model.tensors;
    const auto bias = load_small<T>(t, t.head, Canonical::head_bias);
    std::vector<T> out(ids.size(), T(0));
    if (bias)
        for (std::size_t i = 0; i < ids.size(); ++i) out[i] = bias->data()[ids[i]];
    return out;
}

#define ATTNTRACE_HEAD(T)                                                                                  \
    template void final_norm_rows(const Model&, T*, std::size_t, std::size_t);                             \
    template Array<T> head(const Model&, const Array<T>&, std::size_t, const LogitsColumns<T>*, bool);                                \
    template Array<T> unembed(const Model&, const Array<T>&, std::size_t, bool);                                 \
    template FinalNorm<T> final_norm_weights(const Model&);                                                \
    template Array<T> unembedding_rows(const Model&, const std::vector<std::uint32_t>&);                   \
    template std::vector<T> unembedding_bias(const Model&, const std::vector<std::uint32_t>&);
ATTNTRACE_HEAD(float)
ATTNTRACE_HEAD(double)

}  // namespace attntrace
