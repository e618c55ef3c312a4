#pragma once
// Clean-up for write_file_atomically (tensor_io.hpp) when a signal interrupts a write: the
// temporary file being written (".<name>.tmp-XXXXXX" next to the target) is registered while it
// exists, so a SIGINT/SIGTERM handler in app/ can remove it before the process dies.

namespace attntrace {

// Unlinks the temporary file currently being written, if any. Async-signal-safe: it only reads a
// static buffer and calls unlink(2), so it may be called from a signal handler.
void remove_pending_temp_files() noexcept;

}  // namespace attntrace
