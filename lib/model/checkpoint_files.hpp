#pragma once
// The safetensors files of a checkpoint: a folder with model.safetensors or the shards that
// model.safetensors.index.json lists, or one .safetensors file. Each file is opened (memory-mapped,
// header parsed) when one of its tensors is first asked for; a tensor is read converted to T, and
// its pages are dropped once read. Internal to lib/model.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
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

    // NAME's values read in place when the file already holds them as T (F32 for float, F64 for
    // double, aligned, on a little-endian machine): a pointer into the file's bytes, its pages
    // mapped (FileBytes::resident), valid while this object lives; nullptr when they need
    // converting (read_into them instead). release() drops the pages once they are used.
    // With R0, R1: rows [R0, R1) only (a block of an LM head), the pointer to row R0.
    template <class T>
    const T* in_place(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) {
        static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
        if constexpr (std::endian::native != std::endian::little) return nullptr;
        const Shard& s = shard(name);
        const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
        if (t.dtype != (std::is_same_v<T, float> ? "F32" : "F64")) return nullptr;
        const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
        const std::size_t row = rows ? t.nbytes / rows : 0;
        r1 = std::min(r1, rows);
        if (r0 > r1) return nullptr;
        const char* at = s.bytes.resident(t.offset + r0 * row, (r1 - r0) * row);
        if (reinterpret_cast<std::uintptr_t>(at) % alignof(T) != 0) return nullptr;
        return reinterpret_cast<const T*>(at);
    }
    // Drops the pages of rows [R0, R1) of NAME (all of it by default) from memory, when mapped.
    void release(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) {
        const Shard& s = shard(name);
        const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
        const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
        if (rows == 0) return;
        const std::size_t row = t.nbytes / rows;
        r1 = std::min(r1, rows);
        if (r0 < r1) s.bytes.release(t.offset + r0 * row, (r1 - r0) * row);
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
