// PyTorch 1.13's str(tensor), reproduced from torch/_tensor_str.py (_Formatter, _vector_str,
// _tensor_str_with_formatter, get_summarized_data, _str_intern, _add_suffixes). Comments name the
// Python function each piece mirrors.
#include "attntrace/io/torch_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <vector>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {
namespace {

// Python's "{:.{P}f}" (CONVERSION 'f') or "{:.{P}e}" ('e') of V. printf rounds the exact binary
// value to nearest, ties to even, as Python does; only the non-finite spellings differ
// (Python never writes "-nan"). Uses the "C" locale's decimal point: lib/ never calls setlocale.
std::string py_format(double v, int precision, char conversion) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    const char format[] = {'%', '.', '*', conversion, '\0'};
    const int n = std::snprintf(nullptr, 0, format, precision, v);
    std::string out(static_cast<std::size_t>(n), '\0');
    std::snprintf(out.data(), out.size() + 1, format, precision, v);
    return out;
}

// _Formatter: one format and one width for every element of the tensor.
class Formatter {
public:
    // VALUES: the (summarised) tensor's values, widened to double.
    Formatter(const std::vector<double>& values, const TorchPrintOptions& options)
        : precision_(options.precision) {
        std::vector<double> nonzero_finite;
        for (double v : values) {
            if (std::isfinite(v) && v != 0) nonzero_finite.push_back(v);
        }
        // torch returns here, before applying PRINT_OPTS.sci_mode: all-zero tensors print "0.".
        if (nonzero_finite.empty()) return;

        double min_abs = std::numeric_limits<double>::infinity();
        double max_abs = 0;
        for (double v : nonzero_finite) {
            min_abs = std::min(min_abs, std::abs(v));
            max_abs = std::max(max_abs, std::abs(v));
        }
        int_mode_ = std::all_of(nonzero_finite.begin(), nonzero_finite.end(),
                                [](double v) { return v == std::ceil(v); });
        const bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
        if (int_mode_) {
            // Integers print as "{:.0f}" plus a "." that the width counts.
            if (wide_range) {
                sci_mode_ = true;
                measure(nonzero_finite, precision_, 'e', 0);
            } else {
                measure(nonzero_finite, 0, 'f', 1);
            }
        } else if (wide_range || min_abs < 1.0e-4) {
            sci_mode_ = true;
            measure(nonzero_finite, precision_, 'e', 0);
        } else {
            measure(nonzero_finite, precision_, 'f', 0);
        }
        if (options.sci_mode) sci_mode_ = *options.sci_mode;
    }

    std::size_t width() const { return max_width_; }

    // _Formatter.format: V formatted and right-aligned to width() (never truncated).
    std::string format(double v) const {
        std::string out;
        if (sci_mode_) {
            out = py_format(v, precision_, 'e');
        } else if (int_mode_) {
            out = py_format(v, 0, 'f');
            if (std::isfinite(v)) out += '.';
        } else {
            out = py_format(v, precision_, 'f');
        }
        if (out.size() < max_width_) out.insert(0, max_width_ - out.size(), ' ');
        return out;
    }

private:
    void measure(const std::vector<double>& values, int precision, char conversion,
                 std::size_t extra) {
        for (double v : values) {
            max_width_ = std::max(max_width_, py_format(v, precision, conversion).size() + extra);
        }
    }

    int precision_;
    bool int_mode_ = true;
    bool sci_mode_ = false;
    std::size_t max_width_ = 1;
};

template <class T>
class Printer {
public:
    Printer(const Array<T>& values, const TorchPrintOptions& options)
        : data_(values.data()),
          shape_(values.shape().begin(), values.shape().end()),
          strides_(row_major_strides(shape_)),
          options_(options),
          summarize_(values.size() > options.threshold),
          formatter_(summarized_values(), options) {}

    // _tensor_str_with_formatter for the sub-tensor of dims D.. at OFFSET.
    std::string str(std::size_t d, std::size_t offset, std::size_t indent) const {
        const std::size_t rank = shape_.size() - d;
        if (rank == 0) return formatter_.format(static_cast<double>(data_[offset]));
        if (rank == 1) return vector_str(d, offset, indent);

        std::vector<std::string> slices;
        for_each_kept(d, [&](std::size_t i) {
            if (i == ellipsis) {
                slices.emplace_back("...");
            } else {
                slices.push_back(str(d + 1, offset + i * strides_[d], indent + 1));
            }
        });
        std::string separator(1, ',');
        separator.append(rank - 1, '\n').append(indent + 1, ' ');
        return bracketed(join(slices, separator));
    }

private:
    static Shape row_major_strides(const Shape& shape) {
        Shape strides(shape.size(), 1);
        for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
        return strides;
    }

    static constexpr std::size_t ellipsis = std::numeric_limits<std::size_t>::max();

