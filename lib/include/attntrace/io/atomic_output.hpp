#pragma once
// Clean-up for write_file_atomically (atomic_write.hpp) when a signal interrupts a write: the
// temporary file being written under a name (".<name>.tmp-XXXXXX" next to the target, when the
// file system cannot keep it nameless with O_TMPFILE) is registered while it exists, so a
// SIGINT/SIGTERM handler in app/ can remove it before the process dies.
#include <cstddef>
#include <string_view>

namespace attntrace {

// How many temp files can be registered at once.
inline constexpr std::size_t kPendingTempSlots = 4;

// Registers PATH, a temp file that exists now, as one to remove; returns its slot, or -1 when
// every slot is taken or PATH is too long, and then nothing is registered. Call it with the
// signals that clean up blocked, so no signal falls between the file's creation and its
// registration.
int register_pending_temp(std::string_view path) noexcept;

// Forgets the temp file in SLOT (it was renamed or removed); -1 does nothing. Only the caller
// that registered it.
void forget_pending_temp(int slot) noexcept;

// Unlinks the temporary files currently being written, if any. Async-signal-safe: it only reads a
// static buffer and calls unlink(2), so it may be called from a signal handler.
void remove_pending_temp_files() noexcept;

}  // namespace attntrace
