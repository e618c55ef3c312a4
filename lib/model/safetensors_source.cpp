// A checkpoint's config.json and safetensors files (safetensors_source.hpp).
#include "safetensors_source.hpp"

#include <algorithm>
#include <bit>
#include <filesystem>

#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

// a new chunk holds the tensor rounded up to 4 MiB (huge pages, buffer.hpp): the same tensors of the
// next layer then land in the same chunks, and a small model populates no more than it uses
constexpr std::size_t kAlign = 64, kChunkBytes = std::size_t{4} << 20;
}  // namespace

std::size_t StagedTensors::chunk_bytes(const std::vector<std::size_t>& lengths) {
    std::size_t total = 0, left = 0;  // the chunks made, and the room left in the last
    for (std::size_t length : lengths) {
        const std::size_t need = (length + kAlign - 1) / kAlign * kAlign;
        if (need > left) {
            const std::size_t size = (need + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
            total += size, left = size;
        }
        left -= need;
    }
    return total;
}

const char* StagedTensors::stage(const std::string& name, const FileBytes& file, std::size_t offset, std::size_t length) {
    constexpr std::size_t align = kAlign, chunk_bytes = kChunkBytes;
    const std::size_t need = (length + align - 1) / align * align;
    char* at = nullptr;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        while (chunk_ < chunks_.size() && used_ + need > chunks_[chunk_].size) ++chunk_, used_ = 0;
        if (chunk_ == chunks_.size()) {
            const std::size_t size = (need + chunk_bytes - 1) / chunk_bytes * chunk_bytes;
            chunks_.push_back({{static_cast<char*>(allocate_buffer(size)), [](char* p) { free_buffer(p); }}, size});
        }
        at = chunks_[chunk_].data.get() + used_;
        used_ += need;
        live_.insert(name);
    }
    file.copy(offset, length, at);
    return at;
}

void StagedTensors::release(const std::string& name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(name);
    if (live_.empty()) chunk_ = 0, used_ = 0;
}

void StagedTensors::free_chunks() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (live_.empty()) chunks_.clear(), chunk_ = 0, used_ = 0;
}

SafetensorsSource::SafetensorsSource(std::string path)
    : path_(std::move(path)), config_name_((fs::path(path_) / "config.json").string()) {}

const json& SafetensorsSource::config() {
    if (config_) return *config_;
    if (!fs::is_directory(path_)) fail(path_, "not a checkpoint folder (config.json and model.safetensors)");
    const FileBytes bytes = FileBytes::open(config_name_);
    try {
        config_ = json::parse(bytes.bytes());
    } catch (const json::exception& e) {
        fail(config_name_, std::string("not valid JSON: ") + e.what());
    }
    return *config_;
}

const std::map<std::string, std::string>& SafetensorsSource::key_names() const {
    static const std::map<std::string, std::string> none;
    return none;
}

void SafetensorsSource::open_files() {
    if (opened_) return;
    opened_ = true;
    const fs::path p(path_);
    if (!fs::is_directory(p)) {
        dir_ = p.parent_path().string();
        return add_file(p.filename().string());
    }
    dir_ = path_;
    if (fs::exists(p / "model.safetensors.index.json")) {
        read_index((p / "model.safetensors.index.json").string());
    } else if (fs::exists(p / "model.safetensors")) {
        add_file("model.safetensors");
    } else {
        fail(path_, "no model.safetensors or model.safetensors.index.json");
    }
}

const std::map<std::string, std::string>& SafetensorsSource::names() {
    open_files();
    return where_;
}

TensorMeta SafetensorsSource::meta(const std::string& name) {
    const SafetensorsIndex::Tensor& t = shard(name).index.tensors.at(name);
    return {t.dtype, t.shape};
}

std::string SafetensorsSource::path_of(const std::string& file) const { return (fs::path(dir_) / file).string(); }

