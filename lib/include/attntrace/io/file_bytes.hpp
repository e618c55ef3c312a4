#pragma once
// The bytes of an input file, memory-mapped when it is a regular file of more than 64 KiB (large
// inputs are never copied just to be parsed), read into memory when it is a smaller one (one
// pread costs less than a mapping), stdin ("-"), a pipe or a device.
//
// A stream is read no further than the file it holds can reach: its first bytes decide the
// format (sniff.hpp), and reading stops at once when they are neither .npy, JSON nor
// .safetensors (the parser then says why), at the size a .npy header states, at the first byte
// that cannot be in JSON text, and at the machine's physical memory. /dev/zero is never read
// until memory runs out.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attntrace {

class FileBytes {
public:
    // Throws InputError "<path>: no such file", "<path>: is a directory", "<path>: <strerror>",
    // or, for a stream, "<path>: ..." when it holds more than its .npy header states or more
    // than the physical memory.
    static FileBytes open(const std::string& path);

    FileBytes(FileBytes&& other) noexcept;
    FileBytes& operator=(FileBytes&& other) noexcept;
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    ~FileBytes();

    std::string_view bytes() const { return {data_, size_}; }

    // Copies bytes [OFFSET, OFFSET + LENGTH) (inside bytes()) to TO. A mapped file's bytes are
    // read with pread, so the kernel copies them from its page cache and the mapping's pages are
    // never faulted in: for a tensor's data, 3x faster than touching the mapping on the machine
    // measured (docs/performance.md). From 2 MiB on, slices of at least 1 MiB are read by up to
    // set_read_threads() workers at once, so the faults of TO's fresh pages are taken in parallel.
    // Throws InputError when the file shrank or cannot be read.
    void copy(std::size_t offset, std::size_t length, void* to) const;

    // Bytes [OFFSET, OFFSET + LENGTH) (inside bytes()) to be read in place, without a copy: for a
    // mapped file its pages are mapped in one madvise(MADV_POPULATE_READ) first (a fault per
    // 64 KiB otherwise). For a model's float32 weights, which need no conversion. Throws InputError
    // when the file shrank; should it shrink later, while the bytes are read, the process gets
    // SIGBUS, which app/ turns into that same one-line error (mapped_file_at).
    const char* resident(std::size_t offset, std::size_t length) const;

    // Maps the pages of bytes [OFFSET, OFFSET + LENGTH) ahead of their use (one
    // madvise(MADV_POPULATE_READ) on the calling thread alone; nothing for a file read into
    // memory), failures left to resident() or the faults: a side thread's read-ahead.
    void prefetch(std::size_t offset, std::size_t length) const;

    // Drops the pages of bytes [OFFSET, OFFSET + LENGTH) from memory when the file is mapped (they
    // are read again from the file if touched): a tensor converted once need not stay resident.
    void release(std::size_t offset, std::size_t length) const;
    const std::string& name() const { return name_; }

    // Whether mapping this file's pages costs more than reading them with pread: 64 pages from its
    // middle mapped (MADV_POPULATE_READ) and touched, against the same bytes read into a warm buffer,
    // the faster of 3 trials each, and true unless mapping takes less than half as long (the
    // products read mapped pages cold, the read's copy on huge pages and partly in cache). On an
    // AMD EPYC VM whose hypervisor shadows the page tables: 49-59 us mapped against 10-18 us read
    // for a file cached long ago, 13 against 12.5 us for one just written. False for a file read
    // into memory, one under 16 MiB, or a kernel without MADV_POPULATE_READ.
    bool mapping_dearer_than_reading() const;

private:
    FileBytes() = default;
    void read_range(std::size_t offset, std::size_t length, void* to) const;  // one thread's pread loop
    std::string name_;
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    void* mapping_ = nullptr;   // non-null when mmap'ed
    int slot_ = -1;             // its entry for mapped_file_at, or -1
    int fd_ = -1;               // the mapped file, open for copy(); -1 when not mapped
    std::string buffer_;        // holds stdin / pipe contents
};

// The name of the mapped input file whose mapping holds ADDRESS, or nullptr: for a SIGBUS handler
// (async-signal-safe: it reads a fixed table, which FileBytes keeps for up to 64 mappings).
const char* mapped_file_at(const void* address) noexcept;

// How the float32 weights a model uses in place reach its products (ATTNTRACE_WEIGHT_PAGES):
// `map` points them at the file's mapping (pages populated, dropped after their layer), `read`
// copies them with pread into buffers the run reuses (model/safetensors_source.cpp), `best` reads
// where FileBytes::mapping_dearer_than_reading says so of the first file asked (measured once).
enum class WeightPages { best, map, read };
// WORD ("best", "map", "read") into OUT; false for another word.
bool weight_pages_named(std::string_view word, WeightPages& out);
void set_weight_pages(WeightPages pages) noexcept;
// Whether weights are read rather than mapped in this process: `read`, or `best` where FILE's
// mapping is dearer (the first call's answer is kept for the process).
bool read_weight_pages(const FileBytes& file);

// How many workers FileBytes::copy may use for one large read (0: every core this process may
// use; 1, the default: the calling thread only). app/ sets it from --threads.
void set_read_threads(std::size_t threads) noexcept;
// The count set_read_threads set (1 by default): the converting readers (safetensors.hpp) use it too.
std::size_t read_threads() noexcept;

// From remember_inputs(true) on, every regular file FileBytes::open reads is remembered by
// identity (st_dev, st_ino), and write_file_atomically refuses to replace one of them: a run
// never writes over a file it read, however the paths are spelled. app/ turns it on for every
// command; remember_inputs(false) turns it off and forgets (a long-lived process whose inputs
// are deleted must, as their inode numbers are reused).
void remember_inputs(bool on) noexcept;

// The name a remembered input with this identity was read under; nullopt when none was.
std::optional<std::string> input_read_as(std::uint64_t device, std::uint64_t inode);

}  // namespace attntrace