    // Calls F(i) for each index of dim D that is printed, and F(ellipsis) where "..." goes.
    template <class F>
    void for_each_kept(std::size_t d, F&& f) const {
        const std::size_t n = shape_[d];
        const std::size_t edge = options_.edgeitems;
        if (summarize_ && n > 2 * edge) {
            for (std::size_t i = 0; i < edge; ++i) f(i);
            f(ellipsis);
            for (std::size_t i = n - edge; i < n; ++i) f(i);
        } else {
            for (std::size_t i = 0; i < n; ++i) f(i);
        }
    }

    // get_summarized_data, flattened: the values the formatter is built from.
    std::vector<double> summarized_values() const {
        std::vector<double> out;
        gather(0, 0, out);
        return out;
    }

    void gather(std::size_t d, std::size_t offset, std::vector<double>& out) const {
        if (d == shape_.size()) {
            out.push_back(static_cast<double>(data_[offset]));
            return;
        }
        for_each_kept(d, [&](std::size_t i) {
            if (i != ellipsis) gather(d + 1, offset + i * strides_[d], out);
        });
    }

    // _vector_str: the last dim, wrapped every elements_per_line elements.
    std::string vector_str(std::size_t d, std::size_t offset, std::size_t indent) const {
        const std::size_t element_length = formatter_.width() + 2;  // ", " included
        std::size_t per_line = 1;
        if (options_.linewidth > indent) {
            per_line = std::max<std::size_t>(1, (options_.linewidth - indent) / element_length);
        }
        std::vector<std::string> elements;
        for_each_kept(d, [&](std::size_t i) {
            if (i == ellipsis) {
                elements.emplace_back(" ...");
            } else {
                elements.push_back(
                    formatter_.format(static_cast<double>(data_[offset + i * strides_[d]])));
            }
        });
        std::vector<std::string> lines;
        for (std::size_t i = 0; i < elements.size(); i += per_line) {
            const auto first = elements.begin() + static_cast<std::ptrdiff_t>(i);
            const auto last = elements.begin() +
                              static_cast<std::ptrdiff_t>(std::min(elements.size(), i + per_line));
            lines.push_back(join({first, last}, ", "));
        }
        std::string separator(",\n");
        separator.append(indent + 1, ' ');
        return bracketed(join(lines, separator));
    }

    static std::string bracketed(const std::string& inner) {
        std::string out;
        out.reserve(inner.size() + 2);
        out.append(1, '[').append(inner).append(1, ']');
        return out;
    }

    static std::string join(const std::vector<std::string>& parts, const std::string& separator) {
        std::string out;
        for (std::size_t i = 0; i < parts.size(); ++i) {
            if (i > 0) out += separator;
            out += parts[i];
        }
        return out;
    }

    const T* data_;
    Shape shape_;
    Shape strides_;  // row-major, in elements
    const TorchPrintOptions& options_;
    bool summarize_;
    Formatter formatter_;
};

// _add_suffixes: ", suffix" each, or ",\n<indent>suffix" when it would pass the line width.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes,
                         std::size_t indent, std::size_t linewidth) {
    // torch's off-by-two included: len(s) - s.rfind("\n") + 1, with rfind -1 when there is none.
    const std::size_t newline = text.rfind('\n');
    std::size_t last_line_len =
        newline == std::string::npos ? text.size() + 2 : text.size() - newline + 1;
    for (const std::string& suffix : suffixes) {
        if (last_line_len + suffix.size() + 2 > linewidth) {
            text.append(",\n").append(indent, ' ').append(suffix);
            last_line_len = indent + suffix.size();
        } else {
            text.append(", ").append(suffix);
            last_line_len += suffix.size() + 2;
        }
    }
    return text + ")";
}

}  // namespace

template <class T>
std::string torch_str(const Array<T>& values, const TorchPrintOptions& options) {
    if (options.precision < 0 || options.precision > 100) {
        throw UsageError("precision " + std::to_string(options.precision) +
                         ": must be between 0 and 100");
    }
    if (options.edgeitems == 0) throw UsageError("edgeitems 0: must be at least 1");

    const std::string prefix = "tensor(";
    const std::size_t indent = prefix.size();
    std::vector<std::string> suffixes;
    std::string body;
    if (values.size() == 0) {
        // numpy prints the shape of an empty tensor unless it is (0,)
        if (values.dimension() != 1) suffixes.push_back("size=" + shape_string(values.shape()));
        body = "[]";
    } else {
        body = Printer<T>(values, options).str(0, 0, indent);
    }
    // float32 is torch's default dtype; float64 says so
    if constexpr (std::is_same_v<T, double>) suffixes.emplace_back("dtype=torch.float64");
    return add_suffixes(prefix + body, suffixes, indent, options.linewidth);
}

template std::string torch_str<float>(const Array<float>&, const TorchPrintOptions&);
template std::string torch_str<double>(const Array<double>&, const TorchPrintOptions&);

}  // namespace attntrace
