// A whole model's tensors read block by block (model_tensors.hpp).
#include "model_tensors.hpp"

#include <stdexcept>
#include <type_traits>

namespace attntrace {

namespace {

// The Linear of W that WHAT (a weight, not a bias) feeds, or nullptr.
template <class T>
Linear<T>* linear_of(BlockWeights<T>& w, Canonical what) {
    auto optional = [](std::optional<Linear<T>>& l) { return l ? &*l : &l.emplace(); };
    switch (what) {
    case Canonical::fc_in: return &w.fc_in;
    case Canonical::fc_gate: return optional(w.gate);
    case Canonical::fc_out: return &w.fc_out;
    case Canonical::router: return optional(w.router);
    case Canonical::shared_gate: return optional(w.shared_gate);
    case Canonical::shared_up: return optional(w.shared_up);
    case Canonical::shared_down: return optional(w.shared_down);
    case Canonical::shared_expert_gate: return optional(w.shared_expert_gate);
    default: return nullptr;
    }
}

// Where WHAT of W is read to: its array when it already has SHAPE (the previous layer's), else a new one.
template <class T>
T* slot(BlockWeights<T>& w, Canonical what, const Shape& shape, bool conv1d) {
    auto fit = [&](std::optional<Array<T>>& a) {
        if (!a || shape_of(*a) != shape) a = Array<T>::from_shape(shape);
        return a->data();
    };
    auto linear = [&](Linear<T>& l) {
        l.conv1d = conv1d;
        l.in_file = nullptr;
        l.quantized.reset();
        if (shape_of(l.w) != shape) l.w = Array<T>::from_shape(shape);
        return l.w.data();
    };
    switch (what) {
    case Canonical::mlp_norm_weight: return fit(w.mlp_norm_weight);
    case Canonical::mlp_norm_bias: return fit(w.mlp_norm_bias);
    case Canonical::out_norm_weight: return fit(w.out_norm_weight);
    case Canonical::out_norm_bias: return fit(w.out_norm_bias);
    case Canonical::fc_in: return linear(w.fc_in);
    case Canonical::fc_in_bias: return fit(w.fc_in.b);
    case Canonical::fc_gate: return linear(w.gate ? *w.gate : w.gate.emplace());
    case Canonical::fc_gate_bias: return fit(w.gate->b);  // after fc_gate (block_tensors' order)
    case Canonical::fc_out: return linear(w.fc_out);
    case Canonical::fc_out_bias: return fit(w.fc_out.b);
    case Canonical::post_attention_norm_weight: return fit(w.post_attention_norm);
    case Canonical::post_mlp_norm_weight: return fit(w.post_mlp_norm);
    default:
        if (Linear<T>* l = linear_of(w, what)) return linear(*l);
        throw std::logic_error("not a block tensor");  // block_tensors feeds no other
    }
}

// M's weight as its quantized bytes where a float32 forward multiplies by them so (ModelSource::quantized).
template <class T>
std::optional<QuantizedMatrix> quantized(const ModelTensors& t, const ModelTensor& m) {
    if constexpr (!std::is_same_v<T, float>) return std::nullopt;
    if (m.spec.stored == Stored::conv1d || m.spec.offset != 0 || m.stored.shape.size() != 2) return std::nullopt;
    return t.files->quantized(m.stored.name);
}

// The parts of a stacked (parts * rows, in) weight M, each into its Linear of W: rows read in place
// when the file holds T, else converted.
template <class T>
void load_parts(const ModelTensors& t, const ModelTensor& m, BlockWeights<T>& w) {
    const std::size_t parts = m.spec.feeds.size(), in = m.stored.shape[1];
    std::size_t r0 = 0;
    for (std::size_t i = 0; i < parts; ++i) {
        const std::size_t rows = m.spec.split.empty() ? m.stored.shape[0] / parts : m.spec.split[i];
        Linear<T>& l = *linear_of(w, m.spec.feeds[i]);
        if (const auto q = quantized<T>(t, m)) {
            l = Linear<T>{Array<T>{}, std::move(l.b), false, nullptr, Shape{rows, in}, q->row_range(r0, r0 + rows)};
        } else if (const T* in_file = t.files->in_place<T>(m.stored.name, r0, r0 + rows)) {
            l = Linear<T>{Array<T>{}, std::move(l.b), false, in_file, Shape{rows, in}, std::nullopt};
        } else {
            t.files->read_rows(m.stored.name, r0, r0 + rows, slot(w, m.spec.feeds[i], Shape{rows, in}, false));
        }
        r0 += rows;
    }
}

}  // namespace

template <class T>
void load_block(const ModelTensors& t, std::size_t layer, BlockWeights<T>& w) {
    load_layer_weights(t.attention[layer], w.attention, true);  // the projections the file holds as T in place
    for (const ModelTensor& m : t.blocks[layer]) {
        const bool conv1d = m.spec.stored == Stored::conv1d;
        if (m.spec.feeds.size() > 1) {  // stacked parts (Phi-3's gate_up_proj), each read as its rows
            load_parts(t, m, w);
            continue;
        }
        Linear<T>* l = m.stored.shape.size() == 2 ? linear_of(w, m.spec.feeds.front()) : nullptr;
        if (l)
            if (const auto q = quantized<T>(t, m)) {
                *l = Linear<T>{Array<T>{}, std::move(l->b), false, nullptr, m.stored.shape, q};
                continue;
            }
        if (l)
            if (const T* in_file = t.files->in_place<T>(m.stored.name)) {
                *l = Linear<T>{Array<T>{}, std::move(l->b), conv1d, in_file, m.stored.shape, std::nullopt};
                continue;
            }
        T* into = slot(w, m.spec.feeds.front(), m.stored.shape, conv1d);
        t.files->read_into(m.stored.name, into);
        add_offset(m.spec, into, m.stored.shape);
    }
}

template <class T>
std::size_t block_copy_bytes(const ModelTensors& t, std::size_t layer) {
    if (t.files->gguf() || layer >= t.blocks.size()) return 0;
    const char* same = std::is_same_v<T, float> ? "F32" : "F64";  // in place: copied or mapped
    std::size_t converted = 0;                                   // the others: arrays of T
    std::vector<std::size_t> staged;                             // the copied ones, in load order
    const auto add = [&](const StoredTensor& s, const std::shared_ptr<ModelSource>& files) {
        std::size_t n = sizeof(T);
        for (std::size_t d : s.shape) n *= d;
        if (s.dtype != same) converted += n;
        else if (files->copies_in_place(s.name)) staged.push_back(n);
    };
    for (const StoredTensor& s : t.attention[layer].tensors) add(s, t.attention[layer].files);
    for (const ModelTensor& m : t.blocks[layer]) add(m.stored, t.files);
    return converted + t.files->copies_bytes(staged);
}

void release_block(const ModelTensors& t, std::size_t layer) {
    for (const StoredTensor& m : t.attention[layer].tensors) t.attention[layer].files->release(m.name);
    for (const ModelTensor& m : t.blocks[layer]) t.files->release(m.stored.name);
}

template <class T>
std::optional<Array<T>> load_small(const ModelTensors& t, const std::vector<ModelTensor>& list, Canonical what) {
    const ModelTensor* m = ModelTensors::find(list, what);
    if (!m) return std::nullopt;
    Array<T> a = t.files->template read<T>(m->stored.name);
    add_offset(m->spec, a.data(), m->stored.shape);
    return a;
}

template <class T>
void gather_rows(const ModelTensors& t, const ModelTensor& table, const std::vector<std::size_t>& rows, T* out) {
    const std::size_t e = table.stored.shape[1];
    // runs of consecutive rows (the positions 0 .. L-1) in one read each: at L = 4096 one call
    // instead of 4096, each a system call where the file is read (docs/performance.md)
    for (std::size_t i = 0, n = 0; i < rows.size(); i += n) {
        for (n = 1; i + n < rows.size() && rows[i + n] == rows[i] + n;) ++n;
        t.files->read_rows(table.stored.name, rows[i], rows[i] + n, out + i * e);
    }
}

#define ATTNTRACE_MODEL_TENSORS(T)                                                                              \
    template void load_block(const ModelTensors&, std::size_t, BlockWeights<T>&);                             \
    template std::size_t block_copy_bytes<T>(const ModelTensors&, std::size_t);                               \
    template std::optional<Array<T>> load_small(const ModelTensors&, const std::vector<ModelTensor>&, Canonical); \
    template void gather_rows(const ModelTensors&, const ModelTensor&, const std::vector<std::size_t>&, T*);
ATTNTRACE_MODEL_TENSORS(float)
ATTNTRACE_MODEL_TENSORS(double)

}  // namespace attntrace
