#pragma once
// GGUF, llama.cpp's model file (ggml/docs/gguf.md), read as ggml/src/gguf.cpp
// gguf_init_from_file_impl reads it (llama.cpp of tests/goldens/llama_cpp.py's pin):
//
//   "GGUF" | version u32 (2 or 3) | tensor count u64 | key/value count u64
//   key/values:   key (u64 length + UTF-8 bytes) | value type u32 | value
//                 (an array: element type u32 | count u64 | elements; arrays may nest)
//   tensor infos: name | n_dims u32 (<= 4) | ne[0..n_dims) u64 | ggml type u32 | offset u64
//   zero padding to general.alignment (u32, a power of 2; 32 when absent)
//   the data section: each tensor at its offset (a multiple of the alignment) from its start
//
// Everything is validated before anything else is read, and nothing is allocated that the file's
// size does not justify: bad magic or version, a truncated header, strings, arrays or counts
// longer than the file can hold, duplicate keys or tensor names, a name of 64 bytes or more (as
// ggml), more than 4 dims, negative dims or dims whose product passes 2^63, an unknown or removed
// ggml type, a row (ne[0]) not a multiple of the type's block, tensor data unaligned, out of the
// file or overlapping another tensor's: one InputError naming the file (and the key or tensor).
//
// ggml lists a tensor's dims fastest first (ne[0] is a row); numpy and this library slowest
// first. GgufTensor::shape is the numpy order (ne reversed): a (out, in) weight of a Linear
// layer has ne = {in, out}.
//
// A model split by gguf-split is named by its first file, NAME-00001-of-0000N.gguf: GgufFiles
// opens the others (NAME-0000k-of-0000N.gguf, each with split.no k - 1 and split.count N), the
// first holding the metadata; split.tensors.count must equal the tensors found.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class FileBytes;

// The types of a metadata value (gguf.h enum gguf_type).
enum class GgufType : std::uint32_t {
    uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7, string = 8,
    array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

// "uint32", "string", "array" ...
std::string_view gguf_type_name(GgufType type);

// One metadata value, where it lies in the file's bytes (which must outlive it).
struct GgufValue {
    GgufType type = GgufType::uint8;
    GgufType element = GgufType::uint8;  // an array's element type
    std::uint64_t count = 0;             // an array's element count
    std::string_view bytes;              // a scalar's or string's bytes (a string without its length);
                                         // an array's elements, after its type and count
};

// One tensor's info, validated.
struct GgufTensor {
    std::string name;
    std::uint32_t type = 0;    // ggml type id (gguf_tensor_type_name names it)
    Shape shape;               // numpy order: ne reversed
    std::size_t offset = 0;    // of its first byte, from the start of its file
    std::size_t nbytes = 0;
    std::size_t file = 0;      // the index of its file in a split model
};

// The header of one GGUF file: its key/values and tensor infos, validated, viewing BYTES.
struct GgufHeader {
    std::string name;      // for messages
    std::uint32_t version = 0;
    std::size_t alignment = 32;
    std::size_t data_offset = 0;  // where the data section starts
    std::vector<std::pair<std::string_view, GgufValue>> metadata;  // in file order
    std::vector<GgufTensor> tensors;                               // in file order
};

// Parses and validates BYTES (NAME in messages; InputError). The header views BYTES.
GgufHeader parse_gguf(std::string_view bytes, const std::string& name);

// ggml's name of a tensor type ("q4_K", "bf16"); "unknown type N" for an id ggml never gave.
std::string gguf_tensor_type_name(std::uint32_t type);

// An opened GGUF model: its file (or split files) memory-mapped and validated, the metadata of
// the first, every file's tensors. Reading a value of the wrong type is an InputError naming the
// file, the key, its type and the type wanted.
class GgufFiles {
public:
    // PATH: a .gguf file, or the first file of a split model.
    static std::shared_ptr<GgufFiles> open(const std::string& path);
    ~GgufFiles();

    const std::string& path() const { return path_; }
    const GgufHeader& header() const { return headers_.front(); }
    std::size_t file_count() const { return files_.size(); }

    // ---- metadata (the first file's) ----
    const GgufValue* find(std::string_view key) const;
    std::optional<std::string_view> string(std::string_view key) const;
    // Any integer type, refused when negative.
    std::optional<std::uint64_t> count(std::string_view key) const;
    // Any integer or float type, widened to double.
    std::optional<double> number(std::string_view key) const;
    std::optional<bool> flag(std::string_view key) const;
    // The length of the array under KEY (InputError when it is not an array), nullopt when absent.
    std::optional<std::uint64_t> array_size(std::string_view key) const;
    // An array of strings (views into the file); empty when absent.
    std::vector<std::string_view> strings(std::string_view key) const;
    // An array of numbers (any integer or float element type) widened; empty when absent.
    std::vector<double> numbers(std::string_view key) const;
    std::vector<std::int64_t> integers(std::string_view key) const;  // integer element types only
    // VALUE as JSON: numbers, strings (invalid UTF-8 replaced), booleans; an array's first
    // MAX_ELEMENTS elements, then the string "... (N more)".
    static nlohmann::json to_json(const GgufValue& value, std::size_t max_elements);

    // ---- tensors ----
    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* tensor(std::string_view name) const;
    const FileBytes& bytes(const GgufTensor& t) const { return *files_[t.file]; }
    const FileBytes& bytes(std::size_t file) const { return *files_[file]; }
    // The path of the file holding T.
    const std::string& file_of(const GgufTensor& t) const { return headers_[t.file].name; }
    // Whether read_rows reads TYPE (F32, F16, BF16, Q8_0 ...).
    static bool readable(std::uint32_t type);
    // InputError naming T, its type and the types read, unless read_rows reads it.
    void check_readable(const GgufTensor& t) const;
    // Rows [R0, R1) of T (rows along its first numpy dim; a 1-D tensor's are its elements)
    // dequantized to float or double into OUT, read through FileBytes::copy (the mapping's pages
    // are never touched) by up to read_threads() workers. InputError naming the tensor and its
    // type when the type is not readable.
    template <class V>
    void read_rows(const GgufTensor& t, std::size_t r0, std::size_t r1, V* out) const;
    // T's bytes as floats in place (an F32 tensor, aligned, on a little-endian machine), rows
    // [R0, R1) resident (FileBytes::resident); nullptr otherwise.
    const float* in_place(const GgufTensor& t, std::size_t r0, std::size_t r1) const;
    // Drops the pages of rows [R0, R1) of T from memory.
    void release(const GgufTensor& t, std::size_t r0, std::size_t r1) const;

private:
    GgufFiles() = default;
    const GgufValue& typed(std::string_view key, std::initializer_list<GgufType> wanted, const char* what) const;
    void add_file(const std::string& path);
    void open_splits();

    std::string path_;
    std::vector<std::unique_ptr<FileBytes>> files_;
    std::vector<GgufHeader> headers_;
    std::vector<GgufTensor> tensors_;
};

// True when PATH names a GGUF file: a .gguf extension, or a regular file starting with "GGUF".
bool is_gguf_path(const std::string& path);

}  // namespace attntrace
