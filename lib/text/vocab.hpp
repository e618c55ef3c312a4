#pragma once
// A vocabulary: id -> string (views into tokenizer.json's bytes) and string -> id (open
// addressing), and the added tokens.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "buffers.hpp"

namespace attntrace::text {

struct AddedToken {
    std::string content;
    std::uint32_t id = 0;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class Vocab {
public:
    // Sets the strings (index = id; an empty view for an id without a string) and indexes them.
    void assign(std::vector<std::string_view> by_id);
    std::optional<std::uint32_t> find(std::string_view s) const;
    // find(S) where S is likely id GUESS's string (a BPE vocabulary lists its merges' results in
    // the merges' order): one sequential read instead of a hash probe when it is.
    std::optional<std::uint32_t> find(std::string_view s, std::uint32_t guess) const {
        if (unique_ && guess < by_id_.size() && by_id_[guess].data() != nullptr && by_id_[guess] == s) return guess;
        return find(s);
    }
    std::size_t size() const { return by_id_.size(); }   // model ids [0, size)
    std::string_view at(std::uint32_t id) const { return by_id_[id]; }

    // Added tokens (tokenizer.json "added_tokens"); their ids may extend past the model's.
    std::vector<AddedToken> added;
    // Indexes every id, model and added (after assign() and added are set); throws InputError
    // "FILE: added_tokens: id N ..." for an added id past the ids there can be.
    void index_all(const std::string& file);
    std::size_t total_size() const { return all_.size(); }  // every id, model and added
    // Id's string, the added token's content first; nullopt for an id without one.
    std::optional<std::string_view> token(std::uint32_t id) const {
        if (id >= all_.size() || all_[id].data() == nullptr) return std::nullopt;
        return all_[id];
    }

private:
    // A slot holds what decides most look-ups without reading the string: its first 8 bytes
    // (zero-padded) and its length (up to 255), beside a tag of its hash; strings up to 8 bytes
    // long are compared there whole.
    struct Slot {
        std::uint32_t id1;  // id + 1; 0: an empty slot
        std::uint32_t tag;  // the hash's high 24 bits and the length's low 8 (255: 255 or more)
        std::uint64_t head;
    };
    static Slot key(std::string_view s, std::uint64_t h);  // a slot for S (hash H), id1 0
    bool same(const Slot& e, const Slot& k, std::string_view s) const {
        return e.tag == k.tag && e.head == k.head && (s.size() <= 8 || by_id_[e.id1 - 1] == s);
    }
    Buffer<std::string_view> by_id_;
    Buffer<Slot> table_;  // open addressing, at most half full
    Buffer<std::string_view> all_;  // by id, model and added
    std::size_t mask_ = 0;
    bool unique_ = true;  // no string listed under two ids (then an id's string finds that id)
};

// The N <= 8 bytes at P in one word, by fixed-size loads (overlapping ones), not a call: every
// byte counts, so two strings of the same length give the same word only when they are equal.
inline std::uint64_t load_upto8(const char* p, std::size_t n) noexcept {
    if (n >= 4) {
        std::uint32_t lo, hi;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + n - 4, 4);
        return lo | std::uint64_t(hi) << 32;
    }
    if (n == 0) return 0;
    return std::uint64_t(static_cast<unsigned char>(p[0])) | std::uint64_t(static_cast<unsigned char>(p[n / 2])) << 8 |
           std::uint64_t(static_cast<unsigned char>(p[n - 1])) << 16;
}

inline std::uint64_t hash_bytes(std::string_view s) noexcept {
    // 8-byte words (the last one's bytes by load_upto8) folded by multiplication, then a final
    // mix: vocabulary strings are short, most are one word.
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xff51afd7ed558ccdull);
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    if (i < s.size()) h = (h ^ load_upto8(s.data() + i, s.size() - i)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 32);
}

}  // namespace attntrace::text
