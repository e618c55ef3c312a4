// FileBytes: a regular file is mmap'ed read-only, or read whole into buffer_ up to 64 KiB; stdin
// ("-"), pipes, devices and files whose size the kernel does not report (/proc) are read into
// buffer_, no further than their first bytes allow (file_bytes.hpp). Also the registry of inputs
// read, by identity.
//
// Invariant: data_ points into the mapping when mapping_ is set, else into buffer_ (so a move
// re-points data_ at the new object's buffer_: a short buffer lives inside the string object).
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/tensor/threads.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/io/sniff.hpp"

namespace attntrace {

namespace {

[[noreturn]] void throw_errno(const std::string& path, int error) {
    if (error == ENOENT) throw InputError(path + ": no such file");
    if (error == EISDIR) throw InputError(path + ": is a directory");
    throw InputError(path + ": " + std::strerror(error));
}

// Closes FD when it goes out of scope.
struct FdCloser {
    int fd;
    ~FdCloser() {
        if (fd >= 0) ::close(fd);
    }
};

// ---- inputs read, by identity ------------------------------------------------------------------

struct InputRead {
    std::uint64_t device, inode;
    std::string name;
};
std::atomic<bool> remembering{false};
std::mutex inputs_mutex;
std::vector<InputRead> inputs_read;  // guarded by inputs_mutex

void remember(const struct stat& info, const std::string& name) {
    if (!remembering.load() || !S_ISREG(info.st_mode)) return;
    const std::lock_guard<std::mutex> lock(inputs_mutex);
    inputs_read.push_back({static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino), name});
}

// ---- streams ------------------------------------------------------------------------------------

constexpr std::size_t sniff_bytes = 16;      // the .npy preamble, and safetensors' size + '{'
constexpr std::size_t read_chunk = 65536;

// What the bytes of a stream read so far allow.
class StreamBound {
public:
    explicit StreamBound(const std::string& path) : path_(path), memory_(physical_memory_bytes()) {}

    // At most this many bytes may be asked for next, having USED: one past a .npy's stated size
    // (to see whether more follows).
    std::size_t next_read(std::size_t used) const {
        return stated_ != unknown_size ? static_cast<std::size_t>(std::min<std::uint64_t>(read_chunk, stated_ + 1 - used))
                                       : read_chunk;
    }

    // True when reading must stop at BYTES (all read so far): the format is unknown, or JSON text
    // holds a byte no JSON can. Throws for a stream past its stated size or the memory.
    bool stop(std::string_view bytes) {
        if (memory_ != 0 && bytes.size() > memory_) {
            throw InputError(path_ + ": more than " + byte_size_string(memory_) + " (the physical memory) in a stream");
        }
        if (!sniffed_) {
            if (bytes.size() < sniff_bytes) return false;
            format_ = sniff_format(bytes, std::nullopt);
            sniffed_ = true;
        }
        if (format_ == Sniffed::unknown) return true;  // the parser says what the first bytes are
        if (format_ == Sniffed::npy) return check_npy(bytes);
        if (format_ == Sniffed::json || format_ == Sniffed::blank) {  // blank: JSON may follow
            const auto bad = std::find_if(bytes.begin() + static_cast<std::ptrdiff_t>(scanned_), bytes.end(), [](char c) {
                return static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r';
            });
            scanned_ = bytes.size();
            return bad != bytes.end();  // the parser reports the byte
        }
        return false;
    }

private:
    bool check_npy(std::string_view bytes) {
        if (stated_ == unknown_size) stated_ = npy_stated_size(bytes, path_).value_or(unknown_size);
        if (stated_ == unknown_size) return false;
        if (memory_ != 0 && stated_ > memory_) {
            throw InputError(path_ + ": the .npy header states " + byte_size_string(stated_) + ", more than the physical memory (" +
                             byte_size_string(memory_) + ")");
        }
        if (bytes.size() > stated_) {
            throw InputError(path_ + ": trailing bytes after the data (the .npy header states " + std::to_string(stated_) +
                             " bytes in all)");
        }
        return false;
    }

