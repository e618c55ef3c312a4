// The naming schemes of attention parameters (param_names.hpp): prefix, scheme, names -> fields,
// ignored names, and the fields' names in messages.
//
// Legend: Eq/Ek/Ev query/key/value input dims, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim.
#include "attntrace/attention/param_names.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

template <class T>
using Tensors = std::map<std::string, Array<T>>;  // name -> array of any shape

constexpr std::size_t names_shown = 8;  // names listed in a "names present" message

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw InputError(source + ": " + what);
}

[[noreturn]] void fail_shape(const std::string& source, const std::string& what) {
    throw ShapeError(source + ": " + what);
}

// "a, b, c and 5 more"
std::string name_list(const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < names_shown; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > names_shown) out += " and " + std::to_string(names.size() - names_shown) + " more";
    return out;
}

// The stripped names of one source, taken one by one into the parameters; what is left is ignored.
template <class T>
class Names {
public:
    Names(Tensors<T> tensors, std::string source, std::string prefix, std::string scheme, std::string trigger)
        : tensors_(std::move(tensors)), source_(std::move(source)), prefix_(std::move(prefix)),
          scheme_(std::move(scheme)), trigger_(std::move(trigger)) {}

    bool has(const std::string& name) const { return tensors_.count(name) != 0; }

    std::optional<Array<T>> take(const std::string& name) {
        const auto it = tensors_.find(name);
        if (it == tensors_.end()) return std::nullopt;
        used_.push_back(prefix_ + name);
        Array<T> out = std::move(it->second);
        tensors_.erase(it);
        return out;
    }

    // A name the scheme needs; REQUIRED lists them all for the message.
    Array<T> require(const std::string& name, const std::string& required) {
        std::optional<Array<T>> out = take(name);
        if (!out) {
            fail(source_, "missing '" + prefix_ + name + "': the " + scheme_ + " names ('" + prefix_ + trigger_ +
                              "' is present) need " + required);
        }
        return std::move(*out);
    }

    std::vector<std::string> used() const {
        std::vector<std::string> out = used_;
        std::sort(out.begin(), out.end());
        return out;
    }
    std::vector<std::string> left() const {
        std::vector<std::string> out;
        for (const auto& [name, array] : tensors_) out.push_back(prefix_ + name);
        return out;
    }

private:
    Tensors<T> tensors_;
    std::string source_, prefix_, scheme_, trigger_;
    std::vector<std::string> used_;
};

// Rows [BEGIN, END) of a row-major 1-D or 2-D array.
template <class T>
Array<T> rows(const Array<T>& a, std::size_t begin, std::size_t end) {
    Shape shape = shape_of(a);
    const std::size_t width = a.dimension() == 2 ? shape[1] : 1;
    shape[0] = end - begin;
    Array<T> out = Array<T>::from_shape(shape);
    std::copy(a.data() + begin * width, a.data() + end * width, out.data());
    return out;
}

template <class T>
void require_rank(const std::string& source, const std::string& label, const Array<T>& a, std::size_t rank,
                  const std::string& form) {
    if (a.dimension() != rank) {
        fail_shape(source, label + ": shape " + shape_string(a.shape()) + " but expected " +
                               (rank == 2 ? "2-D " : "1-D ") + form);
    }
}

