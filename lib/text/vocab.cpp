#include "vocab.hpp"

#include <algorithm>
#include <cstring>

#include "attntrace/tensor/errors.hpp"

namespace attntrace::text {

Vocab::Slot Vocab::key(std::string_view s, std::uint64_t h) {
    const std::uint64_t head = load_upto8(s.data(), std::min<std::size_t>(s.size(), 8));
    return Slot{0, static_cast<std::uint32_t>((h >> 40) << 8 | std::min<std::size_t>(s.size(), 255)), head};
}

void Vocab::assign(std::vector<std::string_view> by_id) {
    by_id_.assign(by_id.begin(), by_id.end());
    std::size_t cap = 16;
    while (cap < by_id_.size() * 2) cap *= 2;
    table_.assign(cap, Slot{0, 0, 0});
    mask_ = cap - 1;
    unique_ = true;
    for (std::uint32_t id = 0; id < by_id_.size(); ++id) {
        const std::string_view s = by_id_[id];
        if (s.data() == nullptr) continue;
        const std::uint64_t h = hash_bytes(s);
        Slot k = key(s, h);
        std::size_t slot = h & mask_;
        bool seen = false;  // a string listed twice keeps its first id
        for (; table_[slot].id1 != 0 && !seen; slot = (slot + 1) & mask_) seen = same(table_[slot], k, s);
        k.id1 = id + 1;
        if (!seen) table_[slot] = k;
        unique_ = unique_ && !seen;
    }
}

std::optional<std::uint32_t> Vocab::find(std::string_view s) const {
    if (table_.empty()) return std::nullopt;
    const std::uint64_t h = hash_bytes(s);
    const Slot k = key(s, h);
    for (std::size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
        const Slot& e = table_[slot];
        if (e.id1 == 0) return std::nullopt;
        if (same(e, k, s)) return e.id1 - 1;
    }
}

void Vocab::index_all(const std::string& file) {
    const std::size_t limit = by_id_.size() + added.size();
    all_.assign(by_id_.begin(), by_id_.end());
    for (const AddedToken& t : added) {
        if (t.id >= limit)
            throw InputError(file + ": added_tokens: id " + std::to_string(t.id) + " of \"" + t.content + "\" is past the " +
                             std::to_string(limit) + " ids of the vocabulary and added tokens");
        if (t.id >= all_.size()) all_.resize(t.id + 1);
    }
    for (auto t = added.rbegin(); t != added.rend(); ++t) all_[t->id] = t->content;  // the first listed wins
}

}  // namespace attntrace::text
