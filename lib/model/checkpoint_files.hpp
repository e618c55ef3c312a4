#pragma once
// The safetensors files of a checkpoint: a folder with model.safetensors or the shards that
// model.safetensors.index.json lists, or one .safetensors file. Each file is opened (memory-mapped,
// header parsed) when one of its tensors is first asked for; a tensor is read converted to T, and
// its pages are dropped once read. Internal to lib/model.
#include <map>
#include <memory>
#include <string>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class CheckpointFiles {
public:
    // PATH: a folder with model.safetensors or model.safetensors.index.json, or one .safetensors file.
    static std::shared_ptr<CheckpointFiles> open(const std::string& path);

    const std::map<std::string, std::string>& names() const { return where_; }  // tensor -> file
    const std::string& dir() const { return dir_; }

    const SafetensorsIndex::Tensor& meta(const std::string& name) { return shard(name).index.tensors.at(name); }

    template <class T>
    Array<T> read(const std::string& name) {
        const Shard& s = shard(name);
        Array<T> out = read_safetensors_tensor<T>(s.bytes.bytes(), s.index, name, &s.bytes);
        const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
        s.bytes.release(t.offset, t.nbytes);  // converted: the file's pages need not stay resident
        return out;
    }

    // All of NAME converted to T into OUT (its element count), its pages dropped once read.
    template <class T>
    void read_into(const std::string& name, T* out) {
        const Shard& s = shard(name);
        const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
        read_safetensors_rows<T>(s.bytes.bytes(), s.index, name, 0, t.shape.empty() ? 1 : t.shape[0], out, &s.bytes);
        s.bytes.release(t.offset, t.nbytes);
    }

    // Rows [R0, R1) of NAME converted to T into OUT: a block of an embedding table or LM head.
    template <class T>
    void read_rows(const std::string& name, std::size_t r0, std::size_t r1, T* out) {
        const Shard& s = shard(name);
        read_safetensors_rows<T>(s.bytes.bytes(), s.index, name, r0, r1, out, &s.bytes);
    }

private:
    struct Shard {
        FileBytes bytes;
        SafetensorsIndex index;
    };

    std::string path_of(const std::string& file) const;
    void add_file(const std::string& file);
    void read_index(const std::string& index_path);
    Shard& open_shard(const std::string& file);
    Shard& shard(const std::string& name);

    std::string dir_;
    std::string index_name_;                    // model.safetensors.index.json, when sharded
    std::map<std::string, std::string> where_;  // tensor -> file
    std::map<std::string, std::unique_ptr<Shard>> shards_;
};

}  // namespace attntrace