template <class T>
void resolve_torch(Names<T>& names, MhaParams<T>& p, const MhaDims& dims) {
    p.bias_k = names.take("bias_k");  // add_bias_kv=True; shapes checked by check_bias_kv (mha.cpp)
    p.bias_v = names.take("bias_v");
    if (std::optional<Array<T>> w = names.take("in_proj_weight")) {
        require_rank(p.source, "in_proj_weight", *w, 2, "(3E, E)");
        const std::size_t r = w->shape()[0];
        // Grouped-query attention: H*P rows of q, then G*P of k and G*P of v (P = r / (H + 2G)).
        const bool grouped = dims.kv_heads != 0 && dims.kv_heads != dims.heads;
        const std::size_t parts = grouped ? dims.heads + 2 * dims.kv_heads : 3;
        if (r % parts != 0) {
            fail_shape(p.source, "in_proj_weight: shape " + shape_string(w->shape()) + " but expected " +
                                     (grouped ? "(H*P + 2*G*P, E) with H=" + std::to_string(dims.heads) +
                                                    ", G=" + std::to_string(dims.kv_heads)
                                              : std::string("(3E, E)")) +
                                     ": " + std::to_string(r) + " rows do not split into q, k and v blocks");
        }
        const std::size_t nq = grouped ? r / parts * dims.heads : r / 3;
        const std::size_t nk = grouped ? r / parts * dims.kv_heads : r / 3;
        p.w_q = rows(*w, 0, nq);
        p.w_k = rows(*w, nq, nq + nk);
        p.w_v = rows(*w, nq + nk, r);
        p.fused_in_proj = true;
    } else {
        const std::string required = "q_proj_weight, k_proj_weight and v_proj_weight";
        p.w_q = names.require("q_proj_weight", required);
        p.w_k = names.require("k_proj_weight", required);
        p.w_v = names.require("v_proj_weight", required);
        require_rank(p.source, "q_proj_weight", p.w_q, 2, "(H*P, Eq)");
        require_rank(p.source, "k_proj_weight", p.w_k, 2, "(G*P, Ek)");
        require_rank(p.source, "v_proj_weight", p.w_v, 2, "(G*Pv, Ev)");
    }
    if (std::optional<Array<T>> b = names.take("in_proj_bias")) {
        const std::size_t rq = p.w_q.shape()[0], rk = p.w_k.shape()[0], rv = p.w_v.shape()[0];
        if (b->dimension() != 1 || b->size() != rq + rk + rv) {
            fail_shape(p.source, "in_proj_bias: shape " + shape_string(b->shape()) + " but expected (" +
                                     std::to_string(rq + rk + rv) + ",) = (H*P + G*P + G*Pv,), the rows of the q, k "
                                     "and v weights (" + std::to_string(rq) + " + " + std::to_string(rk) +
                                     " + " + std::to_string(rv) + ")");
        }
        p.b_q = rows(*b, 0, rq);
        p.b_k = rows(*b, rq, rq + rk);
        p.b_v = rows(*b, rq + rk, rq + rk + rv);
    }
    if (dims.out_proj) {
        p.w_o = names.take("out_proj.weight");
        p.b_o = names.take("out_proj.bias");
    }
}

// d2l/atcold (W_q, W_k, W_v, W_o or W_h) and Bloem (toqueries, tokeys, tovalues, unifyheads): one
// nn.Linear per projection, NAME.weight with an optional NAME.bias.
template <class T>
void resolve_linears(Names<T>& names, MhaParams<T>& p, const MhaDims& dims, const std::array<const char*, 3>& qkv,
                     std::initializer_list<const char*> outs) {
    const std::string required = std::string(qkv[0]) + ".weight, " + qkv[1] + ".weight and " + qkv[2] + ".weight";
    p.w_q = names.require(std::string(qkv[0]) + ".weight", required);
    p.w_k = names.require(std::string(qkv[1]) + ".weight", required);
    p.w_v = names.require(std::string(qkv[2]) + ".weight", required);
    p.b_q = names.take(std::string(qkv[0]) + ".bias");
    p.b_k = names.take(std::string(qkv[1]) + ".bias");
    p.b_v = names.take(std::string(qkv[2]) + ".bias");
    if (!dims.out_proj) return;
    for (const char* out : outs) {
        if (names.has(std::string(out) + ".weight")) {
            p.w_o = names.take(std::string(out) + ".weight");
            p.b_o = names.take(std::string(out) + ".bias");
            return;
        }
    }
}

// The names that make a scheme, in the order they are tried.
struct SchemeTrigger {
    const char* name;
    const char* scheme;
};
constexpr std::array<SchemeTrigger, 4> triggers{{
    {"in_proj_weight", "torch"},
    {"q_proj_weight", "torch"},
    {"W_q.weight", "d2l"},
    {"toqueries.weight", "bloem"},
}};

[[noreturn]] void fail_no_scheme(const std::string& source, const std::vector<std::string>& present,
                                 const std::string& prefix) {
    std::string message = "no attention parameters found: expected in_proj_weight, q_proj_weight, W_q.weight or "
                          "toqueries.weight";
    if (!prefix.empty()) message += " after the prefix '" + prefix + "'";
    message += " (names present: " + (present.empty() ? std::string("none") : name_list(present)) + ")";
    // a checkpoint's layer: "encoder.layers.0.self_attn.in_proj_weight" wants a prefix
    for (const std::string& name : present) {
        for (const SchemeTrigger& t : triggers) {
            const std::string_view n = name, suffix = t.name;
            if (n.size() > suffix.size() && n.ends_with(suffix)) {
                message += "; to use names under a prefix, give the prefix " +
                           name.substr(0, name.size() - suffix.size());
                fail(source, message);
            }
        }
    }
    fail(source, message);
}

// The name in P.names that ends with one of CANDIDATES (the file's spelling, prefix included), else
// the first candidate.
template <class T>
std::string spelled(const MhaParams<T>& p, std::initializer_list<std::string_view> candidates) {
    for (std::string_view c : candidates) {
        for (const std::string& n : p.names) {
            if (std::string_view(n).ends_with(c)) return n;
        }
    }
    return std::string(*candidates.begin());
}

}  // namespace

