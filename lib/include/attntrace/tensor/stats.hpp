#pragma once
// Summary statistics of a tensor, and the `info` report built on them.
//
// min, max, mean and std are taken over the FINITE values only: NaN and +-Inf are counted
// (nan_count, inf_count) and otherwise ignored, so one NaN does not hide the rest of the tensor
// (numpy's np.min would return nan). With no finite value at all (an empty tensor, or all NaN),
// min/max/mean/std are NaN. std is the population standard deviation (numpy's default ddof=0).
// Everything is accumulated in double: two passes (mean first, then the centred sum of squares),
// so a large offset does not cancel the variance away; compensated (Neumaier) sums, so
// 1e300 + 3.4e38 - 1e300 keeps its 3.4e38; on values scaled by a power of two, so values near the
// double range (1e300) do not overflow.
#include <cstddef>
#include <string>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

struct TensorStats {
    std::size_t count = 0;      // every element, finite or not
    std::size_t nan_count = 0;
    std::size_t inf_count = 0;  // +Inf and -Inf
    double min = 0;             // over the finite values; NaN when there are none
    double max = 0;
    double mean = 0;
    double std = 0;             // population (ddof = 0)
};

template <class T>
TensorStats tensor_stats(const Array<T>& array);

// `info`'s report on one tensor file. SHAPE is the tensor's shape, STATS its statistics.
//   text: "x.npy: npy 1.0, float32, shape (2, 10, 6), C order, 120 elements\n"
//         "  min -2.1  max 2.3  mean 0.012  std 0.98  nan 0  inf 0\n"
//   json: one compact object and a newline (JSON Lines): {"file", "format", "npy_version" (null
//         for json), "dtype", "shape", "order" ("C" or "F"), "elements", "min", "max", "mean",
//         "std" (null when not finite), "nan", "inf"}
std::string info_text(const TensorSource& source, const Shape& shape, const TensorStats& stats);
std::string info_json(const TensorSource& source, const Shape& shape, const TensorStats& stats);

// A number as the reports print it: 6 significant digits ("0.0123457", "1e-08", "nan", "inf").
std::string short_number(double value);

}  // namespace attntrace
