// The temp files a signal handler must remove (atomic_output.hpp). A few slots: a run streams -o
// and --attn-weights at once, and writes its dumps while they are still pending. A writer that
// finds every slot taken still writes atomically, just without signal clean-up.
#include "attntrace/io/atomic_output.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>

#include <unistd.h>

namespace attntrace {

namespace {

constexpr std::size_t temp_path_capacity = 4096 + 64;
struct PendingTemp {
    char path[temp_path_capacity] = {};
    std::atomic<int> state{0};  // 0 free, 1 being set, 2 path names a file
};
// zeros from the start (no constructor run at start-up, which touched each slot's 4 KiB page)
constinit PendingTemp pending_temps[kPendingTempSlots];
static_assert(std::atomic<int>::is_always_lock_free);

}  // namespace

int register_pending_temp(std::string_view path) noexcept {
    if (path.size() >= temp_path_capacity) return -1;
    for (std::size_t slot = 0; slot < kPendingTempSlots; ++slot) {
        int expected = 0;
        PendingTemp& temp = pending_temps[slot];
        if (!temp.state.compare_exchange_strong(expected, 1)) continue;
        std::memcpy(temp.path, path.data(), path.size());
        temp.path[path.size()] = '\0';
        temp.state.store(2);
        return static_cast<int>(slot);
    }
    return -1;
}

void forget_pending_temp(int slot) noexcept {
    if (slot >= 0 && static_cast<std::size_t>(slot) < kPendingTempSlots) pending_temps[slot].state.store(0);
}

void remove_pending_temp_files() noexcept {
    for (PendingTemp& temp : pending_temps)
        if (temp.state.load() == 2) ::unlink(temp.path);
}

}  // namespace attntrace