    const std::string& path_;
    std::uint64_t memory_;                 // 0 when unknown
    static constexpr std::uint64_t unknown_size = UINT64_MAX;
    bool sniffed_ = false;                 // once sniff_bytes are read
    Sniffed format_ = Sniffed::unknown;    // what they show
    std::uint64_t stated_ = unknown_size;  // npy: the whole file's size, once the header is read
    std::size_t scanned_ = 0;              // json: bytes checked for control characters
};

// What there is to read from FD, no further than StreamBound allows.
std::string read_stream(int fd, const std::string& path) {
    std::string out;
    std::size_t used = 0;
    StreamBound bound(path);
    for (;;) {
        const std::size_t want = bound.next_read(used);
        if (out.size() - used < want) out.resize(std::max(used + want, out.size() + out.size() / 2));
        const ssize_t got = ::read(fd, out.data() + used, want);
        if (got < 0) {
            if (errno == EINTR) continue;
            throw_errno(path, errno);
        }
        if (got == 0) break;
        used += static_cast<std::size_t>(got);
        if (bound.stop(std::string_view(out.data(), used))) break;
    }
    out.resize(used);
    out.shrink_to_fit();
    return out;
}

// A regular file of at most this many bytes is read whole, not mapped: one pread costs less than
// mmap, the fault on its first page and munmap (the atcold example's three inputs: ~20 µs each on
// a VM, docs/performance.md).
constexpr off_t kReadWhole = off_t{64} << 10;

// LENGTH bytes of FD (the file NAME) from OFFSET into TO; InputError when the file shrank.
void pread_exactly(int fd, const std::string& name, std::size_t offset, std::size_t length, void* to) {
    constexpr std::size_t max_read = std::size_t{1} << 30;  // Linux reads at most ~2 GiB at once
    char* out = static_cast<char*>(to);
    while (length > 0) {
        const ssize_t got = ::pread(fd, out, std::min(length, max_read), static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw_errno(name, errno);
        if (got == 0) throw InputError(name + ": the file shrank while it was read");
        out += got, offset += static_cast<std::size_t>(got), length -= static_cast<std::size_t>(got);
    }
}

// The mapped files, for mapped_file_at in a SIGBUS handler: a slot is claimed with a
// compare-exchange on `begin`, its name written, then `end` published; cleared in reverse.
struct MappedSlot {
    std::atomic<std::uintptr_t> begin{0}, end{0};
    char name[256] = {};
};
MappedSlot mapped_slots[64];

int register_mapping(const void* data, std::size_t size, const std::string& name) noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    for (int i = 0; i < 64; ++i) {
        std::uintptr_t free = 0;
        if (!mapped_slots[i].begin.compare_exchange_strong(free, begin)) continue;
        const std::size_t n = std::min(name.size(), sizeof(mapped_slots[i].name) - 1);
        std::memcpy(mapped_slots[i].name, name.data(), n);
        mapped_slots[i].name[n] = '\0';
        mapped_slots[i].end.store(begin + size);
        return i;
    }
    return -1;  // more than 64 files mapped at once: a SIGBUS in this one is not named
}

void forget_mapping(int slot) noexcept {
    if (slot < 0) return;
    mapped_slots[slot].end.store(0);
    mapped_slots[slot].begin.store(0);
}

}  // namespace

const char* mapped_file_at(const void* address) noexcept {
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    for (const MappedSlot& slot : mapped_slots) {
        const std::uintptr_t begin = slot.begin.load(), end = slot.end.load();
        if (begin != 0 && begin <= at && at < end) return slot.name;
    }
    return nullptr;
}

FileBytes FileBytes::open(const std::string& path) {
    FileBytes file;
    file.name_ = path;
    if (path == "-") {
        struct stat info {};
        if (::fstat(STDIN_FILENO, &info) == 0) remember(info, path);  // convert - x.npy < x.npy
        file.buffer_ = read_stream(STDIN_FILENO, path);
    } else {
        int fd;
        do {
            fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) throw_errno(path, errno);
        FdCloser closer{fd};

        struct stat info {};
        if (::fstat(fd, &info) != 0) throw_errno(path, errno);
        if (S_ISDIR(info.st_mode)) throw_errno(path, EISDIR);
        remember(info, path);
        const bool small = S_ISREG(info.st_mode) && info.st_size > 0 && info.st_size <= kReadWhole;
        if (S_ISREG(info.st_mode) && info.st_size > kReadWhole) {
            const auto size = static_cast<std::size_t>(info.st_size);
            void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapping != MAP_FAILED) {
                file.mapping_ = mapping;
                file.data_ = static_cast<const char*>(mapping);
                file.size_ = size;
                file.slot_ = register_mapping(mapping, size, path);
                file.fd_ = std::exchange(closer.fd, -1);  // kept open for copy()
                return file;
            }
            // Some file systems cannot map: read it instead.
        }
        // A small file, a pipe, a device, an empty file, or a /proc file that reports size 0.
        if (small) {
            file.buffer_.resize(static_cast<std::size_t>(info.st_size));
            pread_exactly(fd, path, 0, file.buffer_.size(), file.buffer_.data());
        } else {
            file.buffer_ = read_stream(fd, path);
        }
    }
    file.data_ = file.buffer_.data();
    file.size_ = file.buffer_.size();
    return file;
}

