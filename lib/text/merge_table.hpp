#pragma once
// The merges of a BPE vocabulary by the ids of the pair, for the tokenizer.json BPE model (bpe.cpp)
// and llama.cpp's (gguf_bpe.cpp).
#include <cstddef>
#include <cstdint>
#include <utility>

#include "buffers.hpp"

namespace attntrace::text {

// (left id, right id) -> (rank, merged id), open addressing.
class MergeTable {
public:
    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap < n * 2) cap *= 2;
        slots_.assign(cap, Slot{kEmpty, {0, 0}});
        mask_ = cap - 1;
    }
    // (A, B) -> (RANK, ID). A pair listed twice keeps its last listing (the tokenizers library's
    // HashMap), or with KEEP_FIRST its first (llama.cpp's bpe_ranks.emplace). A and B are ids, never
    // both ~0u.
    void insert(std::uint32_t a, std::uint32_t b, std::uint32_t rank, std::uint32_t id, bool keep_first = false) {
        const std::uint64_t key = (std::uint64_t(a) << 32) | b;
        std::size_t slot = hash(key);
        while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & mask_;
        if (keep_first && slots_[slot].key == key) return;
        slots_[slot] = Slot{key, {rank, id}};
    }
    const std::pair<std::uint32_t, std::uint32_t>* find(std::uint32_t a, std::uint32_t b) const {
        const std::uint64_t key = (std::uint64_t(a) << 32) | b;
        for (std::size_t slot = hash(key);; slot = (slot + 1) & mask_) {
            const Slot& e = slots_[slot];
            if (e.key == key) return &e.value;
            if (e.key == kEmpty) return nullptr;
        }
    }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
    std::size_t hash(std::uint64_t k) const { return ((k * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
    // A pair's key and value side by side: a look-up (a cache miss in GPT-2's 2 MiB table, three
    // for each merge a word makes) reads one line, not one in each of two arrays.
    struct Slot {
        std::uint64_t key;
        std::pair<std::uint32_t, std::uint32_t> value;
    };
    Buffer<Slot> slots_;
    std::size_t mask_ = 0;
};

}  // namespace attntrace::text
