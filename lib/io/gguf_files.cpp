// An opened GGUF model (gguf.hpp GgufFiles): its files, split or not, the first file's metadata
// read by type, and tensor rows dequantized from the mapped files.
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/io/ggml_types.hpp"
#include "gguf_values.hpp"

namespace attntrace {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw InputError(file + ": " + what); }

std::uint64_t little_endian(std::string_view b) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < b.size(); ++i) v |= std::uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
    return v;
}

bool is_integer(GgufType t) {
    return t == GgufType::uint8 || t == GgufType::int8 || t == GgufType::uint16 || t == GgufType::int16 ||
           t == GgufType::uint32 || t == GgufType::int32 || t == GgufType::uint64 || t == GgufType::int64;
}
bool is_signed(GgufType t) {
    return t == GgufType::int8 || t == GgufType::int16 || t == GgufType::int32 || t == GgufType::int64;
}

// A scalar integer value, sign-extended.
std::int64_t integer_of(const GgufValue& v) {
    const std::uint64_t raw = little_endian(v.bytes);
    const std::size_t bits = 8 * v.bytes.size();
    if (!is_signed(v.type) || bits == 64) return static_cast<std::int64_t>(raw);
    const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
    return static_cast<std::int64_t>((raw ^ sign) - sign);
}

double number_of(const GgufValue& v) {
    if (v.type == GgufType::float32) return std::bit_cast<float>(static_cast<std::uint32_t>(little_endian(v.bytes)));
    if (v.type == GgufType::float64) return std::bit_cast<double>(little_endian(v.bytes));
    if (v.type == GgufType::uint64) return static_cast<double>(little_endian(v.bytes));
    return static_cast<double>(integer_of(v));
}

const GgufValue* find_in(const GgufHeader& h, std::string_view key) {
    for (const auto& [k, v] : h.metadata)
        if (k == key) return &v;
    return nullptr;
}

// "NAME-00001-of-00003.gguf" -> "NAME" for a split of COUNT files, or nullopt.
std::optional<std::string> split_prefix(const std::string& path, std::uint64_t count) {
    char tail[64];
    std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", 1, static_cast<int>(count));
    if (path.size() <= std::strlen(tail) || !path.ends_with(tail)) return std::nullopt;
    return path.substr(0, path.size() - std::strlen(tail));
}

}  // namespace

GgufFiles::~GgufFiles() = default;

std::shared_ptr<GgufFiles> GgufFiles::open(const std::string& path) {
    std::shared_ptr<GgufFiles> g(new GgufFiles());
    g->path_ = path;
    g->add_file(path);
    g->open_splits();
    return g;
}

void GgufFiles::add_file(const std::string& path) {
    auto bytes = std::make_unique<FileBytes>(FileBytes::open(path));
    GgufHeader h = parse_gguf(bytes->bytes(), path);
    for (GgufTensor& t : h.tensors) t.file = files_.size();
    files_.push_back(std::move(bytes));
    headers_.push_back(std::move(h));
}

// llama-model-loader.cpp: split.count > 1 names the other files from the first one's name; each
// must carry its own split.no; split.tensors.count counts them all; no name twice.
void GgufFiles::open_splits() {
    const std::uint64_t count = this->count("split.count").value_or(1);
    const std::uint64_t first = this->count("split.no").value_or(0);
    if (count > 1 && first != 0)
        fail(path_, "is split file " + std::to_string(first + 1) + " of " + std::to_string(count) +
                        ": a split model is opened by its first file (NAME-00001-of-" + std::to_string(count) + ".gguf)");
    const auto prefix = count > 1 ? split_prefix(path_, count) : std::nullopt;
    if (count > 1 && (!prefix || count > 99999))
        fail(path_, "split.count is " + std::to_string(count) + " but the file is not named NAME-00001-of-" +
                        std::to_string(count) + ".gguf");
    for (std::uint64_t k = 1; k < count; ++k) {
        char tail[64];
        std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", static_cast<int>(k + 1), static_cast<int>(count));
        const std::string part = *prefix + tail;
        if (!fs::exists(part)) fail(path_, "split file " + part + " is missing");
        add_file(part);
        const GgufValue* no = find_in(headers_.back(), "split.no");
        if (!no || !is_integer(no->type) || integer_of(*no) != static_cast<std::int64_t>(k))
            fail(part, "is not split file " + std::to_string(k + 1) + " of " + std::to_string(count) + " (its split.no)");
    }
    std::set<std::string_view> seen;
    for (const GgufHeader& h : headers_)
        for (const GgufTensor& t : h.tensors) {
            if (!seen.insert(t.name).second) fail(h.name, "tensor '" + t.name + "' is also in another split file");
            tensors_.push_back(t);
        }
    if (const auto declared = this->count("split.tensors.count"); declared && count > 1 && *declared != tensors_.size())
        fail(path_, "split.tensors.count is " + std::to_string(*declared) + " but the " + std::to_string(count) +
                        " files hold " + std::to_string(tensors_.size()) + " tensors");
}

