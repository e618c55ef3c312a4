#pragma once
// The source of a Hugging Face checkpoint (model_source.hpp): a folder with config.json and
// model.safetensors or the shards that model.safetensors.index.json lists, or one .safetensors
// file (no configuration). config.json is read when first asked for, and the safetensors files
// after it (so a config error is said first); each file is opened (memory-mapped, header
// parsed) when one of its tensors is first asked for; a tensor is read converted to T, and its
// pages are dropped once read. Internal to lib/model.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/safetensors.hpp"
#include "model_source.hpp"

namespace attntrace {

// WeightPages::read (file_bytes.hpp): the tensors asked for in place, copied by pread into chunks
// of memory that are reused once every tensor staged has been released (a layer's weights, from
// load_block to release_block), so the run touches the same pages layer after layer instead of a
// fresh mapping of each. A chunk is made for a tensor that fits in none (its size rounded up to 4
// MiB) and kept for the source's life.
class StagedTensors {
public:
    // Bytes [OFFSET, OFFSET + LENGTH) of FILE, copied to a 64-byte-aligned place that stays NAME's
    // until release(NAME).
    const char* stage(const std::string& name, const FileBytes& file, std::size_t offset, std::size_t length);
    void release(const std::string& name);
    void free_chunks();  // when no name is staged: the chunks go back to the allocator
    // The chunks' bytes that staging tensors of LENGTHS bytes, in order, into none would make.
    static std::size_t chunk_bytes(const std::vector<std::size_t>& lengths);

private:
    struct Chunk {
        std::unique_ptr<char, void (*)(char*)> data;
        std::size_t size;
    };
    std::mutex mutex_;
    std::vector<Chunk> chunks_;
    std::size_t chunk_ = 0, used_ = 0;  // where the next copy goes: chunks_[chunk_] from byte used_
    std::multiset<std::string> live_;   // the names staged and not yet released
};

class SafetensorsSource final : public ModelSource {
public:
    // PATH: a folder with config.json and model.safetensors or model.safetensors.index.json, or
    // one .safetensors file.
    explicit SafetensorsSource(std::string path);

    const std::string& path() const override { return path_; }
    const std::map<std::string, std::string>& names() override;
    TensorMeta meta(const std::string& name) override;
    const nlohmann::json& config() override;
    const std::string& config_name() const override { return config_name_; }
    std::string config_word() const override { return "config.json"; }
    const std::map<std::string, std::string>& key_names() const override;
    void release(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) override;
    bool copies_in_place(const std::string& name) override;
    void free_copies() override { staged_.free_chunks(); }
    std::size_t copies_bytes(const std::vector<std::size_t>& lengths) const override {
        return StagedTensors::chunk_bytes(lengths);
    }

private:
    struct Shard {
        FileBytes bytes;
        SafetensorsIndex index;
    };

    void rows(const std::string& name, std::size_t r0, std::size_t r1, float* out) override;
    void rows(const std::string& name, std::size_t r0, std::size_t r1, double* out) override;
    template <class T>
    void rows_of(const std::string& name, std::size_t r0, std::size_t r1, T* out);
    const void* resident(const std::string& name, std::size_t r0, std::size_t r1, std::size_t element) override;

    void open_files();
    std::string path_of(const std::string& file) const;
    void add_file(const std::string& file);
    void read_index(const std::string& index_path);
    Shard& open_shard(const std::string& file);
    Shard& shard(const std::string& name);

    std::string path_;
    std::string dir_;                           // the folder of the files
    std::string config_name_;                   // DIR/config.json
    std::optional<nlohmann::json> config_;
    bool opened_ = false;
    std::string index_name_;                    // model.safetensors.index.json, when sharded
    std::map<std::string, std::string> where_;  // tensor -> file
    std::map<std::string, std::unique_ptr<Shard>> shards_;
    StagedTensors staged_;  // WeightPages::read: the tensors asked for in place
};

}  // namespace attntrace
