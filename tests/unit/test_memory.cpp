// The memory budget's pieces: sizes as users write them, and the refusal.
#include <doctest/doctest.h>

#include <cstring>

#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"

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
#endif
