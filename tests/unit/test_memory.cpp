// The memory budget's pieces: sizes as users write them, and the refusal.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>

using namespace attntrace;

TEST_CASE("byte sizes parse with binary units, with or without B / iB") {
    CHECK(parse_byte_size("123") == 123u);
    CHECK(parse_byte_size("600M") == 600ull << 20);
    CHECK(parse_byte_size("4G") == 4ull << 30);
    CHECK(parse_byte_size("4GiB") == 4ull << 30);
    CHECK(parse_byte_size("1.5g") == 3ull << 29);
    CHECK(parse_byte_size("2kb") == 2048u);
    CHECK_FALSE(parse_byte_size(""));
    CHECK_FALSE(parse_byte_size("lots"));
    CHECK_FALSE(parse_byte_size("-1G"));
    CHECK_FALSE(parse_byte_size("4X"));
    CHECK_FALSE(parse_byte_size("99999999999T"));
}

TEST_CASE("the budget refuses exactly what does not fit, saying how much is needed") {
    CHECK_NOTHROW(check_memory_budget(1, 1024, 4, 4096, "w", "drop it"));
    CHECK_THROWS_WITH_AS(check_memory_budget(2, 1024, 4, 4096, "w", "drop it"),
                         "memory budget: this run would need about 8.0 KiB for w, over the budget of 4.0 KiB; drop it",
                         InputError);
    CHECK_NOTHROW(check_memory_budget(0, 1ull << 40, 4, 1, "w", "x"));  // nothing kept
    // (8, 32768, 32768) float32 planes overflow nothing in the estimate
    CHECK_THROWS_AS(check_memory_budget(3, 8ull * 32768 * 32768, 4, 1ull << 30, "w", "x"), InputError);
    CHECK(default_memory_budget() > 0);
}

// Pages of [P, P + BYTES) the kernel says are present (mincore).
static std::size_t present_pages(const char* p, std::size_t bytes) {
    std::vector<unsigned char> in(bytes / 4096);
    REQUIRE(mincore(const_cast<char*>(p), bytes, in.data()) == 0);
    return std::accumulate(in.begin(), in.end(), std::size_t{0}, [](std::size_t n, unsigned char b) { return n + (b & 1); });
}

TEST_CASE("a huge page made present has every 4 KiB page present, its bytes kept, with or without THP") {
    const std::size_t huge = std::size_t{2} << 20, pages = huge / 4096;
    for (const bool thp : {true, false}) {
        CAPTURE(thp);
        // THP off for this process alone while the page is made: the first write then gives one 4 KiB
        // page, and the other 511 must come from the fallback
        if (!thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) continue;  // kernels before 3.15
        void* map = mmap(nullptr, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(map != MAP_FAILED);
        char* p = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(map) + huge - 1) / huge * huge);
        madvise(p, huge, MADV_HUGEPAGE);
        if (!thp) p[4096 * 7 + 5] = 42;  // an owner's byte, written before (with THP: the whole page)
        CHECK(present_pages(p, huge) == (thp ? 0 : 1));
        attntrace::make_huge_page_present(p);
        CHECK(present_pages(p, huge) == pages);
        CHECK(p[0] == 0);
        CHECK(p[4096 * 7 + 5] == (thp ? 0 : 42));
        CHECK(p[huge - 1] == 0);
        munmap(map, 2 * huge);
        if (!thp) prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
}

#if !defined(__SANITIZE_ADDRESS__)  // under AddressSanitizer freed blocks are not kept (buffer.cpp)
TEST_CASE("a freed buffer of 64 KiB and up serves a later request it holds, if at most 4x larger than it") {
    // sizes no other test uses, so no block kept from another test fits better
    const std::size_t mib = std::size_t{1} << 20;
    void* qkv = attntrace::allocate_buffer(45 * mib);
    std::memset(qkv, 1, 45 * mib);
    attntrace::free_buffer(qkv);
    void* small = attntrace::allocate_buffer(128 << 10);  // 24x smaller: a fresh block
    CHECK(small != qkv);
    void* out = attntrace::allocate_buffer(40 * mib + 3);  // smaller: the kept block
    CHECK(out == qkv);
    std::memset(out, 2, 40 * mib + 3);  // writable
    void* tiny = attntrace::allocate_buffer(100);  // below 64 KiB: malloc, never kept
    attntrace::free_buffer(tiny);
    attntrace::free_buffer(out);
    attntrace::free_buffer(small);
    void* again = attntrace::allocate_buffer(44 * mib);
    CHECK(again == qkv);
    attntrace::free_buffer(again);
}

TEST_CASE("pages made ahead serve, in the order asked, the blocks no freed one serves; once per process") {
    const std::size_t mib = std::size_t{1} << 20, page = 4096;
    REQUIRE(attntrace::pages_ahead_handed_out() == 0);  // no other test makes a region
    attntrace::PagesAhead ahead(6 * mib + 1);            // an 8 MiB region (whole huge pages)
    void* a = attntrace::allocate_buffer(mib + 5);
    CHECK(attntrace::pages_ahead_handed_out() == mib + page);  // whole pages
    void* b = attntrace::allocate_buffer(3 * mib);
    CHECK(b == static_cast<char*>(a) + mib + page);  // the next bytes of the region
    CHECK(attntrace::pages_ahead_handed_out() == 4 * mib + page);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);
    void* c = attntrace::allocate_buffer(5 * mib);  // more than is left: a fresh block
    CHECK(attntrace::pages_ahead_handed_out() == 4 * mib + page);
    std::memset(a, 1, mib + 5), std::memset(b, 2, 3 * mib), std::memset(c, 3, 5 * mib);  // writable
    CHECK(static_cast<unsigned char*>(a)[mib + 4] == 1);
    attntrace::free_buffer(a);
    void* a2 = attntrace::allocate_buffer(mib);  // the freed block from the region, kept
    CHECK(a2 == a);
    {
        attntrace::PagesAhead second(64 * mib);  // changes nothing: the first region still serves
        void* d = attntrace::allocate_buffer(2 * mib);
        CHECK(d == static_cast<char*>(b) + 3 * mib);
        CHECK(attntrace::pages_ahead_handed_out() == 6 * mib + page);
        attntrace::free_buffer(d);
    }
    attntrace::free_buffer(a2), attntrace::free_buffer(b), attntrace::free_buffer(c);
    // blocks from the region pushed out of the kept ones (at most 8) are dropped, never given to free()
    std::vector<void*> others;
    for (int i = 0; i < 10; ++i) others.push_back(attntrace::allocate_buffer((16 + i) * page));  // no kept one fits
    for (void* p : others) attntrace::free_buffer(p);
    void* e = attntrace::allocate_buffer(3 * mib);  // the region's blocks are gone from the kept ones
    CHECK(e != b);
    attntrace::free_buffer(e);
}
#endif
