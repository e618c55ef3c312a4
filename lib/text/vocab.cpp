#include "vocab.hpp"

#include "attntrace/tensor/errors.hpp"

namespace attntrace::text {

std::uint64_t hash_bytes(std::string_view s) noexcept {
    // FNV-1a over 8-byte words, then a final mix: vocabulary strings are short.
    std::uint64_t h = 0xcbf29ce484222325ull ^ s.size();
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        __builtin_memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

void Vocab::assign(std::vector<std::string_view> by_id) {
    by_id_ = std::move(by_id);
    std::size_t cap = 16;
    while (cap < by_id_.size() * 2) cap *= 2;
    table_.assign(cap, 0);
    mask_ = cap - 1;
    for (std::uint32_t id = 0; id < by_id_.size(); ++id) {
        const std::string_view s = by_id_[id];
        if (s.data() == nullptr) continue;
        std::size_t slot = hash_bytes(s) & mask_;
        bool seen = false;  // a string listed twice keeps its first id
        for (; table_[slot] != 0 && !seen; slot = (slot + 1) & mask_) seen = by_id_[table_[slot] - 1] == s;
        if (!seen) table_[slot] = id + 1;
    }
}

std::optional<std::uint32_t> Vocab::find(std::string_view s) const {
    if (table_.empty()) return std::nullopt;
    for (std::size_t slot = hash_bytes(s) & mask_;; slot = (slot + 1) & mask_) {
        const std::uint32_t e = table_[slot];
        if (e == 0) return std::nullopt;
        if (by_id_[e - 1] == s) return e - 1;
    }
}

std::size_t Vocab::total_size() const {
    std::size_t n = by_id_.size();
    for (const AddedToken& t : added) n = std::max<std::size_t>(n, t.id + 1);
    return n;
}

std::optional<std::string_view> Vocab::token(std::uint32_t id) const {
    for (const AddedToken& t : added)
        if (t.id == id) return std::string_view(t.content);
    if (id < by_id_.size() && by_id_[id].data() != nullptr) return by_id_[id];
    return std::nullopt;
}

std::optional<std::uint32_t> Vocab::token_id(std::string_view s) const {
    for (const AddedToken& t : added)
        if (t.content == s) return t.id;
    return find(s);
}

}  // namespace attntrace::text