// ---- metadata ---------------------------------------------------------------------------------

const GgufValue* GgufFiles::find(std::string_view key) const { return find_in(header(), key); }

const GgufValue& GgufFiles::typed(std::string_view key, std::initializer_list<GgufType> wanted, const char* what) const {
    const GgufValue* v = find(key);
    if (std::find(wanted.begin(), wanted.end(), v->type) == wanted.end())
        fail(path_, "key '" + std::string(key) + "' is a " + std::string(gguf_type_name(v->type)) + ", not " + what);
    return *v;
}

std::optional<std::string_view> GgufFiles::string(std::string_view key) const {
    if (!find(key)) return std::nullopt;
    return typed(key, {GgufType::string}, "a string").bytes;
}

std::optional<std::uint64_t> GgufFiles::count(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!is_integer(v->type))
        fail(path_, "key '" + std::string(key) + "' is a " + std::string(gguf_type_name(v->type)) + ", not an integer");
    if (is_signed(v->type) && integer_of(*v) < 0)
        fail(path_, "key '" + std::string(key) + "' is " + std::to_string(integer_of(*v)) + ", not a count");
    return little_endian(v->bytes) & (v->bytes.size() == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * v->bytes.size())) - 1);
}

std::optional<double> GgufFiles::number(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!is_integer(v->type) && v->type != GgufType::float32 && v->type != GgufType::float64)
        fail(path_, "key '" + std::string(key) + "' is a " + std::string(gguf_type_name(v->type)) + ", not a number");
    return number_of(*v);
}

std::optional<bool> GgufFiles::flag(std::string_view key) const {
    if (!find(key)) return std::nullopt;
    return typed(key, {GgufType::boolean}, "a bool").bytes[0] != 0;
}

std::optional<std::uint64_t> GgufFiles::array_size(std::string_view key) const {
    if (!find(key)) return std::nullopt;
    return typed(key, {GgufType::array}, "an array").count;
}

std::vector<std::string_view> GgufFiles::strings(std::string_view key) const {
    std::vector<std::string_view> out;
    if (!find(key)) return out;
    const GgufValue& v = typed(key, {GgufType::array}, "an array of strings");
    if (v.element != GgufType::string)
        fail(path_, "key '" + std::string(key) + "' is an array of " + std::string(gguf_type_name(v.element)) + ", not of strings");
    out.reserve(v.count);
    for_each_gguf_element(v, [&](const GgufValue& e) { out.push_back(e.bytes); });
    return out;
}

std::vector<double> GgufFiles::numbers(std::string_view key) const {
    std::vector<double> out;
    if (!find(key)) return out;
    const GgufValue& v = typed(key, {GgufType::array}, "an array of numbers");
    if (!is_integer(v.element) && v.element != GgufType::float32 && v.element != GgufType::float64)
        fail(path_, "key '" + std::string(key) + "' is an array of " + std::string(gguf_type_name(v.element)) + ", not of numbers");
    out.reserve(v.count);
    for_each_gguf_element(v, [&](const GgufValue& e) { out.push_back(number_of(e)); });
    return out;
}

std::vector<std::int64_t> GgufFiles::integers(std::string_view key) const {
    std::vector<std::int64_t> out;
    if (!find(key)) return out;
    const GgufValue& v = typed(key, {GgufType::array}, "an array of integers");
    if (!is_integer(v.element))
        fail(path_, "key '" + std::string(key) + "' is an array of " + std::string(gguf_type_name(v.element)) + ", not of integers");
    out.reserve(v.count);
    for_each_gguf_element(v, [&](const GgufValue& e) { out.push_back(integer_of(e)); });
    return out;
}

nlohmann::json GgufFiles::to_json(const GgufValue& v, std::size_t max_elements) {
    switch (v.type) {
    case GgufType::string: return std::string(v.bytes);
    case GgufType::boolean: return v.bytes[0] != 0;
    case GgufType::float32: case GgufType::float64: return number_of(v);
    case GgufType::uint64: return little_endian(v.bytes);
    case GgufType::array: {
        nlohmann::json out = nlohmann::json::array();
        std::size_t shown = 0;
        for_each_gguf_element(v, [&](const GgufValue& e) {
            if (shown++ < max_elements) out.push_back(to_json(e, max_elements));
        });
        if (v.count > max_elements) out.push_back("... (" + std::to_string(v.count - max_elements) + " more)");
        return out;
    }
    default: return integer_of(v);
    }
}

// ---- tensors ----------------------------------------------------------------------------------

