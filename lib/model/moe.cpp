// The sparse mixture-of-experts MLP (moe.hpp): route, then each chosen expert on its rows.
#include "moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attntrace/model/activations.hpp"
#include "products.hpp"

namespace attntrace {

LayerRouting route(const double* logits, std::size_t rows, std::size_t experts, std::size_t k, bool normalize) {
    LayerRouting r;
    r.rows = rows, r.k = k, r.experts = experts;
    r.chosen.resize(rows * k), r.weights.resize(rows * k), r.tokens.assign(experts, 0);
    std::vector<double> p(experts);
    std::vector<std::uint32_t> order(experts);
    for (std::size_t i = 0; i < rows; ++i) {
        const double* z = logits + i * experts;
        const double max = *std::max_element(z, z + experts);
        double sum = 0;
        for (std::size_t x = 0; x < experts; ++x) sum += p[x] = std::exp(z[x] - max);  // softmax over experts
        for (double& v : p) v /= sum;
        std::iota(order.begin(), order.end(), 0u);
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                          [&](std::uint32_t a, std::uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        double top = 0;
        for (std::size_t j = 0; j < k; ++j) top += p[order[j]];
        for (std::size_t j = 0; j < k; ++j) {
            r.chosen[i * k + j] = order[j];
            r.weights[i * k + j] = normalize ? p[order[j]] / top : p[order[j]];
            ++r.tokens[order[j]];
        }
    }
    return r;
}

namespace {

// A gated MLP's weights as the products read them: gate (I, E), up (I, E), down (E, I).
template <class T>
struct GatedViews {
    WeightView<T> gate, up, down;
};

// OUT (rows, E) := down(act(gate IN) * up IN) + BETA · OUT; H and U (rows, I) scratch.
template <class T>
void gated_mlp(Activation act, const GatedViews<T>& g, const T* in, std::size_t rows, T* out, T beta,
               std::vector<T>& h, std::vector<T>& u, std::size_t threads) {
    const std::size_t inter = g.gate.out, e = g.down.out;
    h.resize(rows * inter), u.resize(rows * inter);
    linear(in, rows, g.gate, h.data(), inter, T(0), threads);
    linear(in, rows, g.up, u.data(), inter, T(0), threads);
    activate_gated(act, h.data(), inter, u.data(), inter, rows, inter, nullptr, nullptr);
    linear(h.data(), rows, g.down, out, e, beta, threads);
}

// One expert's three weights, read in place or converted into BUFFERS (reused), and how to drop them.
template <class T>
class ExpertWeights {
public:
    ExpertWeights(const ModelTensors& t, const std::vector<ModelTensor>& tensors, std::vector<std::vector<T>>& buffers)
        : t_(t), tensors_(tensors) {
        WeightView<T>* views[] = {&views_.gate, &views_.up, &views_.down};
        for (std::size_t i = 0; i < 3; ++i) {
            const ModelTensor& m = tensors[i];
            // the source's staged copies would pile up until the layer ends: its buffers instead
            const T* w = t.files->copies_in_place(m.stored.name) ? nullptr : t.files->in_place<T>(m.stored.name);
            if (!w) {
                buffers[i].resize(m.stored.shape[0] * m.stored.shape[1]);
                t.files->read_into(m.stored.name, buffers[i].data());
                w = buffers[i].data();
            }
            *views[i] = {w, m.stored.shape[0], m.stored.shape[1], false, nullptr, nullptr};
        }
    }
    ~ExpertWeights() {
        for (const ModelTensor& m : tensors_) t_.files->release(m.stored.name);
    }
    ExpertWeights(const ExpertWeights&) = delete;
    ExpertWeights& operator=(const ExpertWeights&) = delete;
    const GatedViews<T>& views() const { return views_; }

private:
    const ModelTensors& t_;
    const std::vector<ModelTensor>& tensors_;
    GatedViews<T> views_;
};

// The router logits (R, X) of IN, in double.
template <class T>
std::vector<double> router_logits(const Linear<T>& router, const T* in, std::size_t rows, std::size_t threads) {
    const std::size_t experts = router.out();
    std::vector<T> z(rows * experts);
    linear(in, rows, view_of(router), z.data(), experts, T(0), threads);
    return {z.begin(), z.end()};
}

// OUT += sigmoid(shared_expert_gate IN) * shared_expert(IN), row by row (Qwen2MoeSparseMoeBlock).
template <class T>
void shared_expert(const ModelConfig& m, const BlockWeights<T>& w, const T* in, std::size_t rows, T* out,
                   std::vector<T>& h, std::vector<T>& u, std::size_t threads) {
    const std::size_t e = m.hidden;
    std::vector<T> y(rows * e), gate(rows);
    gated_mlp(m.activation, {view_of(*w.shared_gate), view_of(*w.shared_up), view_of(*w.shared_down)}, in, rows,
              y.data(), T(0), h, u, threads);
    linear(in, rows, view_of(*w.shared_expert_gate), gate.data(), 1, T(0), threads);
    for (std::size_t i = 0; i < rows; ++i) {
        const T s = T(1) / (T(1) + std::exp(-gate[i]));
        for (std::size_t c = 0; c < e; ++c) out[i * e + c] += s * y[i * e + c];
    }
}

}  // namespace

template <class T>
void moe_mlp(const ModelConfig& m, const BlockWeights<T>& w, const ModelTensors& t, std::size_t layer, const T* in,
             std::size_t rows, T* out, T beta, std::size_t threads, ModelObserver<T>& observer) {
    const MoeConfig& moe = *m.moe;
    const std::size_t e = m.hidden;
    LayerRouting r = route(router_logits(*w.router, in, rows, threads).data(), rows, moe.experts, moe.top_k, moe.normalize);
    r.layer = layer;
    observer.expert_routing(r);
    if (beta == T(0)) std::fill(out, out + rows * e, T(0));
    std::vector<std::vector<T>> buffers(3);
    std::vector<T> x, y, h, u;
    for (std::size_t j = 0; j < moe.experts; ++j) {
        if (r.tokens[j] == 0) continue;  // never read
        std::vector<std::size_t> picked;  // (rows of expert j)
        std::vector<T> weight;
        for (std::size_t i = 0; i < rows * moe.top_k; ++i)
            if (r.chosen[i] == j) picked.push_back(i / moe.top_k), weight.push_back(T(r.weights[i]));
        x.resize(picked.size() * e), y.resize(picked.size() * e);
        for (std::size_t p = 0; p < picked.size(); ++p) std::copy_n(in + picked[p] * e, e, x.data() + p * e);
        const ExpertWeights<T> expert(t, t.experts[layer][j], buffers);
        gated_mlp(m.activation, expert.views(), x.data(), picked.size(), y.data(), T(0), h, u, threads);
        for (std::size_t p = 0; p < picked.size(); ++p)  // index_add_ of the weighted outputs
            for (std::size_t c = 0; c < e; ++c) out[picked[p] * e + c] += weight[p] * y[p * e + c];
    }
    if (moe.shared_intermediate) shared_expert(m, w, in, rows, out, h, u, threads);
}

#define ATTNTRACE_MOE(T)                                                                                        \
    template void moe_mlp(const ModelConfig&, const BlockWeights<T>&, const ModelTensors&, std::size_t, const T*, \
                          std::size_t, T*, T, std::size_t, ModelObserver<T>&);
ATTNTRACE_MOE(float)
ATTNTRACE_MOE(double)

}  // namespace attntrace
