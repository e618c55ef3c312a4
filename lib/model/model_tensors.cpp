// A whole model's tensors read block by block (model_tensors.hpp).
#include "model_tensors.hpp"

namespace attntrace {

namespace {

template <class T>
void put(BlockWeights<T>& w, Canonical what, Array<T> a, bool conv1d) {
    auto linear = [&](Linear<T>& l) {
        l.w = std::move(a);
        l.conv1d = conv1d;
    };
    switch (what) {
    case Canonical::mlp_norm_weight: w.mlp_norm_weight = std::move(a); return;
    case Canonical::mlp_norm_bias: w.mlp_norm_bias = std::move(a); return;
    case Canonical::out_norm_weight: w.out_norm_weight = std::move(a); return;
    case Canonical::out_norm_bias: w.out_norm_bias = std::move(a); return;
    case Canonical::fc_in: return linear(w.fc_in);
    case Canonical::fc_in_bias: w.fc_in.b = std::move(a); return;
    case Canonical::fc_gate: return linear(w.gate.emplace());
    case Canonical::fc_gate_bias: w.gate->b = std::move(a); return;  // after fc_gate (block_tensors' order)
    case Canonical::fc_out: return linear(w.fc_out);
    case Canonical::fc_out_bias: w.fc_out.b = std::move(a); return;
    default: return;  // not a block tensor
    }
}

}  // namespace

template <class T>
BlockWeights<T> load_block(const ModelTensors& t, std::size_t layer) {
    BlockWeights<T> w;
    w.attention = load_layer_weights<T>(t.attention[layer]);
    for (const ModelTensor& m : t.blocks[layer])
        put(w, m.spec.feeds.front(), t.files->template read<T>(m.stored.name), m.spec.stored == Stored::conv1d);
    return w;
}

template <class T>
std::optional<Array<T>> load_small(const ModelTensors& t, const std::vector<ModelTensor>& list, Canonical what) {
    const ModelTensor* m = ModelTensors::find(list, what);
    if (!m) return std::nullopt;
    return t.files->template read<T>(m->stored.name);
}

template <class T>
void gather_rows(const ModelTensors& t, const ModelTensor& table, const std::vector<std::size_t>& rows, T* out) {
    const std::size_t e = table.stored.shape[1];
    for (std::size_t i = 0; i < rows.size(); ++i) t.files->read_rows(table.stored.name, rows[i], rows[i] + 1, out + i * e);
}

#define ATTNTRACE_MODEL_TENSORS(T)                                                                              \
    template BlockWeights<T> load_block(const ModelTensors&, std::size_t);                                    \
    template std::optional<Array<T>> load_small(const ModelTensors&, const std::vector<ModelTensor>&, Canonical); \
    template void gather_rows(const ModelTensors&, const ModelTensor&, const std::vector<std::size_t>&, T*);
ATTNTRACE_MODEL_TENSORS(float)
ATTNTRACE_MODEL_TENSORS(double)

}  // namespace attntrace