const GgufTensor* GgufFiles::tensor(std::string_view name) const {
    for (const GgufTensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

bool GgufFiles::readable(std::uint32_t type) { return ggml_type_supported(type); }

namespace {

// Rows [R0, R1) of T (along its first numpy dim; a 1-D tensor's rows are its elements) as a
// byte range [begin, end) from its first byte and the elements it holds. Rows of a 1-D tensor of
// a block type must be whole blocks (InputError naming FILE).
struct RowBytes {
    std::size_t begin = 0, end = 0, elements = 0;
};
RowBytes row_bytes(const GgufTensor& t, std::size_t r0, std::size_t r1, const std::string& file) {
    const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (r0 > r1 || r1 > rows)
        fail(file, "tensor '" + t.name + "': rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") of " +
                       std::to_string(rows));
    const std::size_t per_row = rows ? *checked_element_count(t.shape) / rows : 0;
    const std::size_t block = ggml_block_size(t.type), block_bytes = ggml_block_bytes(t.type);
    const std::size_t e0 = r0 * per_row, e1 = r1 * per_row;
    if (e0 % block != 0 || e1 % block != 0)
        fail(file, "tensor '" + t.name + "': rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                       ") are not whole blocks of " + ggml_type_name(t.type));
    return {e0 / block * block_bytes, e1 / block * block_bytes, e1 - e0};
}

}  // namespace

void GgufFiles::check_readable(const GgufTensor& t) const {
    if (readable(t.type)) return;
    std::string types;
    for (std::uint32_t type = 0; type < ggml_type_count; ++type)
        if (readable(type)) types += (types.empty() ? "" : ", ") + ggml_type_name(type);
    fail(file_of(t), "tensor '" + t.name + "' is of type " + ggml_type_name(t.type) +
                         ", which attntrace does not read (it reads " + types + ")");
}

template <class V>
void GgufFiles::read_rows(const GgufTensor& t, std::size_t r0, std::size_t r1, V* out) const {
    check_readable(t);
    const RowBytes range = row_bytes(t, r0, r1, file_of(t));
    const std::size_t block = ggml_block_size(t.type), block_bytes = ggml_block_bytes(t.type);
    const std::size_t blocks = (range.end - range.begin) / block_bytes;
    const std::size_t piece = std::max<std::size_t>(1, (std::size_t{1} << 20) / block_bytes);  // blocks per piece
    const std::size_t pieces = (blocks + piece - 1) / piece;
    const std::size_t workers = blocks * block_bytes >= (std::size_t{4} << 20) ? read_threads() : 1;
    const FileBytes& bytes = *files_[t.file];
    const std::size_t start = t.offset + range.begin;
    parallel_for(pieces, workers, [&](std::size_t p, std::size_t) {
        thread_local std::vector<char> staged;  // kept: its pages are not faulted in again
        const std::size_t first = p * piece, n = std::min(piece, blocks - first);
        staged.resize(std::max(staged.size(), n * block_bytes));
        bytes.copy(start + first * block_bytes, n * block_bytes, staged.data());
        dequantize_row(t.type, std::string_view(staged.data(), n * block_bytes), out + first * block, n * block);
    });
}

const float* GgufFiles::in_place(const GgufTensor& t, std::size_t r0, std::size_t r1) const {
    if (t.type != ggml_f32 || std::endian::native != std::endian::little) return nullptr;
    r1 = std::min(r1, t.shape.empty() ? std::size_t{1} : t.shape[0]);
    if (r0 > r1) return nullptr;
    const RowBytes range = row_bytes(t, r0, r1, file_of(t));
    const char* at = files_[t.file]->resident(t.offset + range.begin, range.end - range.begin);
    if (reinterpret_cast<std::uintptr_t>(at) % alignof(float) != 0) return nullptr;
    return reinterpret_cast<const float*>(at);
}

void GgufFiles::release(const GgufTensor& t, std::size_t r0, std::size_t r1) const {
    r1 = std::min(r1, t.shape.empty() ? std::size_t{1} : t.shape[0]);
    if (r0 >= r1) return;
    const std::size_t rows = t.shape.empty() ? 1 : t.shape[0], per_row = *checked_element_count(t.shape) / rows;
    const std::size_t block = ggml_block_size(t.type), block_bytes = ggml_block_bytes(t.type);
    // whole blocks covering the rows (a page shared with a neighbour is dropped too: it is read again if touched)
    const std::size_t begin = r0 * per_row / block * block_bytes, end = (r1 * per_row + block - 1) / block * block_bytes;
    files_[t.file]->release(t.offset + begin, end - begin);
}

template void GgufFiles::read_rows<float>(const GgufTensor&, std::size_t, std::size_t, float*) const;
template void GgufFiles::read_rows<double>(const GgufTensor&, std::size_t, std::size_t, double*) const;

bool is_gguf_path(const std::string& path) {
    if (fs::path(path).extension() == ".gguf") return true;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace attntrace
