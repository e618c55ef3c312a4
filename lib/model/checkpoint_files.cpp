// A checkpoint's safetensors files (checkpoint_files.hpp).
#include "checkpoint_files.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

}  // namespace

std::shared_ptr<CheckpointFiles> CheckpointFiles::open(const std::string& path) {
    auto files = std::make_shared<CheckpointFiles>();
    const fs::path p(path);
    if (!fs::is_directory(p)) {
        files->dir_ = p.parent_path().string();
        files->add_file(p.filename().string());
        return files;
    }
    files->dir_ = path;
    if (fs::exists(p / "model.safetensors.index.json")) {
        files->read_index((p / "model.safetensors.index.json").string());
    } else if (fs::exists(p / "model.safetensors")) {
        files->add_file("model.safetensors");
    } else {
        fail(path, "no model.safetensors or model.safetensors.index.json");
    }
    return files;
}

std::string CheckpointFiles::path_of(const std::string& file) const { return (fs::path(dir_) / file).string(); }

void CheckpointFiles::add_file(const std::string& file) {
    Shard& s = open_shard(file);
    for (const auto& [name, t] : s.index.tensors) where_.emplace(name, file);
}

void CheckpointFiles::read_index(const std::string& index_path) {
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

CheckpointFiles::Shard& CheckpointFiles::open_shard(const std::string& file) {
    auto it = shards_.find(file);
    if (it != shards_.end()) return *it->second;
    const std::string path = path_of(file);
    if (!index_name_.empty() && !fs::exists(path)) fail(index_name_, "shard " + file + " is missing (listed in the weight_map)");
    FileBytes bytes = FileBytes::open(path);
    SafetensorsIndex index = index_safetensors(bytes.bytes(), path);
    auto shard = std::make_unique<Shard>(Shard{std::move(bytes), std::move(index)});
    return *shards_.emplace(file, std::move(shard)).first->second;
}

CheckpointFiles::Shard& CheckpointFiles::shard(const std::string& name) {
    const auto it = where_.find(name);
    if (it == where_.end()) fail(dir_, "no tensor '" + name + "'");
    Shard& s = open_shard(it->second);
    if (!s.index.tensors.count(name)) fail(path_of(it->second), "no tensor '" + name + "' (the weight_map puts it in this file)");
    return s;
}

}  // namespace attntrace
