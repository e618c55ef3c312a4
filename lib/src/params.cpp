// Multi-head attention parameters (params.hpp): reading them from a .safetensors file, a JSON
// object or a directory of NAME.npy, resolving the naming scheme, checking every shape, the seeded
// random init, and PyTorch's state_dict names for --save-params.
//
// Legend: Eq/Ek/Ev query/key/value input dims, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim.
#include "attntrace/params.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "attntrace/errors.hpp"
#include "attntrace/file_bytes.hpp"
#include "attntrace/json_tensor.hpp"
#include "attntrace/random.hpp"
#include "attntrace/safetensors.hpp"
#include "attntrace/sniff.hpp"
#include "attntrace/tensor_io.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

template <class T>
using Tensors = std::map<std::string, Array<T>>;

constexpr int max_json_depth = 65;       // the name object, then parse_json_tensor's 64 levels
constexpr std::size_t names_shown = 8;   // names listed in a "names present" message

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw InputError(source + ": " + what);
}

[[noreturn]] void fail_shape(const std::string& source, const std::string& what) {
    throw ShapeError(source + ": " + what);
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
    if (s.size() < suffix.size()) return false;
    return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

// "a, b, c and 5 more"
std::string name_list(const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < names_shown; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > names_shown) out += " and " + std::to_string(names.size() - names_shown) + " more";
    return out;
}

// ---- reading the source -------------------------------------------------------------------------

template <class T>
Tensors<T> read_npy_directory(const std::string& path) {
    namespace fs = std::filesystem;
    Tensors<T> out;
    std::error_code ec;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path file = it->path();
        if (file.extension() != ".npy" || !it->is_regular_file(ec)) continue;
        out.emplace(file.stem().string(), load_tensor<T>(file.string()).array);
    }
    if (ec) fail(path, ec.message());
    if (out.empty()) fail(path, "no NAME.npy files in the directory");
    return out;
}

// An object of name -> tensor, each tensor in any form parse_json_tensor reads (nested arrays, or
// {"shape", "dtype", "data"}).
template <class T>
Tensors<T> parse_json_params(std::string_view bytes, const std::string& path) {
    std::set<std::string> seen;
    auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= max_json_depth) {
            fail(path, "JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
        }
        if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second) {
            fail(path, "tensor '" + parsed.get<std::string>() + "' appears twice");
        }
        return true;
    };
    json root;
    try {
        root = json::parse(bytes.begin(), bytes.end(), guard);
    } catch (const json::exception& e) {
        const std::string what = e.what();
        const std::size_t bracket = what.find("] ");
        fail(path, "invalid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
    }
    if (!root.is_object()) fail(path, "expected a JSON object of name -> nested arrays");
    Tensors<T> out;
    for (const auto& [name, value] : root.items()) {
        out.emplace(name, parse_json_tensor<T>(value.dump(), path + ": tensor '" + name + "'").array);
    }
    return out;
}

template <class T>
Tensors<T> read_source(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return read_npy_directory<T>(path);
    const FileBytes file = FileBytes::open(path);
    const std::string_view bytes = file.bytes();
    if (ends_with_ci(path, ".safetensors")) return parse_safetensors<T>(bytes, path);
    if (ends_with_ci(path, ".json")) return parse_json_params<T>(bytes, path);
    const Sniffed format = sniff_format(bytes, bytes.size());
    if (format == Sniffed::safetensors) return parse_safetensors<T>(bytes, path);
    if (format == Sniffed::json && bytes[bytes.find_first_not_of(" \t\r\n")] == '{') return parse_json_params<T>(bytes, path);
    fail(path, "not a .safetensors file, a JSON object of name -> nested arrays, or a directory of NAME.npy files");
}

