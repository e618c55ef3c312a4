// JSON tensors (json_tensor.hpp): reading with nlohmann::json's SAX interface (no DOM, bounded
// depth) and writing in shortest round-trip form.
//
// Accepted forms:
//   [[1, 2], [3, 4]]                                   bare nested arrays (3.5 is a 0-d tensor,
//                                                      [] has shape (0,)); dtype float64
//   {"shape": [2, 2], "dtype": "float32", "data": ...}  data nested or flat; shape and dtype
//                                                      optional; keys in any order
// Values are read as double (as Python's json module does) and converted to T. NaN, Infinity and
// -Infinity are numbers, as Python's json module reads and writes them (standard JSON has no such
// numbers, so they are swapped for same-length number tokens before nlohmann parses the text).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/json_tensor.hpp"

namespace attntrace {

namespace {

constexpr std::size_t max_depth = 64;  // arrays nested deeper than this are rejected

using json = nlohmann::json;

// S for a message, quoted: at most 40 bytes, control characters (which would break the message's
// one line) as '?'.
std::string printable(std::string_view s) {
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size() && i < 40; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
    }
    return out + (s.size() > 40 ? "...\"" : "\"");
}

// "1 element", "3 elements".
std::string elements(std::size_t count) {
    return std::to_string(count) + (count == 1 ? " element" : " elements");
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
// without the exception id and the position (we give the byte offset instead).
std::string parse_error_reason(const std::string& what) {
    std::string rest = what;
    if (const std::size_t bracket = rest.find("] "); bracket != std::string::npos) {
        rest = rest.substr(bracket + 2);
    }
    if (rest.rfind("parse error", 0) == 0) {
        if (const std::size_t colon = rest.find(": "); colon != std::string::npos) {
            rest = rest.substr(colon + 2);
        }
    }
    return rest;
}

// A NaN, Infinity or -Infinity token: which number of the text it is (0 = the first number
// token), its value and its spelling.
struct NonFinite {
    std::size_t ordinal;
    double value;
    std::string_view spelling;
};

// Python's json extensions outside strings, each replaced in TEXT (a copy of the bytes, made on
// the first one found) by a number token of the same length, so byte offsets stay true.
std::vector<NonFinite> replace_non_finite(std::string_view bytes, std::string& text) {
    static constexpr std::string_view tokens[] = {"NaN", "Infinity", "-Infinity"};
    static constexpr std::string_view replacements[] = {"0  ", "0       ", "-0       "};
    static constexpr double values[] = {std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity()};
    std::vector<NonFinite> found;
    std::size_t numbers = 0;
    for (std::size_t i = 0; i < bytes.size();) {
        const char c = bytes[i];
        if (c == '"') {  // skip the string, escapes included
            for (++i; i < bytes.size() && bytes[i] != '"'; ++i) i += bytes[i] == '\\' ? 1 : 0;
            ++i;
            continue;
        }
        std::size_t which = 3;
        const bool at_value = i == 0 || std::string_view(" \t\r\n[{,:").find(bytes[i - 1]) != std::string_view::npos;
        for (std::size_t t = 0; t < 3 && at_value; ++t) {
            if (bytes.substr(i, tokens[t].size()) == tokens[t]) which = t;
        }
        if (which < 3) {
            if (text.empty()) text.assign(bytes);
            text.replace(i, tokens[which].size(), replacements[which]);
            found.push_back({numbers++, values[which], tokens[which]});
            i += tokens[which].size();
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            ++numbers;
            while (i < bytes.size() && std::string_view("0123456789+-.eE").find(bytes[i]) != std::string_view::npos) ++i;
        } else {
            ++i;
        }
    }
    return found;
}

// Builds the tensor from SAX events. Every error throws InputError "<name>: <json path>: ...".
template <class T>
class TensorSax final : public json::json_sax_t {
public:
    // NON_FINITE: the NaN/Infinity tokens replace_non_finite swapped for numbers.
    TensorSax(std::string_view bytes, const std::string& name, std::vector<NonFinite> non_finite)
        : bytes_(bytes), name_(name), non_finite_(std::move(non_finite)) {}

    bool null() override { return not_a_number("null"); }
    bool boolean(bool value) override { return not_a_number(value ? "true" : "false"); }
    bool number_integer(number_integer_t value) override {
        if (const NonFinite* special = next_number()) return number(special->value, [special] { return std::string(special->spelling); });
        return number(static_cast<double>(value), [value] { return std::to_string(value); });
    }
    bool number_unsigned(number_unsigned_t value) override {
        if (const NonFinite* special = next_number()) return number(special->value, [special] { return std::string(special->spelling); });
        if (slot_ == Slot::shape_item) return shape_dim(value);
        return number(static_cast<double>(value), [value] { return std::to_string(value); });
    }
    bool number_float(number_float_t value, const string_t& text) override {
        next_number();  // a NaN/Infinity token is replaced by an integer, never by a float
        return number(value, [&text] { return text; });
    }
    bool string(string_t& value) override {
        if (slot_ == Slot::dtype) {
            const std::optional<DType> dtype = dtype_from_name(value);
            if (!dtype) fail("$.dtype", "unknown dtype " + printable(value));
            dtype_ = *dtype;
            slot_ = Slot::key;
            return true;
        }
        return not_a_number("a string");
    }
    bool binary(binary_t&) override { return not_a_number("binary data"); }

    bool start_object(std::size_t) override {
        if (slot_ == Slot::top) {
            object_form_ = true;
            slot_ = Slot::key;
            return true;
        }
        return not_a_number("an object");
    }
    bool key(string_t& key) override {
        // Only the top-level object has keys: any nested object was rejected when it started.
        Slot next = Slot::key;
        bool* seen = nullptr;
        if (key == "shape") {
            next = Slot::shape;
            seen = &seen_shape_;
        } else if (key == "dtype") {
            next = Slot::dtype;
            seen = &seen_dtype_;
        } else if (key == "data") {
            next = Slot::data;
            seen = &seen_data_;
        } else {
            fail("$", "unknown key " + printable(key) + " (a tensor object has \"shape\", \"dtype\" and \"data\")");
        }
        if (*seen) fail("$", "duplicate key " + printable(key));
        *seen = true;
        slot_ = next;
        return true;
    }
    bool end_object() override {
        slot_ = Slot::done;
        return true;
    }

    bool start_array(std::size_t) override {
        switch (slot_) {
        case Slot::top:
            prefix_ = "$";
            break;
        case Slot::data:
            prefix_ = "$.data";
            break;
        case Slot::data_item: {
            ++counts_.back();
            const std::size_t depth = counts_.size();
            if (ndim_ && depth >= *ndim_) fail(path(depth), "expected a number, found an array");
            if (depth >= max_depth) {
                fail(prefix_, "arrays nested deeper than " + std::to_string(max_depth) + " levels");
            }
            break;
        }
        case Slot::shape:
            declared_shape_.emplace();
            slot_ = Slot::shape_item;
            return true;
        default:
            return not_a_number("an array");
        }
        slot_ = Slot::data_item;
        counts_.push_back(0);
        return true;
    }
    bool end_array() override {
        if (slot_ == Slot::shape_item) {
            slot_ = Slot::key;
            return true;
        }
        // The array at DEPTH (0 = outermost) has COUNT elements, all of one shape (checked below
        // them).
        const std::size_t count = counts_.back();
        counts_.pop_back();
        const std::size_t depth = counts_.size();
        if (!ndim_) set_ndim(depth + 1);  // no number anywhere yet: this is an innermost array
        if (!dims_[depth]) {
            dims_[depth] = count;
            first_path_[depth] = path(depth);
        } else if (*dims_[depth] != count) {
            fail(path(depth), "ragged array: " + elements(count) + " here but " +
                                  std::to_string(*dims_[depth]) + " in " + first_path_[depth]);
        }
        if (counts_.empty()) slot_ = object_form_ ? Slot::key : Slot::done;
        return true;
    }

    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception& error) override {
        // nlohmann counts the offending byte as read (and the end of input as one more byte).
        const std::size_t offset = std::min(position > 0 ? position - 1 : 0, bytes_.size());
        throw InputError(name_ + ": invalid JSON at byte " + std::to_string(offset) + ": " +
                         parse_error_reason(error.what()));
    }

    // The tensor, once the whole text has been parsed.
    LoadedTensor<T> finish() {
        if (object_form_ && !seen_data_) fail("$", "missing key \"data\"");
        Shape shape(dims_.size());
        for (std::size_t d = 0; d < dims_.size(); ++d) shape[d] = *dims_[d];

        if (declared_shape_ && *declared_shape_ != shape) {
            const Shape& declared = *declared_shape_;
            const std::optional<std::size_t> declared_count = checked_element_count(declared);
            if (!declared_count) {
                fail("$.shape", shape_string(declared) + " has dims whose product passes 2^63");
            }
            // A zero dim hides the dims after it: [[], []] is (2, 0), (2, 0, 3), ...
            const bool empty_prefix = !shape.empty() && shape.back() == 0 && shape.size() < declared.size() &&
                                      std::equal(shape.begin(), shape.end(), declared.begin());
            const bool flat = shape.size() == 1;
            if (flat && !empty_prefix && values_.size() != *declared_count) {
                fail("$.data", "flat list of " + std::to_string(values_.size()) + " numbers but \"shape\" " +
                                   shape_string(declared) + " needs " + std::to_string(*declared_count));
            }
            if (!flat && !empty_prefix) {
                fail("$.data", "shape " + shape_string(shape) + " but \"shape\" says " + shape_string(declared));
            }
            shape = declared;
        }

        LoadedTensor<T> tensor;
        tensor.array = Array<T>::from_shape(shape);
        if (tensor.array.size() != values_.size()) {  // cannot happen: every leaf is at depth ndim
            fail("$", "internal error: " + std::to_string(values_.size()) + " numbers for shape " +
                          shape_string(shape));
        }
        std::copy(values_.begin(), values_.end(), tensor.array.data());
        tensor.source.path = name_;
        tensor.source.format = FileFormat::json;
        tensor.source.dtype = dtype_.value_or(DType::f8);
        tensor.source.fortran_order = false;
        return tensor;
    }

private:
    // What the next value is.
    enum class Slot {
        top,         // the whole document
        key,         // a key of the top-level object (or its end)
        shape,       // the value of "shape"
        shape_item,  // an element of "shape"
        dtype,       // the value of "dtype"
        data,        // the value of "data"
        data_item,   // an element of an array of the data
        done,        // nothing (the parser itself rejects trailing text)
    };

    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        throw InputError(name_ + ": " + where + ": " + what);
    }

