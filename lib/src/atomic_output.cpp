// The one temp file a signal handler must remove (atomic_output.hpp). One slot: attntrace writes
// one file at a time. A second concurrent writer would still write atomically, just without
// signal clean-up.
#include "attntrace/atomic_output.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>

#include <unistd.h>

namespace attntrace {

namespace {

constexpr std::size_t temp_path_capacity = 4096 + 64;
char pending_temp_path[temp_path_capacity];
std::atomic<int> pending_temp_state{0};  // 0 free, 1 being set, 2 pending_temp_path names a file
static_assert(std::atomic<int>::is_always_lock_free);

}  // namespace

bool register_pending_temp(std::string_view path) noexcept {
    int expected = 0;
    if (path.size() >= temp_path_capacity || !pending_temp_state.compare_exchange_strong(expected, 1)) return false;
    std::memcpy(pending_temp_path, path.data(), path.size());
    pending_temp_path[path.size()] = '\0';
    pending_temp_state.store(2);
    return true;
}

void forget_pending_temp() noexcept { pending_temp_state.store(0); }

void remove_pending_temp_files() noexcept {
    if (pending_temp_state.load() == 2) ::unlink(pending_temp_path);
}

}  // namespace attntrace
