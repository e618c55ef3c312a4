// Multi-head attention parameters (params.hpp): loading them (params_files.hpp reads the file,
// param_names.hpp maps the names, params_check.hpp checks the shapes), the seeded random init, and
// PyTorch's state_dict names for --save-params.
//
// Legend: Eq/Ek/Ev query/key/value input dims, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim.
#include "attntrace/attention/params.hpp"

#include <algorithm>
#include <cmath>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/param_names.hpp"
#include "attntrace/attention/params_check.hpp"
#include "attntrace/attention/params_files.hpp"
#include "attntrace/tensor/random.hpp"

namespace attntrace {

namespace {

// A checked product of sizes; WHAT names the size for the message.
std::size_t times(std::size_t a, std::size_t b, const std::string& what) {
    std::size_t out;
    if (__builtin_mul_overflow(a, b, &out)) throw UsageError(what + ": " + std::to_string(a) + " * " + std::to_string(b) + " does not fit in 64 bits");
    return out;
}

// xavier_uniform_: U(-a, a), a = sqrt(6 / (fan_in + fan_out)), drawn row-major from RNG.
template <class T>
Array<T> xavier_uniform(Rng& rng, std::size_t rows, std::size_t cols) {
    times(rows, cols, "random init");
    const double a = std::sqrt(6.0 / static_cast<double>(rows + cols));
    Array<T> w = Array<T>::from_shape({rows, cols});
    for (T& v : w) v = static_cast<T>(rng.uniform(-a, a));
    return w;
}

template <class T>
Array<T> zeros(std::size_t n) {
    Array<T> out = Array<T>::from_shape({n});
    std::fill(out.begin(), out.end(), T(0));
    return out;
}

}  // namespace

template <class T>
MhaParams<T> load_mha_params(const std::string& path, const std::string& prefix, const MhaDims& dims) {
    return load_mha_params(read_param_tensors<T>(path), path, prefix, dims);
}

template <class T>
MhaParams<T> load_mha_params(std::map<std::string, Array<T>> tensors, const std::string& path,
                             const std::string& prefix, const MhaDims& dims) {
    MhaParams<T> p = map_param_names(std::move(tensors), path, prefix, dims);
    check_mha_params(p, dims);
    return p;
}

template <class T>
MhaParams<T> random_mha_params(const MhaDims& dims, const HeadSizes& sizes, bool bias, std::uint64_t seed) {
    check_head_counts(dims);
    if (sizes.head_dim == 0) throw UsageError("head dim: must be at least 1 (got 0)");
    if (sizes.value_head_dim == 0) throw UsageError("value head dim: must be at least 1 (got 0)");
    if (dims.out_proj && sizes.out_dim == 0) throw UsageError("out dim: must be at least 1 (got 0)");
    const std::size_t H = dims.heads, G = dims.kv_heads;
    const std::size_t hp = times(H, sizes.head_dim, "head dim"), gp = times(G, sizes.head_dim, "head dim");
    const std::size_t gpv = times(G, sizes.value_head_dim, "value head dim");
    const std::size_t hpv = times(H, sizes.value_head_dim, "value head dim");

    MhaParams<T> p;
    p.scheme = "random";
    p.source = "random init (seed " + std::to_string(seed) + ")";
    // PyTorch's _reset_parameters: xavier_uniform_ on each projection, zero biases. Two documented
    // differences: torch draws its fused (3E, E) in_proj_weight as one matrix (a = sqrt(6 / 4E)),
    // we draw each (rows, cols) matrix with its own fan_in + fan_out; and torch leaves
    // out_proj.weight at nn.Linear's kaiming init, we draw it with xavier as well.
    Rng rng(seed);
    p.w_q = xavier_uniform<T>(rng, hp, dims.query_dim);
    p.w_k = xavier_uniform<T>(rng, gp, dims.key_dim);
    p.w_v = xavier_uniform<T>(rng, gpv, dims.value_dim);
    if (dims.out_proj) p.w_o = xavier_uniform<T>(rng, sizes.out_dim, hpv);
    if (bias) {
        p.b_q = zeros<T>(hp);
        p.b_k = zeros<T>(gp);
        p.b_v = zeros<T>(gpv);
        if (dims.out_proj) p.b_o = zeros<T>(sizes.out_dim);
    }
    return p;
}

template <class T>
std::map<std::string, Array<T>> torch_state_dict(const MhaParams<T>& p) {
    std::map<std::string, Array<T>> out;
    out["q_proj_weight"] = p.w_q;
    out["k_proj_weight"] = p.w_k;
    out["v_proj_weight"] = p.w_v;
    // torch's bias=True has both in_proj_bias and out_proj.bias: any bias writes both, the missing
    // parts as zeros, so the dict loads into nn.MultiheadAttention(bias=True)
    const bool any_bias = p.b_q || p.b_k || p.b_v || p.b_o;
    if (any_bias) {
        const std::size_t rq = p.w_q.shape()[0], rk = p.w_k.shape()[0], rv = p.w_v.shape()[0];
        Array<T> b = zeros<T>(rq + rk + rv);
        if (p.b_q) std::copy(p.b_q->begin(), p.b_q->end(), b.begin());
        if (p.b_k) std::copy(p.b_k->begin(), p.b_k->end(), b.begin() + static_cast<std::ptrdiff_t>(rq));
        if (p.b_v) std::copy(p.b_v->begin(), p.b_v->end(), b.begin() + static_cast<std::ptrdiff_t>(rq + rk));
        out["in_proj_bias"] = std::move(b);
    }
    if (p.w_o) {
        out["out_proj.weight"] = *p.w_o;
        if (any_bias) out["out_proj.bias"] = p.b_o ? *p.b_o : zeros<T>(p.w_o->shape()[0]);
    }
    if (p.bias_k) out["bias_k"] = *p.bias_k;  // add_bias_kv=True
    if (p.bias_v) out["bias_v"] = *p.bias_v;
    return out;
}

#define ATTNTRACE_INSTANTIATE(T)                                                                                   \
    template MhaParams<T> load_mha_params<T>(const std::string&, const std::string&, const MhaDims&);            \
    template MhaParams<T> load_mha_params<T>(std::map<std::string, Array<T>>, const std::string&,                 \
                                             const std::string&, const MhaDims&);                               \
    template MhaParams<T> random_mha_params<T>(const MhaDims&, const HeadSizes&, bool, std::uint64_t);            \
    template std::map<std::string, Array<T>> torch_state_dict<T>(const MhaParams<T>&);
ATTNTRACE_INSTANTIATE(float)
ATTNTRACE_INSTANTIATE(double)
#undef ATTNTRACE_INSTANTIATE

}  // namespace attntrace