// ---- naming schemes -----------------------------------------------------------------------------

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
    if (!prefix.empty()) message += " after --prefix '" + prefix + "'";
    message += " (names present: " + (present.empty() ? std::string("none") : name_list(present)) + ")";
    // a checkpoint's layer: "encoder.layers.0.self_attn.in_proj_weight" wants --prefix
    for (const std::string& name : present) {
        for (const SchemeTrigger& t : triggers) {
            const std::string_view n = name, suffix = t.name;
            if (n.size() > suffix.size() && n.ends_with(suffix)) {
                message += "; to use names under a prefix, pass --prefix " +
                           name.substr(0, name.size() - suffix.size());
                fail(source, message);
            }
        }
    }
    fail(source, message);
}

// ---- shape checks -------------------------------------------------------------------------------

}  // namespace

void check_head_counts(const MhaDims& dims) {
    if (dims.heads == 0) throw UsageError("heads: must be at least 1 (got 0)");
    if (dims.kv_heads == 0) throw UsageError("kv heads: must be at least 1 (got 0)");
    if (dims.heads % dims.kv_heads != 0) {
        const std::string h = std::to_string(dims.heads), g = std::to_string(dims.kv_heads);
        throw UsageError("kv heads: " + h + " query heads cannot share " + g + " kv heads (" + h + " % " + g +
                         " != 0)");
    }
}