template <class T>
MhaParams<T> map_param_names(Tensors<T> all, const std::string& path, const std::string& prefix, const MhaDims& dims) {
    std::vector<std::string> present;
    Tensors<T> kept;  // stripped name -> tensor; names outside the prefix are not considered
    for (auto& [name, array] : all) {
        present.push_back(name);
        if (name.starts_with(prefix)) kept.emplace(name.substr(prefix.size()), std::move(array));
    }
    if (kept.empty() && !prefix.empty()) {
        fail(path, "no tensor name starts with the prefix '" + prefix + "' (names present: " +
                       (present.empty() ? std::string("none") : name_list(present)) + ")");
    }
    const SchemeTrigger* trigger = nullptr;
    for (const SchemeTrigger& t : triggers) {
        if (kept.count(t.name)) {
            trigger = &t;
            break;
        }
    }
    if (!trigger) fail_no_scheme(path, present, prefix);

    MhaParams<T> p;
    p.scheme = trigger->scheme;
    p.source = path;
    Names<T> names(std::move(kept), path, prefix, p.scheme, trigger->name);
    if (p.scheme == "torch") {
        resolve_torch(names, p, dims);
    } else if (p.scheme == "d2l") {
        resolve_linears(names, p, dims, {"W_q", "W_k", "W_v"}, {"W_o", "W_h"});  // atcold: W_h
    } else {
        resolve_linears(names, p, dims, {"toqueries", "tokeys", "tovalues"}, {"unifyheads"});
    }
    if (dims.out_proj && !p.w_o) {
        fail(path, "no output projection (out_proj.weight / W_o.weight / unifyheads.weight); turn the output "
                   "projection off to concatenate the heads without one");
    }
    p.names = names.used();
    p.ignored = names.left();
    return p;
}

template <class T>
ParamLabels param_labels(const MhaParams<T>& p) {
    ParamLabels l;
    if (p.scheme == "d2l" || p.scheme == "bloem") {
        const bool d2l = p.scheme == "d2l";
        l.w_q = spelled(p, {d2l ? "W_q.weight" : "toqueries.weight"});
        l.w_k = spelled(p, {d2l ? "W_k.weight" : "tokeys.weight"});
        l.w_v = spelled(p, {d2l ? "W_v.weight" : "tovalues.weight"});
        l.b_q = spelled(p, {d2l ? "W_q.bias" : "toqueries.bias"});
        l.b_k = spelled(p, {d2l ? "W_k.bias" : "tokeys.bias"});
        l.b_v = spelled(p, {d2l ? "W_v.bias" : "tovalues.bias"});
        l.w_o = d2l ? spelled(p, {"W_o.weight", "W_h.weight"}) : spelled(p, {"unifyheads.weight"});
        l.b_o = d2l ? spelled(p, {"W_o.bias", "W_h.bias"}) : spelled(p, {"unifyheads.bias"});
        return l;
    }
    // torch, and the random init, which --save-params writes under torch's names
    auto block = [](const std::string& name, std::size_t begin, std::size_t size) {
        return name + " [" + std::to_string(begin) + ":" + std::to_string(begin + size) + "]";
    };
    auto rows_of = [](const Array<T>& a) { return a.dimension() >= 1 ? a.shape()[0] : std::size_t{1}; };
    if (p.fused_in_proj) {
        const std::string fused = spelled(p, {"in_proj_weight"});
        const std::size_t rq = rows_of(p.w_q), rk = rows_of(p.w_k);
        l.w_q = block(fused, 0, rq);
        l.w_k = block(fused, rq, rk);
        l.w_v = block(fused, rq + rk, rows_of(p.w_v));
    } else {
        l.w_q = spelled(p, {"q_proj_weight"});
        l.w_k = spelled(p, {"k_proj_weight"});
        l.w_v = spelled(p, {"v_proj_weight"});
    }
    const std::string bias = spelled(p, {"in_proj_bias"});
    const std::size_t bq = p.b_q ? p.b_q->size() : 0, bk = p.b_k ? p.b_k->size() : 0;
    l.b_q = block(bias, 0, bq);
    l.b_k = block(bias, bq, bk);
    l.b_v = block(bias, bq + bk, p.b_v ? p.b_v->size() : 0);
    l.w_o = spelled(p, {"out_proj.weight"});
    l.b_o = spelled(p, {"out_proj.bias"});
    return l;
}

#define ATTNTRACE_INSTANTIATE(T)                                                                              \
    template MhaParams<T> map_param_names<T>(Tensors<T>, const std::string&, const std::string&, const MhaDims&); \
    template ParamLabels param_labels<T>(const MhaParams<T>&);
ATTNTRACE_INSTANTIATE(float)
ATTNTRACE_INSTANTIATE(double)
#undef ATTNTRACE_INSTANTIATE

}  // namespace attntrace