void SafetensorsSource::add_file(const std::string& file) {
    Shard& s = open_shard(file);
    for (const auto& [name, t] : s.index.tensors) where_.emplace(name, file);
}

void SafetensorsSource::read_index(const std::string& index_path) {
    const FileBytes bytes = FileBytes::open(index_path);
    json index;
    try {
        index = json::parse(bytes.bytes());
    } catch (const json::exception& e) {
        fail(index_path, std::string("not valid JSON: ") + e.what());
    }
    const auto map = index.find("weight_map");
    if (map == index.end() || !map->is_object()) fail(index_path, "missing 'weight_map'");
    for (const auto& [name, file] : map->items()) {
        if (!file.is_string()) fail(index_path, "weight_map['" + name + "'] is not a file name");
        where_.emplace(name, file.get<std::string>());
    }
    index_name_ = index_path;
}

SafetensorsSource::Shard& SafetensorsSource::open_shard(const std::string& file) {
    auto it = shards_.find(file);
    if (it != shards_.end()) return *it->second;
    const std::string path = path_of(file);
    if (!index_name_.empty() && !fs::exists(path)) fail(index_name_, "shard " + file + " is missing (listed in the weight_map)");
    FileBytes bytes = FileBytes::open(path);
    SafetensorsIndex index = index_safetensors(bytes.bytes(), path);
    auto shard = std::make_unique<Shard>(Shard{std::move(bytes), std::move(index)});
    return *shards_.emplace(file, std::move(shard)).first->second;
}

SafetensorsSource::Shard& SafetensorsSource::shard(const std::string& name) {
    open_files();
    const auto it = where_.find(name);
    if (it == where_.end()) fail(dir_, "no tensor '" + name + "'");
    Shard& s = open_shard(it->second);
    if (!s.index.tensors.count(name)) fail(path_of(it->second), "no tensor '" + name + "' (the weight_map puts it in this file)");
    return s;
}

template <class T>
void SafetensorsSource::rows_of(const std::string& name, std::size_t r0, std::size_t r1, T* out) {
    const Shard& s = shard(name);
    read_safetensors_rows<T>(s.bytes.bytes(), s.index, name, r0, r1, out, &s.bytes);
}

void SafetensorsSource::rows(const std::string& name, std::size_t r0, std::size_t r1, float* out) {
    rows_of(name, r0, r1, out);
}
void SafetensorsSource::rows(const std::string& name, std::size_t r0, std::size_t r1, double* out) {
    rows_of(name, r0, r1, out);
}

// F32 for float, F64 for double, aligned, on a little-endian machine: a pointer into the mapping.
const void* SafetensorsSource::resident(const std::string& name, std::size_t r0, std::size_t r1, std::size_t element) {
    if constexpr (std::endian::native != std::endian::little) return nullptr;
    const Shard& s = shard(name);
    const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
    if (t.dtype != (element == 4 ? "F32" : "F64")) return nullptr;
    const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
    const std::size_t row = rows ? t.nbytes / rows : 0;
    r1 = std::min(r1, rows);
    if (r0 > r1) return nullptr;
    const char* at = read_weight_pages(s.bytes) ? staged_.stage(name, s.bytes, t.offset + r0 * row, (r1 - r0) * row)
                                                : s.bytes.resident(t.offset + r0 * row, (r1 - r0) * row);
    if (reinterpret_cast<std::uintptr_t>(at) % element != 0) return nullptr;
    return at;
}

void SafetensorsSource::release(const std::string& name, std::size_t r0, std::size_t r1) {
    const Shard& s = shard(name);
    const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
    const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (rows == 0) return;
    const std::size_t row = t.nbytes / rows;
    r1 = std::min(r1, rows);
    if (r0 < r1) s.bytes.release(t.offset + r0 * row, (r1 - r0) * row);
    staged_.release(name);
}

bool SafetensorsSource::copies_in_place(const std::string& name) { return read_weight_pages(shard(name).bytes); }

}  // namespace attntrace
