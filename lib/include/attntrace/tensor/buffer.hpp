#pragma once
// The allocator behind every Array: large blocks (2 MiB and up) are 2 MiB-aligned and marked for
// transparent huge pages (madvise), so a (B, H, Lq, Lk) weights buffer costs a few dozen page
// faults instead of thousands. Smaller blocks from 64 KiB on are populated by one madvise. Freed
// ones are kept (at most 8 and 64 MiB) to serve a later request they can hold, with their pages
// already present; where a PagesAhead region was made, it serves those no kept block serves. Small
// blocks come from malloc as usual. Memory is not initialized.
#include <atomic>
#include <cstddef>
#include <new>
#include <thread>

namespace attntrace {

void* allocate_buffer(std::size_t bytes);
void free_buffer(void* p) noexcept;

// The whole pages inside [P, P + BYTES) (fresh memory, or a file's shared mapping about to be
// written) made present and writable by madvise(MADV_POPULATE_WRITE), in page-aligned slices of at
// least 1 MiB over up to THREADS workers: one system call per slice instead of a page fault per
// page amid the products that write them. A hint: where the kernel refuses, nothing changes.
void populate_for_writing(void* p, std::size_t bytes, std::size_t threads);

// The huge page at P (2 MiB-aligned, mapped writable) made present without holding the address
// space's lock: one write where the kernel gives a huge page, else MADV_POPULATE_WRITE for the
// 4 KiB pages. Its bytes keep their values. PagesAhead's helper makes its region this way.
void make_huge_page_present(void* p);

// Pages made ahead of the blocks a run is about to ask for, on a core that would otherwise wait: a
// region of BYTES (rounded up to 2 MiB, in huge pages where the kernel gives them) from which the
// pool hands out the blocks of 64 KiB and up that no freed block serves, in the order asked, while
// a helper thread makes its pages present front to back (make_huge_page_present, 2 MiB at a time),
// always past the part already handed out. Made while a run reads its inputs, the zeroing of its
// projections' fresh pages (about 1 GB/s on a VM, docs/performance.md) happens there instead of
// amid the products. Once per process (a later one changes nothing), none under AddressSanitizer;
// the region is never given back. The destructor stops the helper and waits for it; the region's
// rest still serves blocks.
class PagesAhead {
public:
    explicit PagesAhead(std::size_t bytes);
    ~PagesAhead();
    PagesAhead(const PagesAhead&) = delete;
    PagesAhead& operator=(const PagesAhead&) = delete;

private:
    std::atomic<bool> stop_{false};
    std::thread helper_;
};

// The bytes of the PagesAhead region handed out so far (0 without one), in whole pages.
std::size_t pages_ahead_handed_out() noexcept;

template <class T>
struct BufferAllocator {
    using value_type = T;
    BufferAllocator() noexcept = default;
    template <class U>
    BufferAllocator(const BufferAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
        return static_cast<T*>(allocate_buffer(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept { free_buffer(p); }
    template <class U>
    bool operator==(const BufferAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const BufferAllocator<U>&) const noexcept { return false; }
};

}  // namespace attntrace