FileBytes::FileBytes(FileBytes&& other) noexcept
    : name_(std::move(other.name_)),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      slot_(std::exchange(other.slot_, -1)),
      fd_(std::exchange(other.fd_, -1)),
      buffer_(std::move(other.buffer_)) {
    data_ = mapping_ != nullptr ? static_cast<const char*>(mapping_) : buffer_.data();
    other.buffer_.clear();
    other.data_ = other.buffer_.data();
}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
    if (this == &other) return *this;
    forget_mapping(slot_);
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
    if (fd_ >= 0) ::close(fd_);
    name_ = std::move(other.name_);
    slot_ = std::exchange(other.slot_, -1);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
    data_ = mapping_ != nullptr ? static_cast<const char*>(mapping_) : buffer_.data();
    other.buffer_.clear();
    other.data_ = other.buffer_.data();
    return *this;
}

const char* FileBytes::resident(std::size_t offset, std::size_t length) const {
    if (mapping_ == nullptr || length == 0) return data_ + offset;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t begin = offset / page * page;  // every page the range touches
    const std::size_t end = std::min(size_, offset + length);
    // At least 1 MiB per worker (set_read_threads), in page-aligned slices: measured here, two
    // workers populating a layer took 474 ms for the GPT-2-small bench against 483 ms for one.
    const std::size_t span = end - begin;
    const std::size_t workers = std::max<std::size_t>(1, std::min(read_threads(), span / (std::size_t{1} << 20)));
    const std::size_t per = (span / workers + page - 1) / page * page;
    std::atomic<bool> failed{false};
    parallel_for(workers, workers, [&](std::size_t i, std::size_t) {
        const std::size_t from = std::min(span, i * per), n = std::min(per, span - from);
        if (n == 0) return;
        int result;
        do {
            result = ::madvise(static_cast<char*>(mapping_) + begin + from, n, MADV_POPULATE_READ);
        } while (result != 0 && (errno == EINTR || errno == EAGAIN));
        if (result != 0) failed.store(true);
    });
    // Failing (EINVAL: a kernel before 5.14; ENOMEM), the pages fault in as they are read.
    struct stat info {};
    if (failed.load() && ::fstat(fd_, &info) == 0 && static_cast<std::size_t>(info.st_size) < end)
        throw InputError(name_ + ": the file shrank while it was read");
    return data_ + offset;
}

void FileBytes::prefetch(std::size_t offset, std::size_t length) const {
    if (mapping_ == nullptr || length == 0 || offset >= size_) return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t begin = offset / page * page, end = std::min(size_, offset + length);
    ::madvise(static_cast<char*>(mapping_) + begin, end - begin, MADV_POPULATE_READ);
}

void FileBytes::release(std::size_t offset, std::size_t length) const {
    if (mapping_ == nullptr || length == 0) return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t begin = (offset + page - 1) / page * page;  // whole pages inside the range
    const std::size_t end = std::min(size_, offset + length) / page * page;
    if (begin < end) ::madvise(static_cast<char*>(mapping_) + begin, end - begin, MADV_DONTNEED);
}

