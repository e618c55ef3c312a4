// allocate_buffer / free_buffer: 64-byte aligned blocks; blocks of 64 KiB and up are populated at
// once and, once freed, kept for the next request they can hold (buffer.hpp).
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/timeline.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace attntrace {

namespace {
constexpr std::size_t huge_page = std::size_t{2} << 20;
// and up: huge pages. From 2 MiB, not 4: a GPT-2 vocabulary's look-up table (2 MiB) was 512 pages,
// each a fault and a TLB miss at its random probes (its tokenizer's load 41.6 -> 32.6 ms on the AMD
// EPYC VM, docs/performance.md)
constexpr std::size_t large = std::size_t{2} << 20;
constexpr std::size_t populated = std::size_t{64} << 10;  // and up: populated, then reused
constexpr std::size_t max_kept = 8;                       // freed blocks kept at most,
constexpr std::size_t max_kept_bytes = std::size_t{64} << 20;  // holding at most this

#if defined(__SANITIZE_ADDRESS__)
constexpr bool keep_freed = false;  // AddressSanitizer then sees every use of a freed block
#else
constexpr bool keep_freed = true;
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and nothing changes
#endif

// The whole pages inside [P, P + BYTES) made present and writable by one system call instead of
// one page fault per 4 KiB page as they are first written (3 ms against 1 ms per MiB on the VM
// measured, docs/performance.md). A hint: failure changes nothing.
void populate(void* p, std::size_t bytes) {
    const std::size_t page = 4096;
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t begin = (at + page - 1) / page * page, end = (at + bytes) / page * page;
    if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// A fresh block of BYTES (>= `populated`): 2 MiB-aligned huge pages from `large` on.
void* fresh_block(std::size_t bytes, std::size_t& capacity) {
    if (bytes < large) {
        capacity = (bytes + 63) / 64 * 64;
        void* p = std::aligned_alloc(64, capacity);
        if (!p) throw std::bad_alloc();
        populate(p, capacity);
        return p;
    }
    capacity = (bytes + huge_page - 1) / huge_page * huge_page;
    void* p = std::aligned_alloc(huge_page, capacity);
    if (!p) throw std::bad_alloc();
    madvise(p, capacity, MADV_HUGEPAGE);  // a hint: without THP it changes nothing
    return p;
}

// Blocks of `populated` bytes and up: their capacities, and the freed ones kept. A run allocates
// parameters, (B, L, E) projections, contexts and outputs one after another; a block freed (the
// q, k, v projections) serves the next request it can hold (the output projection's), whose pages
// are then already present: no page faults and no zeroing. The smallest kept block that holds a
// request serves it, if it is at most 4x the request. At most 8 blocks and 64 MiB are kept (the
// oldest go first), so a run's peak grows by at most that; larger blocks are freed at once.
class BlockPool {
public:
    // The region for pages made ahead (PagesAhead): once per process, none in AddressSanitizer builds.
    bool set_ahead(char* base, std::size_t size) {
        const std::lock_guard<std::mutex> lock(mutex_);
        if (!keep_freed || ahead_) return false;
        ahead_ = base, ahead_size_ = size;
        return true;
    }
    // The offset in the region up to which blocks were handed out.
    std::size_t ahead_used() const { return ahead_next_.load(std::memory_order_relaxed); }

    void* allocate(std::size_t bytes) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            auto best = kept_.end();
            for (auto it = kept_.begin(); it != kept_.end(); ++it) {
                const std::size_t c = capacity_[*it];
                if (c >= bytes && c / 4 <= bytes && (best == kept_.end() || c < capacity_[*best])) best = it;
            }
            if (best != kept_.end()) {
                void* p = *best;
                kept_bytes_ -= capacity_[p];
                kept_.erase(best);
                return p;
            }
            if (void* p = carve(bytes)) return p;
        }
        std::size_t capacity = 0;
        void* p = fresh_block(bytes, capacity);
        const std::lock_guard<std::mutex> lock(mutex_);
        capacity_[p] = capacity;
        return p;
    }

    // False when P is not one of the pool's blocks.
    bool release(void* p) noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        const auto it = capacity_.find(p);
        if (it == capacity_.end()) return false;
        if (!keep_freed) {
            capacity_.erase(it);
            std::free(p);
            return true;
        }
        kept_.push_back(p);
        kept_bytes_ += it->second;
        while (!kept_.empty() && (kept_.size() > max_kept || kept_bytes_ > max_kept_bytes)) {
            void* oldest = kept_.front();
            kept_bytes_ -= capacity_[oldest];
            capacity_.erase(oldest);
            if (!in_ahead(oldest)) std::free(oldest);  // (the region's memory is never given back)
            kept_.erase(kept_.begin());
        }
        return true;
    }

private:
    // The next BYTES of the pages-ahead region (4 KiB-aligned), or null when it has no room. Under mutex_.
    void* carve(std::size_t bytes) {
        const std::size_t page = 4096, at = ahead_next_.load(std::memory_order_relaxed);
        const std::size_t capacity = (bytes + page - 1) / page * page;
        if (!ahead_ || capacity > ahead_size_ - at) return nullptr;
        ahead_next_.store(at + capacity, std::memory_order_relaxed);
        capacity_[ahead_ + at] = capacity;
        return ahead_ + at;
    }
    bool in_ahead(const void* p) const {
        const auto* c = static_cast<const char*>(p);
        return ahead_ && c >= ahead_ && c < ahead_ + ahead_size_;
    }

    std::mutex mutex_;
    std::unordered_map<void*, std::size_t> capacity_;  // every live or kept block
    std::vector<void*> kept_;                          // freed, oldest first
    std::size_t kept_bytes_ = 0;                       // their capacities' sum
    char* ahead_ = nullptr;                            // the pages-ahead region (PagesAhead), or null
    std::size_t ahead_size_ = 0;
    std::atomic<std::size_t> ahead_next_{0};           // its first byte not handed out
};

