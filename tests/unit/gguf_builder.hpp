#pragma once
// GGUF files put together byte by byte as gguf-py's GGUFWriter lays them out, for the unit tests
// of the GGUF reader (test_gguf.cpp) and of what reads its metadata (test_gguf_vocabulary.cpp).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/io/gguf.hpp"

namespace attntrace::testing {

template <class U>
inline std::string le(U v) {
    std::string out(sizeof(U), '\0');
    for (std::size_t i = 0; i < sizeof(U); ++i) out[i] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
    return out;
}
inline std::string gstr(std::string_view s) { return le<std::uint64_t>(s.size()) + std::string(s); }
inline std::string f32(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    return le(b);
}

// A GGUF file, put together as GGUFWriter writes one.
struct Builder {
    std::uint32_t version = 3;
    std::size_t alignment = 32;
    std::string kv;
    std::uint64_t n_kv = 0;
    struct Tensor {
        std::string name;
        std::vector<std::int64_t> ne;
        std::uint32_t type;
        std::string data;
        std::optional<std::uint64_t> offset;  // default: packed in order
    };
    std::vector<Tensor> tensors;
    std::optional<std::uint64_t> claimed_tensors, claimed_kv;

    Builder& add(std::string_view key, GgufType type, const std::string& value) {
        kv += gstr(key) + le(static_cast<std::uint32_t>(type)) + value;
        ++n_kv;
        return *this;
    }
    Builder& tensor(std::string name, std::vector<std::int64_t> ne, std::uint32_t type, std::string data) {
        tensors.push_back({std::move(name), std::move(ne), type, std::move(data), std::nullopt});
        return *this;
    }
    std::string pad(std::size_t n) const { return std::string((alignment - n % alignment) % alignment, '\0'); }
    std::string bytes() const {
        std::string out = "GGUF" + le(version) + le<std::uint64_t>(claimed_tensors.value_or(tensors.size())) +
                          le<std::uint64_t>(claimed_kv.value_or(n_kv)) + kv;
        std::uint64_t offset = 0;
        for (const Tensor& t : tensors) {
            out += gstr(t.name) + le<std::uint32_t>(static_cast<std::uint32_t>(t.ne.size()));
            for (std::int64_t d : t.ne) out += le(d);
            out += le(t.type) + le<std::uint64_t>(t.offset.value_or(offset));
            offset += t.data.size() + pad(t.data.size()).size();
        }
        out += pad(out.size());
        for (const Tensor& t : tensors) out += t.data + pad(t.data.size());
        return out;
    }
};

}  // namespace attntrace::testing
