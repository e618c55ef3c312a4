#pragma once
// The tokens a model gave for a word, by the word's bytes, as the library's BPE cache keeps them:
// a text repeats its words, and most of a model's time goes to the first sight of each. Keys and
// tokens live in two flat arrays; the table is open addressing with a tag of the hash, grown up to
// 65536 words and then left as it is (the library's cache is bounded the same way).
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "vocab.hpp"

namespace attntrace::text {

struct CachedToken {
    std::uint32_t id, len;  // len: bytes of the word the token covers
};

class WordCache {
public:
    // The cached tokens of WORD (hash H = hash_bytes(WORD)), or nullptr; COUNT is set to their number.
    const CachedToken* find(std::string_view word, std::uint64_t h, std::size_t& count) const {
        if (slots_.empty()) return nullptr;
        const auto tag = static_cast<std::uint32_t>(h >> 32);
        for (std::size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
            const Slot& e = slots_[slot];
            if (e.key_len == kEmpty) return nullptr;
            if (e.tag == tag && e.key_len == word.size() && std::memcmp(keys_.data() + e.key_at, word.data(), word.size()) == 0) {
                count = e.count;
                return tokens_.data() + e.tokens_at;
            }
        }
    }
    // Remembers TOKENS for WORD (not cached yet) while there is room: the table doubles when half
    // full, up to kMaxSlots (a few thousand distinct words need only a small one).
    void insert(std::string_view word, std::uint64_t h, const std::vector<CachedToken>& tokens) {
        if (word.size() >= kMaxWord) return;
        if (2 * (used_ + 1) > slots_.size()) {
            if (slots_.size() >= kMaxSlots) return;
            grow();
        }
        place(Slot{static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(word.size()),
                   static_cast<std::uint32_t>(tokens_.size()), static_cast<std::uint32_t>(tokens.size()),
                   static_cast<std::uint32_t>(h >> 32)},
              h);
        keys_.append(word);
        tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
        ++used_;
    }

    static constexpr std::size_t kMaxWord = 256;  // longer words are not cached (as the library)

private:
    static constexpr std::size_t kMaxSlots = std::size_t(1) << 17;
    static constexpr std::uint32_t kEmpty = ~std::uint32_t(0);
    struct Slot {
        std::uint32_t key_at = 0, key_len = kEmpty, tokens_at = 0, count = 0, tag = 0;
    };
    void place(const Slot& e, std::uint64_t h) {
        std::size_t slot = h & mask_;
        while (slots_[slot].key_len != kEmpty) slot = (slot + 1) & mask_;
        slots_[slot] = e;
    }
    void grow() {
        std::vector<Slot> old(std::max<std::size_t>(slots_.size() * 2, 1024));
        old.swap(slots_);
        mask_ = slots_.size() - 1;
        for (const Slot& e : old)
            if (e.key_len != kEmpty) place(e, hash_bytes(std::string_view(keys_.data() + e.key_at, e.key_len)));
    }
    std::size_t mask_ = 0;
    std::vector<Slot> slots_;
    std::string keys_;
    std::vector<CachedToken> tokens_;
    std::size_t used_ = 0;
};

}  // namespace attntrace::text