    // The JSON path of the element being read at DEPTH arrays below the data's root.
    std::string path(std::size_t depth) const {
        std::string out = prefix_;
        for (std::size_t d = 0; d < depth; ++d) {
            out += '[';
            out += std::to_string(counts_[d] - 1);
            out += ']';
        }
        return out;
    }

    void set_ndim(std::size_t ndim) {
        ndim_ = ndim;
        dims_.resize(ndim);
        first_path_.resize(ndim);
    }

    // A number; SPELLING() gives its text for messages.
    template <class Spelling>
    bool number(double value, const Spelling& spelling) {
        switch (slot_) {
        case Slot::top:
        case Slot::data:  // a 0-d tensor
            set_ndim(0);
            values_.push_back(static_cast<T>(value));
            slot_ = slot_ == Slot::top ? Slot::done : Slot::key;
            return true;
        case Slot::data_item: {
            ++counts_.back();
            const std::size_t depth = counts_.size();
            if (!ndim_) {
                set_ndim(depth);
            } else if (*ndim_ != depth) {
                fail(path(depth), "expected an array, found a number");
            }
            values_.push_back(static_cast<T>(value));
            return true;
        }
        case Slot::shape_item:
            fail("$.shape[" + std::to_string(declared_shape_->size()) + "]",
                 "expected a non-negative integer, found " + spelling());
        default:
            return not_a_number("a number");
        }
    }

