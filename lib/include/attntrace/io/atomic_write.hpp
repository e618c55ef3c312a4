#pragma once
// Writing a file atomically: a reader, a crash or a second writer never sees a partial file.
//
// The bytes go to a file in the target's directory that has no name while it is written
// (O_TMPFILE, so even kill -9 leaves nothing behind), and it is linked in as the target only once
// complete. Where the file system cannot do that, the file is ".<name>.tmp-XXXXXX" (a short
// ".attntrace.tmp-XXXXXX" when the target's name is too long for the suffix), removed on every
// error and, through atomic_output.hpp, on SIGINT/SIGTERM. An existing target is replaced in one
// step and always holds one whole file. "-" writes to stdout; an existing file that is not a
// regular file (/dev/null, a FIFO) is written in place.
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace attntrace {

// Writes BYTES to PATH atomically ("-" = stdout). Failures are OutputErrors naming PATH, among
// them "PATH: refusing to overwrite an input file" when PATH is a file this process read
// (remember_inputs in file_bytes.hpp).
void write_file_atomically(const std::string& path, std::string_view bytes);
// The same for bytes in several pieces, written one after the other (a header, then a tensor's
// data straight from its buffer).
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> pieces);

// A file written in pieces at any offsets, from any number of threads at once (pwrite), and put
// at its path only by commit(): the same temp file and the same refusals as write_file_atomically.
// Destroyed uncommitted (an error, a signal), it leaves nothing behind.
class StreamedFile {
public:
    // nullptr when PATH is "-" or an existing file that is not a regular file (write those whole).
    static std::unique_ptr<StreamedFile> open(const std::string& path);
    // The same, but for "-" and a file that is not a regular file (/dev/null, a FIFO, a pipe) the
    // pieces are held in an anonymous in-memory file (memfd) and written to PATH in order by
    // commit(): the kernel's copies into it cost a third of what filling fresh pages of this
    // process's own memory does where a hypervisor shadows the page tables (docs/performance.md).
    // nullptr only where no such file can be made (then hold the bytes yourself).
    static std::unique_ptr<StreamedFile> open_or_hold(const std::string& path);
    ~StreamedFile();
    StreamedFile(const StreamedFile&) = delete;
    StreamedFile& operator=(const StreamedFile&) = delete;

    void write_at(std::size_t offset, std::string_view bytes);  // OutputError naming the path
    void commit();

private:
    StreamedFile();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Replacing a file deletes the old one once the new one is in place, and deleting a large file
// that has reached the disk takes the file system milliseconds (ext4 on the machine measured: 12 ms
// for 32 MiB, against 1 ms while its data is still only in memory), which a command-line run
// need not wait for. With defer_replaced_files(true) the old file still loses its name at once,
// but a descriptor (O_PATH) keeps its data until release_replaced_files(). That hands the
// descriptors to a helper process (/bin/true, no environment, stdin/stdout/stderr on /dev/null),
// so the freeing happens when the helper exits, not in this process. Meant for a process about
// to exit (app/main.cpp): the helper is a child it never waits for. When the helper cannot be
// started, the descriptors are closed here, which frees the files as before. Off by default.
void defer_replaced_files(bool on) noexcept;
void release_replaced_files() noexcept;

// True when the output paths A and B would write one file: one existing file however it is
// spelled or linked (by identity), or one place for a file not there yet. "-" and character
// devices (/dev/null) are never the same file as anything.
bool same_output_file(const std::string& a, const std::string& b);

}  // namespace attntrace
