#pragma once
// Comparing two tensors with numpy.allclose's semantics (equal_nan=False):
//   a[i] is close to b[i]  <=>  |a[i] - b[i]| <= atol + rtol * |b[i]|
// where B is the reference (the second file). Like numpy.isclose, a pair with an infinity is close
// only when both are the same infinity, and a pair with a NaN is never close. The shapes must be
// exactly equal (no broadcasting): different shapes mean the tensors differ.
//
// The report also gives the largest absolute difference |a - b| and the largest relative
// difference |a - b| / |b|, each with its first position in row-major order. Pairs with a NaN
// are left out of both maxima (they are counted in nan_pairs); equal values differ by 0; unequal
// pairs involving an infinity, and b == 0 with a != 0 for the relative one, differ by +Inf.
#include <cstddef>
#include <optional>
#include <string>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

struct Tolerance {
    double rtol = 1e-5;  // numpy's defaults
    double atol = 1e-8;
};

struct CompareResult {
    Shape shape_a;
    Shape shape_b;
    bool shapes_match = false;
    bool close = false;                      // shapes match and every pair is close
    std::size_t count = 0;                   // elements compared (0 when the shapes differ)
    std::size_t mismatches = 0;              // pairs not close, NaN pairs included
    std::size_t nan_pairs = 0;               // pairs where a or b is NaN
    double max_abs_diff = 0;                 // max |a - b| over the pairs without NaN
    std::optional<Shape> max_abs_index;      // its multi-index; nullopt when no pair qualifies
    double max_rel_diff = 0;                 // max |a - b| / |b| over the same pairs
    std::optional<Shape> max_rel_index;
    double a_at_max_abs = 0, b_at_max_abs = 0;  // the values at max_abs_index
    double a_at_max_rel = 0, b_at_max_rel = 0;  // the values at max_rel_index
};

// Throws UsageError when a tolerance is negative or NaN ("rtol: must be ... , got -1"; the app
// adds its flag's name).
CompareResult compare_tensors(const Array<double>& a, const Array<double>& b, Tolerance tol);

// The multi-index of the FLAT-th element of a row-major SHAPE tensor.
Shape unravel_index(std::size_t flat, const Shape& shape);

// "[1, 0, 3]"; "[]" for the single element of a 0-d tensor.
std::string index_string(const Shape& index);

// The human report on a comparison of NAME_A with NAME_B, one line per fact, ending in '\n':
//   close:   "a.npy and b.npy are close: 120 elements, max abs diff 1e-07, max rel diff 3e-07"
//   differ:  "a.npy and b.npy differ: 3 of 120 elements are not close (rtol 1e-05, atol 1e-08)"
//            "  max abs diff 0.5 at [1, 0, 3] (a 1.5, b 1)"
//            "  max rel diff 2 at [0, 2, 1] (a 0.3, b 0.1)"
//            "  2 pairs hold a NaN (NaN is never close)"          (only when there are some)
//   shapes:  "shapes differ: (2, 3) vs (3, 2)"
std::string compare_report(const CompareResult& result, Tolerance tol, const std::string& name_a,
                           const std::string& name_b);

}  // namespace attntrace