    bool shape_dim(std::uint64_t dim) {
        declared_shape_->push_back(static_cast<std::size_t>(dim));
        if (declared_shape_->size() > max_depth) {
            fail("$.shape", "more than " + std::to_string(max_depth) + " dims");
        }
        return true;
    }

    // A value of kind WHAT where it does not belong.
    [[noreturn]] bool not_a_number(const std::string& what) {
        switch (slot_) {
        case Slot::top:
            fail("$", "expected a number, an array or a tensor object, found " + what);
        case Slot::data:
            fail("$.data", "expected a number or an array, found " + what);
        case Slot::data_item:
            ++counts_.back();
            fail(path(counts_.size()), "expected a number, found " + what);
        case Slot::shape:
            fail("$.shape", "expected an array of non-negative integers, found " + what);
        case Slot::shape_item:
            fail("$.shape[" + std::to_string(declared_shape_->size()) + "]",
                 "expected a non-negative integer, found " + what);
        case Slot::dtype:
            fail("$.dtype", "expected a dtype name such as \"float32\", found " + what);
        default:
            fail("$", "unexpected " + what);
        }
    }

    // Counts one number token of the text; the NaN/Infinity it stands for, if it replaced one.
    const NonFinite* next_number() {
        const std::size_t ordinal = numbers_seen_++;
        if (next_non_finite_ < non_finite_.size() && non_finite_[next_non_finite_].ordinal == ordinal) {
            return &non_finite_[next_non_finite_++];
        }
        return nullptr;
    }

