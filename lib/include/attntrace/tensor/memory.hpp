#pragma once
// The memory budget: a run that would materialize more than the budget is refused up front (exit
// 3) instead of swapping the machine to death. Only the (.., Lq, Lk) buffers can grow
// quadratically; everything else is linear in the sequence length and is left out of the count.
#include <cstdint>
#include <optional>
#include <string>

namespace attntrace {

// Physical RAM in bytes (sysconf), 0 when unknown.
std::uint64_t physical_memory_bytes();

// The default --max-memory: half of physical RAM (8 GiB when it cannot be read).
std::uint64_t default_memory_budget();

// "600M", "4G", "1.5GiB", "123456" (bytes) -> bytes; nullopt when malformed. K/M/G/T are powers
// of 1024, with or without a trailing "B" or "iB".
std::optional<std::uint64_t> parse_byte_size(const std::string& text);

// "34.4 GB"-style rendering for messages.
std::string byte_size_string(std::uint64_t bytes);

// Throws InputError ("memory budget: this run would need about ..."; the app adds its flag's name)
// when PLANES tensors of ELEMENTS_PER_PLANE values of ELEMENT_SIZE bytes exceed BUDGET. WHAT names the plane ("the attention weights (4, 8, 512, 512)"), AVOID how to avoid it.
void check_memory_budget(std::uint64_t planes, std::uint64_t elements_per_plane, std::uint64_t element_size,
                         std::uint64_t budget, const std::string& what, const std::string& avoid);

}  // namespace attntrace
