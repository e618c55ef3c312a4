#pragma once
// Clean-up for write_file_atomically (atomic_write.hpp) when a signal interrupts a write: the
// temporary file being written under a name (".<name>.tmp-XXXXXX" next to the target, when the
// file system cannot keep it nameless with O_TMPFILE) is registered while it exists, so a
// SIGINT/SIGTERM handler in app/ can remove it before the process dies.
#include <string_view>

namespace attntrace {

// Registers PATH, a temp file that exists now, as the one to remove. One slot (attntrace writes
// one file at a time): false when the slot is taken or PATH is too long, and then nothing is
// registered. Call it with the signals that clean up blocked, so no signal falls between the
// file's creation and its registration.
bool register_pending_temp(std::string_view path) noexcept;

// Forgets the registered temp file (it was renamed or removed). Only the caller that registered.
void forget_pending_temp() noexcept;

// Unlinks the temporary file currently being written, if any. Async-signal-safe: it only reads a
// static buffer and calls unlink(2), so it may be called from a signal handler.
void remove_pending_temp_files() noexcept;

}  // namespace attntrace
