#include "attntrace/buffer.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace attntrace {

namespace {
constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t large = std::size_t{4} << 20;
}  // namespace

void* allocate_buffer(std::size_t bytes) {
    if (bytes < large) {
        if (void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0))) return p;
        throw std::bad_alloc();
    }
    const std::size_t rounded = (bytes + huge_page - 1) / huge_page * huge_page;
    void* p = std::aligned_alloc(huge_page, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP it changes nothing
    return p;
}

void free_buffer(void* p) noexcept { std::free(p); }

}  // namespace attntrace