namespace {

std::string sym(const char* name, std::size_t value) { return std::string(name) + "=" + std::to_string(value); }

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

// What each field is called in messages; a block of torch's fused tensors says which rows.
struct Labels {
    std::string w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o;
};

template <class T>
Labels labels(const MhaParams<T>& p) {
    Labels l;
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

// "W_k.weight: shape (6, 5) but expected (6, 7) = (G*P, Ek) with G=2, P=3, Ek=7"
template <class T>
[[noreturn]] void fail_expected(const std::string& source, const std::string& label, const Array<T>& a,
                                const std::string& expected, const std::string& form, const std::string& symbols,
                                const std::string& why = "") {
    fail_shape(source, label + ": shape " + shape_string(a.shape()) + " but expected " + expected + " = " + form +
                           " with " + symbols + why);
}

// A weight (rows, cols) whose rows are COUNT heads of a per-head size, and whose cols are DIM:
// returns the per-head size. COUNT_SYM/SIZE_SYM/DIM_SYM name them ("H", "P", "Eq").
template <class T>
std::size_t check_heads_weight(const std::string& source, const std::string& label, const Array<T>& w,
                               std::size_t count, std::size_t dim, const char* count_sym, const char* size_sym,
                               const char* dim_sym) {
    const std::string form = std::string("(") + count_sym + "*" + size_sym + ", " + dim_sym + ")";
    const std::string symbols = sym(count_sym, count) + ", " + sym(dim_sym, dim);
    if (w.dimension() != 2) {
        fail_shape(source, label + ": shape " + shape_string(w.shape()) + " but expected 2-D " + form + " with " + symbols);
    }
    const std::size_t r = w.shape()[0];
    const std::string loose = "(" + std::to_string(count) + "*" + size_sym + ", " + std::to_string(dim) + ")";
    if (r == 0 || r % count != 0) {
        fail_expected(source, label, w, loose, form, symbols,
                      r == 0 ? std::string(": a head needs ") + size_sym + " >= 1 rows"
                             : ": " + std::to_string(r) + " rows are not a multiple of " + sym(count_sym, count));
    }
    const std::size_t size = r / count;
    if (w.shape()[1] != dim) {
        fail_expected(source, label, w, shape_string(Shape{r, dim}), form,
                      sym(count_sym, count) + ", " + sym(size_sym, size) + ", " + sym(dim_sym, dim));
    }
    return size;
}

template <class T>
void check_bias(const std::string& source, const std::string& label, const std::optional<Array<T>>& b,
                std::size_t expected, const std::string& form, const std::string& symbols) {
    if (!b) return;
    if (b->dimension() != 1) {
        fail_shape(source, label + ": shape " + shape_string(b->shape()) + " but expected 1-D " + form + " with " + symbols);
    }
    if (b->size() != expected) fail_expected(source, label, *b, shape_string(Shape{expected}), form, symbols);
}

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
    Tensors<T> all = read_source<T>(path);
    std::vector<std::string> present;
    Tensors<T> kept;  // stripped name -> tensor; names outside the prefix are not considered
    for (auto& [name, array] : all) {
        present.push_back(name);
        if (name.starts_with(prefix)) kept.emplace(name.substr(prefix.size()), std::move(array));
    }
    if (kept.empty() && !prefix.empty()) {
        fail(path, "no tensor name starts with --prefix '" + prefix + "' (names present: " +
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
        fail(path, "no output projection (out_proj.weight / W_o.weight / unifyheads.weight); pass --no-out-proj to "
                   "concatenate the heads without one");
    }
    p.names = names.used();
    p.ignored = names.left();
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
HeadSizes check_mha_params(const MhaParams<T>& p, const MhaDims& dims) {
    check_head_counts(dims);
    const std::size_t H = dims.heads, G = dims.kv_heads;
    const Labels l = labels(p);
    const std::string& src = p.source;

    // w_q (H*P, Eq), w_k (G*P, Ek), w_v (G*Pv, Ev)
    const std::size_t P = check_heads_weight(src, l.w_q, p.w_q, H, dims.query_dim, "H", "P", "Eq");
    const std::string k_symbols = sym("G", G) + ", " + sym("P", P) + ", " + sym("Ek", dims.key_dim);
    if (p.w_k.dimension() != 2) {
        fail_shape(src, l.w_k + ": shape " + shape_string(p.w_k.shape()) + " but expected 2-D (G*P, Ek) with " + k_symbols);
    }
    if (p.w_k.shape()[0] != G * P || p.w_k.shape()[1] != dims.key_dim) {
        fail_expected(src, l.w_k, p.w_k, shape_string(Shape{G * P, dims.key_dim}), "(G*P, Ek)", k_symbols);
    }
    const std::size_t Pv = check_heads_weight(src, l.w_v, p.w_v, G, dims.value_dim, "G", "Pv", "Ev");

    check_bias(src, l.b_q, p.b_q, H * P, "(H*P,)", sym("H", H) + ", " + sym("P", P));
    check_bias(src, l.b_k, p.b_k, G * P, "(G*P,)", sym("G", G) + ", " + sym("P", P));
    check_bias(src, l.b_v, p.b_v, G * Pv, "(G*Pv,)", sym("G", G) + ", " + sym("Pv", Pv));

    HeadSizes sizes{P, Pv, H * Pv};
    if (dims.out_proj && !p.w_o) {
        fail(src, "no output projection (out_proj.weight / W_o.weight / unifyheads.weight); pass --no-out-proj to "
                  "concatenate the heads without one");
    }
    if (p.b_o && !p.w_o) fail(src, l.b_o + " without " + l.w_o);
    if (p.w_o) {
        // w_o (PO, H*Pv)
        const Array<T>& w = *p.w_o;
        const std::string symbols = sym("H", H) + ", " + sym("Pv", Pv);
        if (w.dimension() != 2) {
            fail_shape(src, l.w_o + ": shape " + shape_string(w.shape()) + " but expected 2-D (PO, H*Pv) with " + symbols);
        }
        if (w.shape()[0] == 0 || w.shape()[1] != H * Pv) {
            fail_expected(src, l.w_o, w, "(PO, " + std::to_string(H * Pv) + ")", "(PO, H*Pv)", symbols,
                          w.shape()[0] == 0 ? ", PO >= 1" : "");
        }
        sizes.out_dim = w.shape()[0];
        check_bias(src, l.b_o, p.b_o, sizes.out_dim, "(PO,)", sym("PO", sizes.out_dim) + ", the rows of " + l.w_o);
    }
    return sizes;
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
    template MhaParams<T> random_mha_params<T>(const MhaDims&, const HeadSizes&, bool, std::uint64_t);            \
    template HeadSizes check_mha_params<T>(const MhaParams<T>&, const MhaDims&);                                  \
    template std::map<std::string, Array<T>> torch_state_dict<T>(const MhaParams<T>&);
ATTNTRACE_INSTANTIATE(float)
ATTNTRACE_INSTANTIATE(double)
#undef ATTNTRACE_INSTANTIATE

}  // namespace attntrace
