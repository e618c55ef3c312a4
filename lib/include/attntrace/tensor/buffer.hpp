#pragma once
// The allocator behind every Array: large blocks (4 MiB and up) are 2 MiB-aligned and marked for
// transparent huge pages (madvise), so a (B, H, Lq, Lk) weights buffer costs a few dozen page
// faults instead of thousands. Blocks from 64 KiB on are populated by one madvise, and freed ones
// are kept (at most 8 and 64 MiB) to serve a later request they can hold, with their pages already
// present. Small blocks come from malloc as usual. Memory is not initialized.
#include <cstddef>
#include <new>

namespace attntrace {

void* allocate_buffer(std::size_t bytes);
void free_buffer(void* p) noexcept;

// The whole pages inside [P, P + BYTES) (fresh memory, or a file's shared mapping about to be
// written) made present and writable by madvise(MADV_POPULATE_WRITE), in page-aligned slices of at
// least 1 MiB over up to THREADS workers: one system call per slice instead of a page fault per
// page amid the products that write them. A hint: where the kernel refuses, nothing changes.
void populate_for_writing(void* p, std::size_t bytes, std::size_t threads);

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