    std::string_view bytes_;
    const std::string& name_;
    std::vector<NonFinite> non_finite_;  // in text order
    std::size_t next_non_finite_ = 0;
    std::size_t numbers_seen_ = 0;
    Slot slot_ = Slot::top;

    bool object_form_ = false;
    bool seen_shape_ = false;
    bool seen_dtype_ = false;
    bool seen_data_ = false;
    std::optional<Shape> declared_shape_;
    std::optional<DType> dtype_;

    std::string prefix_;                             // "$" or "$.data"
    std::vector<std::size_t> counts_;                // elements so far in each open array
    std::optional<std::size_t> ndim_;                // known once a number or an innermost array is seen
    std::vector<std::optional<std::size_t>> dims_;   // (ndim) the length at each depth, once seen
    std::vector<std::string> first_path_;            // (ndim) where each length was first seen
    std::vector<T> values_;                          // row-major
};

template <class T>
void append_number(std::string& out, T value) {
    if (std::isnan(value)) {
        out += "NaN";
        return;
    }
    if (std::isinf(value)) {
        out += value < 0 ? "-Infinity" : "Infinity";
        return;
    }
    char buffer[64];
    std::to_chars_result result = std::to_chars(buffer, buffer + sizeof buffer, value);
    if constexpr (std::is_same_v<T, float>) {
        // Readers (ours and numpy's) parse to double, then round to float. For a few floats the
        // shortest decimal rounds wrongly that way (7.038531e-26 is 0x15ae43fd, but via double it
        // becomes 0x15ae43fe): write the float's exact double value instead.
        double parsed = 0.0;
        std::from_chars(buffer, result.ptr, parsed);
        if (std::bit_cast<std::uint32_t>(static_cast<float>(parsed)) != std::bit_cast<std::uint32_t>(value)) {
            result = std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(value));
        }
    }
    const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
    // JSON readers turn the integer -0 into +0; -0.0 keeps the sign.
    out += text == "-0" ? std::string_view("-0.0") : text;
}

// The nested arrays of the dims from DEPTH on, consuming values from NEXT.
template <class T>
void append_nested(std::string& out, const Shape& shape, std::size_t depth, const T*& next) {
    if (depth == shape.size()) {
        append_number(out, *next++);
        return;
    }
    out += '[';
    for (std::size_t i = 0; i < shape[depth]; ++i) {
        if (i > 0) out += ", ";
        append_nested(out, shape, depth + 1, next);
    }
    out += ']';
}

}  // namespace

template <class T>
LoadedTensor<T> parse_json_tensor(std::string_view bytes, const std::string& name) {
    std::string replaced;  // BYTES with NaN/Infinity swapped for numbers, when it holds any
    std::vector<NonFinite> non_finite = replace_non_finite(bytes, replaced);
    const std::string_view text = non_finite.empty() ? bytes : std::string_view(replaced);
    TensorSax<T> handler(bytes, name, std::move(non_finite));
    // The handler throws on every error, so a false return cannot happen; it is checked anyway.
    if (!json::sax_parse(text.begin(), text.end(), &handler)) {
        throw InputError(name + ": invalid JSON");
    }
    return handler.finish();
}

template <class T>
std::string json_tensor_text(const Array<T>& array) {
    const Shape shape(array.shape().begin(), array.shape().end());
    std::string out = "{\"shape\": [";
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (d > 0) out += ", ";
        out += std::to_string(shape[d]);
    }
    out += "], \"dtype\": \"";
    out += dtype_name(dtype_of<T>());
    out += "\", \"data\": ";
    const T* next = array.data();
    append_nested(out, shape, 0, next);
    out += "}\n";
    return out;
}

template LoadedTensor<float> parse_json_tensor<float>(std::string_view, const std::string&);
template LoadedTensor<double> parse_json_tensor<double>(std::string_view, const std::string&);
template std::string json_tensor_text<float>(const Array<float>&);
template std::string json_tensor_text<double>(const Array<double>&);

}  // namespace attntrace
