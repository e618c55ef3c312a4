#include "attntrace/check/compare.hpp"

#include <cmath>
#include <limits>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/stats.hpp"

namespace attntrace {

namespace {

void check_tolerance(const char* name, double value) {
    if (!(value >= 0)) {  // also rejects NaN
        throw UsageError(std::string(name) + ": must be a non-negative number, got " +
                         short_number(value));
    }
}

// numpy.isclose(a, b, rtol, atol, equal_nan=False) for one pair.
bool is_close(double a, double b, Tolerance tol) {
    if (std::isfinite(a) && std::isfinite(b)) {
        return std::abs(a - b) <= tol.atol + tol.rtol * std::abs(b);
    }
    return a == b;  // same infinity; NaN never
}

constexpr double inf = std::numeric_limits<double>::infinity();

double abs_diff(double a, double b) {
    if (a == b) return 0;
    return std::isfinite(a) && std::isfinite(b) ? std::abs(a - b) : inf;
}

double rel_diff(double a, double b) {
    if (a == b) return 0;
    if (!std::isfinite(a) || !std::isfinite(b) || b == 0) return inf;
    return std::abs(a - b) / std::abs(b);
}

}  // namespace

Shape unravel_index(std::size_t flat, const Shape& shape) {
    Shape index(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    return index;
}

std::string index_string(const Shape& index) {
    std::string s = "[";
    for (std::size_t d = 0; d < index.size(); ++d) {
        if (d > 0) s += ", ";
        s += std::to_string(index[d]);
    }
    return s + "]";
}

CompareResult compare_tensors(const Array<double>& a, const Array<double>& b, Tolerance tol) {
    check_tolerance("rtol", tol.rtol);
    check_tolerance("atol", tol.atol);
    CompareResult r;
    r.shape_a.assign(a.shape().begin(), a.shape().end());
    r.shape_b.assign(b.shape().begin(), b.shape().end());
    r.shapes_match = r.shape_a == r.shape_b;
    if (!r.shapes_match) return r;

    r.count = a.size();
    const double* pa = a.data();
    const double* pb = b.data();
    std::optional<std::size_t> abs_at, rel_at;  // flat positions of the maxima
    for (std::size_t i = 0; i < r.count; ++i) {
        const double x = pa[i], y = pb[i];
        if (!is_close(x, y, tol)) ++r.mismatches;
        if (std::isnan(x) || std::isnan(y)) {
            ++r.nan_pairs;
            continue;
        }
        // strict '>' keeps the first position of the maximum, as numpy.argmax does
        const double ad = abs_diff(x, y);
        if (!abs_at || ad > r.max_abs_diff) {
            r.max_abs_diff = ad;
            abs_at = i;
        }
        const double rd = rel_diff(x, y);
        if (!rel_at || rd > r.max_rel_diff) {
            r.max_rel_diff = rd;
            rel_at = i;
        }
    }
    r.close = r.mismatches == 0;
    if (abs_at) {
        r.max_abs_index = unravel_index(*abs_at, r.shape_a);
        r.a_at_max_abs = pa[*abs_at];
        r.b_at_max_abs = pb[*abs_at];
    }
    if (rel_at) {
        r.max_rel_index = unravel_index(*rel_at, r.shape_a);
        r.a_at_max_rel = pa[*rel_at];
        r.b_at_max_rel = pb[*rel_at];
    }
    return r;
}

namespace {

std::string where(const std::optional<Shape>& index, double a, double b) {
    if (!index) return "";
    return " at " + index_string(*index) + " (a " + short_number(a) + ", b " + short_number(b) + ")";
}

}  // namespace

std::string compare_report(const CompareResult& r, Tolerance tol, const std::string& name_a,
                           const std::string& name_b) {
    if (!r.shapes_match) {
        return "shapes differ: " + shape_string(r.shape_a) + " vs " + shape_string(r.shape_b) + "\n";
    }
    if (r.close) {
        return name_a + " and " + name_b + " are close: " + std::to_string(r.count) +
               (r.count == 1 ? " element" : " elements") + ", max abs diff " +
               short_number(r.max_abs_diff) + ", max rel diff " + short_number(r.max_rel_diff) + "\n";
    }
    std::string s = name_a + " and " + name_b + " differ: " + std::to_string(r.mismatches) + " of " +
                    std::to_string(r.count) + " elements are not close (rtol " +
                    short_number(tol.rtol) + ", atol " + short_number(tol.atol) + ")\n";
    if (r.max_abs_index) {
        s += "  max abs diff " + short_number(r.max_abs_diff) +
             where(r.max_abs_index, r.a_at_max_abs, r.b_at_max_abs) + "\n";
        s += "  max rel diff " + short_number(r.max_rel_diff) +
             where(r.max_rel_index, r.a_at_max_rel, r.b_at_max_rel) + "\n";
    }
    if (r.nan_pairs > 0) {
        s += "  " + std::to_string(r.nan_pairs) +
             (r.nan_pairs == 1 ? " pair holds" : " pairs hold") + " a NaN (NaN is never close)\n";
    }
    return s;
}

}  // namespace attntrace
