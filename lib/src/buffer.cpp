#include "attntrace/buffer.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace attntrace {

namespace {
constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t large = std::size_t{4} << 20;
constexpr std::size_t populated = std::size_t{64} << 10;  // and up, below `large`

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and nothing changes
#endif

// The whole pages inside [P, P + BYTES) made present and writable by one system call instead of
// one page fault per 4 KiB page as they are first written (3 ms against 1 ms per MiB on the VM
// measured, README, Performance). A hint: failure changes nothing.
void populate(void* p, std::size_t bytes) {
    const std::size_t page = 4096;
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t begin = (at + page - 1) / page * page, end = (at + bytes) / page * page;
    if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}
}  // namespace

void* allocate_buffer(std::size_t bytes) {
    if (bytes < large) {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0));
        if (!p) throw std::bad_alloc();
        if (bytes >= populated) populate(p, bytes);
        return p;
    }
    const std::size_t rounded = (bytes + huge_page - 1) / huge_page * huge_page;
    void* p = std::aligned_alloc(huge_page, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP it changes nothing
    return p;
}

void free_buffer(void* p) noexcept { std::free(p); }

}  // namespace attntrace