bool FileBytes::mapping_dearer_than_reading() const {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    constexpr std::size_t pages = 64;
    const std::size_t span = pages * page;
    if (mapping_ == nullptr || size_ < (std::size_t{16} << 20)) return false;
    char* at = static_cast<char*>(mapping_) + size_ / 2 / page * page;
    const std::size_t begin = static_cast<std::size_t>(at - static_cast<char*>(mapping_));
    std::vector<char> into(span, 1);  // warm, as the reused buffers of the read path are
    using clock = std::chrono::steady_clock;
    clock::duration mapped = clock::duration::max(), read = clock::duration::max();
    for (int trial = 0; trial < 3; ++trial) {
        const auto t0 = clock::now();
        if (::madvise(at, span, MADV_POPULATE_READ) != 0) return false;  // a kernel before 5.14: map
        for (std::size_t i = 0; i < pages; ++i) (void)*static_cast<volatile const char*>(at + i * page);  // a volatile read stays
        const auto t1 = clock::now();
        // untimed: release() drops a whole layer's pages at once, one TLB flush for thousands of pages
        ::madvise(at, span, MADV_DONTNEED);
        const auto t2 = clock::now();
        read_range(begin, span, into.data());
        const auto t3 = clock::now();
        mapped = std::min(mapped, t1 - t0), read = std::min(read, t3 - t2);
    }
    // Mapped only where it costs less than half a read: the products pay for mapped pages again
    // when they first read them (4 KiB pages, cold in cache), where the read's copy leaves them on
    // huge pages and partly in cache. A freshly written GPT-2-small checkpoint on the AMD EPYC VM:
    // 13 us mapped against 12.5 read, and the whole run 400 mapped against 350 ms read (medians of
    // 16 interleaved runs; docs/performance.md).
    return 2 * mapped > read;
}

namespace {
std::atomic<std::size_t> read_workers{1};  // set_read_threads
std::atomic<WeightPages> weight_pages{WeightPages::best};  // set_weight_pages
}  // namespace

bool weight_pages_named(std::string_view word, WeightPages& out) {
    if (word == "best") out = WeightPages::best;
    else if (word == "map") out = WeightPages::map;
    else if (word == "read") out = WeightPages::read;
    else return false;
    return true;
}

void set_weight_pages(WeightPages pages) noexcept { weight_pages.store(pages); }

bool read_weight_pages(const FileBytes& file) {
    const WeightPages chosen = weight_pages.load();
    if (chosen != WeightPages::best) return chosen == WeightPages::read;
    static const bool dearer = [&file] {  // measured on the first file asked
        const bool read = file.mapping_dearer_than_reading();
        timeline_mark(read ? "weights: read (the probe's answer)" : "weights: mapped (the probe's answer)");
        return read;
    }();
    return dearer;
}

void set_read_threads(std::size_t threads) noexcept { read_workers.store(std::max<std::size_t>(1, thread_count(threads))); }
std::size_t read_threads() noexcept { return read_workers.load(); }

void FileBytes::copy(std::size_t offset, std::size_t length, void* to) const {
    if (fd_ < 0) {
        if (length > 0) std::memcpy(to, data_ + offset, length);
        return;
    }
    // At least 1 MiB per worker, in 64 KiB-aligned slices of the destination.
    const std::size_t workers = std::min(read_workers.load(), length / (std::size_t{1} << 20));
    if (workers > 1) {
        const std::size_t per = (length / workers + 65535) / 65536 * 65536;
        parallel_for(workers, workers, [&](std::size_t i, std::size_t) {
            const std::size_t begin = std::min(length, i * per), n = std::min(per, length - begin);
            if (n) read_range(offset + begin, n, static_cast<char*>(to) + begin);
        });
        return;
    }
    read_range(offset, length, to);
}

void FileBytes::read_range(std::size_t offset, std::size_t length, void* to) const {
    pread_exactly(fd_, name_, offset, length, to);
}

FileBytes::~FileBytes() {
    forget_mapping(slot_);
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
    if (fd_ >= 0) ::close(fd_);
}

void remember_inputs(bool on) noexcept {
    remembering.store(on);
    if (on) return;
    const std::lock_guard<std::mutex> lock(inputs_mutex);
    inputs_read.clear();
}

std::optional<std::string> input_read_as(std::uint64_t device, std::uint64_t inode) {
    const std::lock_guard<std::mutex> lock(inputs_mutex);
    for (const InputRead& input : inputs_read) {
        if (input.device == device && input.inode == inode) return input.name;
    }
    return std::nullopt;
}

}  // namespace attntrace
