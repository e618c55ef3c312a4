#include "attntrace/tensor/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

namespace attntrace {

namespace {

// Neumaier's compensated sum (Kahan-Babuska): the rounding error of each addition is kept apart,
// so 1e300 + 3.4e38 - 1e300 gives 3.4e38, not 0.
struct CompensatedSum {
    double sum = 0;
    double error = 0;
    void add(double x) {
        const double t = sum + x;
        error += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
    }
    double value() const { return sum + error; }
};

}  // namespace

template <class T>
TensorStats tensor_stats(const Array<T>& array) {
    TensorStats s;
    s.count = array.size();
    std::size_t finite = 0;
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    // pass 1: counts and extremes
    for (const T v : array) {
        const double x = static_cast<double>(v);
        if (std::isnan(x)) {
            ++s.nan_count;
        } else if (std::isinf(x)) {
            ++s.inf_count;
        } else {
            ++finite;
            lo = std::min(lo, x);
            hi = std::max(hi, x);
        }
    }
    if (finite == 0) {
        s.min = s.max = s.mean = s.std = std::numeric_limits<double>::quiet_NaN();
        return s;
    }
    s.min = lo;
    s.max = hi;
    // The sums run on x / 2^k with 2^k <= max |x| < 2^(k+1) (an exact scaling), so neither the sum
    // of 1e308s nor the square of 1e300 overflows. k >= -1022 keeps 2^-k finite.
    const double biggest = std::max(std::abs(lo), std::abs(hi));
    const int k = biggest > 0 ? std::max(std::ilogb(biggest), -1022) : 0;
    const double down = std::ldexp(1.0, -k);
    const double n = static_cast<double>(finite);
    // pass 2: the mean
    CompensatedSum sum;
    for (const T v : array) {
        const double x = static_cast<double>(v);
        if (std::isfinite(x)) sum.add(x * down);
    }
    const double mean = sum.value() / n;
    // pass 3: centred sum of squares, less the part due to the mean's rounding error
    // (the "corrected two-pass" algorithm: var = (sum d^2 - (sum d)^2 / n) / n)
    CompensatedSum sum_d;
    CompensatedSum sum_d2;
    for (const T v : array) {
        const double x = static_cast<double>(v);
        if (std::isfinite(x)) {
            const double d = x * down - mean;
            sum_d.add(d);
            sum_d2.add(d * d);
        }
    }
    const double var = std::max(0.0, (sum_d2.value() - sum_d.value() * sum_d.value() / n) / n);
    s.mean = std::ldexp(mean, k);  // the compensated sum is already within an ulp or so
    s.std = std::ldexp(std::sqrt(var), k);
    return s;
}

template TensorStats tensor_stats<float>(const Array<float>&);
template TensorStats tensor_stats<double>(const Array<double>&);

std::string short_number(double value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return buf;
}

namespace {

std::string order_name(const TensorSource& source) { return source.fortran_order ? "F" : "C"; }

std::string format_and_version(const TensorSource& source) {
    std::string s(format_name(source.format));
    if (source.format == FileFormat::npy && !source.npy_version.empty()) {
        s += ' ' + source.npy_version;
    }
    return s;
}

std::string stat_text(double value) { return std::isfinite(value) ? short_number(value) : "n/a"; }

nlohmann::ordered_json stat_json(double value) {
    return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string info_text(const TensorSource& source, const Shape& shape, const TensorStats& stats) {
    std::string s = source.path + ": " + format_and_version(source) + ", " +
                    std::string(dtype_name(source.dtype)) + ", shape " + shape_string(shape) + ", " +
                    order_name(source) + " order, " + std::to_string(stats.count) +
                    (stats.count == 1 ? " element\n" : " elements\n");
    s += "  min " + stat_text(stats.min) + "  max " + stat_text(stats.max) + "  mean " +
         stat_text(stats.mean) + "  std " + stat_text(stats.std) +
         "  nan " + std::to_string(stats.nan_count) + "  inf " + std::to_string(stats.inf_count) +
         '\n';
    return s;
}

std::string info_json(const TensorSource& source, const Shape& shape, const TensorStats& stats) {
    nlohmann::ordered_json j;
    j["file"] = source.path;
    j["format"] = std::string(format_name(source.format));
    j["npy_version"] = source.format == FileFormat::npy ? nlohmann::ordered_json(source.npy_version)
                                                        : nlohmann::ordered_json(nullptr);
    j["dtype"] = std::string(dtype_name(source.dtype));
    j["shape"] = shape;
    j["order"] = order_name(source);
    j["elements"] = stats.count;
    j["min"] = stat_json(stats.min);
    j["max"] = stat_json(stats.max);
    j["mean"] = stat_json(stats.mean);
    j["std"] = stat_json(stats.std);
    j["nan"] = stats.nan_count;
    j["inf"] = stats.inf_count;
    // replace: a file name that is not UTF-8 must not make dump() throw
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + '\n';
}

}  // namespace attntrace
