// Checking attention parameters' shapes (params_check.hpp): head counts, each weight and bias
// against the sizes, messages that name the tensor in the file's spelling (param_names.hpp).
//
// Legend: Eq/Ek/Ev query/key/value input dims, H heads, G kv heads, P head dim, Pv value head dim,
// PO output dim.
#include "attntrace/attention/params_check.hpp"

#include <optional>
#include <string>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/param_names.hpp"

namespace attntrace {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw InputError(source + ": " + what);
}

[[noreturn]] void fail_shape(const std::string& source, const std::string& what) {
    throw ShapeError(source + ": " + what);
}

std::string sym(const char* name, std::size_t value) { return std::string(name) + "=" + std::to_string(value); }

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
    const std::string loose = std::string("(") + std::to_string(count) + "*" + size_sym + ", " + std::to_string(dim) + ")";
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

// The stacked in-projection read in place (MhaParams::in_proj): parts of H*P, G*P and G*Pv rows
// over the one input of self-attention, E = Eq = Ek = Ev. Returns P and Pv.
template <class T>
std::pair<std::size_t, std::size_t> check_in_proj(const MhaParams<T>& p, const MhaDims& dims) {
    const StackedInProj<T>& w = *p.in_proj;
    const std::size_t H = dims.heads, G = dims.kv_heads;
    const bool fits = w.in == dims.query_dim && w.in == dims.key_dim && w.in == dims.value_dim && w.q_rows > 0 &&
                      w.q_rows % H == 0 && w.k_rows == G * (w.q_rows / H) && w.v_rows > 0 && w.v_rows % G == 0;
    if (!fits)
        fail_shape(p.source, "stacked in-projection of " + std::to_string(w.q_rows) + " + " + std::to_string(w.k_rows) +
                                 " + " + std::to_string(w.v_rows) + " rows over " + std::to_string(w.in) +
                                 " inputs but expected (H*P + G*P + G*Pv, E) with " + sym("H", H) + ", " + sym("G", G) +
                                 ", E=" + std::to_string(dims.query_dim) + " (the query, key and value one input)");
    return {w.q_rows / H, w.v_rows / G};
}

// w_q (H*P, Eq), w_k (G*P, Ek), w_v (G*Pv, Ev): returns P and Pv.
template <class T>
std::pair<std::size_t, std::size_t> check_projections(const MhaParams<T>& p, const ParamLabels& l, const MhaDims& dims) {
    const std::size_t H = dims.heads, G = dims.kv_heads;
    const std::string& src = p.source;
    const std::size_t P = check_heads_weight(src, l.w_q, p.w_q, H, dims.query_dim, "H", "P", "Eq");
    const std::string k_symbols = sym("G", G) + ", " + sym("P", P) + ", " + sym("Ek", dims.key_dim);
    if (p.w_k.dimension() != 2) {
        fail_shape(src, l.w_k + ": shape " + shape_string(p.w_k.shape()) + " but expected 2-D (G*P, Ek) with " + k_symbols);
    }
    if (p.w_k.shape()[0] != G * P || p.w_k.shape()[1] != dims.key_dim) {
        fail_expected(src, l.w_k, p.w_k, shape_string(Shape{G * P, dims.key_dim}), "(G*P, Ek)", k_symbols);
    }
    return {P, check_heads_weight(src, l.w_v, p.w_v, G, dims.value_dim, "G", "Pv", "Ev")};
}

// W_o read in place (MhaParams::w_o_in_place), (PO, H*Pv) with its bias b_o (PO): SIZES with PO.
template <class T>
HeadSizes check_w_o_in_place(const MhaParams<T>& p, HeadSizes sizes) {
    const WeightInPlace<T>& w = *p.w_o_in_place;
    if (w.out == 0 || w.in != sizes.out_dim || (p.b_o && (p.b_o->dimension() != 1 || p.b_o->size() != w.out)))
        fail_shape(p.source, "output projection of " + std::to_string(w.out) + " x " + std::to_string(w.in) +
                                 (p.b_o ? " with a bias of shape " + shape_string(p.b_o->shape()) : std::string()) +
                                 " but expected (PO, H*Pv) with H*Pv=" + std::to_string(sizes.out_dim) + " and a bias (PO)");
    sizes.out_dim = w.out;
    return sizes;
}

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

template <class T>
HeadSizes check_mha_params(const MhaParams<T>& p, const MhaDims& dims) {
    check_head_counts(dims);
    const std::size_t H = dims.heads, G = dims.kv_heads;
    const ParamLabels l = param_labels(p);
    const std::string& src = p.source;

    const auto [P, Pv] = p.in_proj ? check_in_proj(p, dims) : check_projections(p, l, dims);

    check_bias(src, l.b_q, p.b_q, H * P, "(H*P,)", sym("H", H) + ", " + sym("P", P));
    check_bias(src, l.b_k, p.b_k, G * P, "(G*P,)", sym("G", G) + ", " + sym("P", P));
    check_bias(src, l.b_v, p.b_v, G * Pv, "(G*Pv,)", sym("G", G) + ", " + sym("Pv", Pv));

    HeadSizes sizes{P, Pv, H * Pv};
    if (p.w_o_in_place) return check_w_o_in_place(p, sizes);  // (none of the files' names to spell)
    if (dims.out_proj && !p.w_o) {
        fail(src, "no output projection (out_proj.weight / W_o.weight / unifyheads.weight); turn the output "
                  "projection off to concatenate the heads without one");
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

template HeadSizes check_mha_params<float>(const MhaParams<float>&, const MhaDims&);
template HeadSizes check_mha_params<double>(const MhaParams<double>&, const MhaDims&);

}  // namespace attntrace