BlockPool& pool() {
    static BlockPool* const instance = new BlockPool();  // never destroyed: frees may come late
    return *instance;
}

}  // namespace

void* allocate_buffer(std::size_t bytes) {
    if (bytes >= populated) return pool().allocate(bytes);
    if (void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0))) return p;
    throw std::bad_alloc();
}

void free_buffer(void* p) noexcept {
    if (p && !pool().release(p)) std::free(p);
}

std::size_t pages_ahead_handed_out() noexcept { return pool().ahead_used(); }

// A first write instead of MADV_POPULATE_WRITE, which holds the address space's lock for reading
// while the pages are made: on the AMD EPYC VM a 2 MiB page the host had taken back took ~5 ms, and
// every mmap, mprotect and thread start of the other threads waited behind it (GPT-2 small at
// L = 256: its embedding 2-9 ms, but 20-31 ms in the runs where PagesAhead's helper was at work;
// docs/performance.md). A page fault holds only its own mapping's lock. The write is an atomic OR
// of zero: whatever an owner writes there meanwhile stays.
void make_huge_page_present(void* p) {
    char* const at = static_cast<char*>(p);
    std::atomic_ref<char>(*at).fetch_or(0, std::memory_order_relaxed);
    unsigned char last = 0;  // the fault gave a 4 KiB page (no huge page to be had, THP off): the rest in one call
    if (mincore(at + huge_page - 4096, 4096, &last) != 0 || (last & 1) == 0) populate(at, huge_page);
}

PagesAhead::PagesAhead(std::size_t bytes) {
    bytes = (bytes + huge_page - 1) / huge_page * huge_page;
    if (bytes == 0) return;
    // 2 MiB-aligned inside a mapping of one huge page more; never unmapped (blocks in it may outlive
    // this object: the process's end returns it)
    void* map = mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (map == MAP_FAILED) return;
    const auto at = reinterpret_cast<std::uintptr_t>(map);
    char* base = reinterpret_cast<char*>((at + huge_page - 1) / huge_page * huge_page);
    madvise(base, bytes, MADV_HUGEPAGE);  // a hint, as for fresh blocks
    if (!pool().set_ahead(base, bytes)) {
        munmap(map, bytes + huge_page);
        return;
    }
    try {
        helper_ = std::thread([this, base, bytes] {
            // one huge page at a time, each past the part already handed out (its owner is writing it)
            for (std::size_t done = 0; !stop_.load(std::memory_order_relaxed);) {
                const std::size_t next = (pool().ahead_used() + huge_page - 1) / huge_page * huge_page;
                const std::size_t from = std::max(done, next);
                if (from >= bytes) break;
                make_huge_page_present(base + from);
                done = from + huge_page;
            }
            timeline_mark("pages ahead: made");
        });
    } catch (const std::system_error&) {  // no thread to be had: the region serves, its pages made as used
    }
}

PagesAhead::~PagesAhead() {
    stop_.store(true, std::memory_order_relaxed);
    if (helper_.joinable()) helper_.join();
}

void populate_for_writing(void* p, std::size_t bytes, std::size_t threads) {
    constexpr std::size_t page = 4096, least = std::size_t{1} << 20;
    const std::size_t slices = std::max<std::size_t>(1, std::min(threads, bytes / least));
    const std::size_t per = (bytes / slices + page - 1) / page * page;
    parallel_for(slices, slices, [&](std::size_t i, std::size_t) {
        const std::size_t from = std::min(bytes, i * per);
        populate(static_cast<char*>(p) + from, std::min(per, bytes - from));
    });
}

}  // namespace attntrace
