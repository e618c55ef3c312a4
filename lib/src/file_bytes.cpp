// FileBytes: a regular file is mmap'ed read-only; stdin ("-"), pipes, devices and files whose
// size the kernel does not report (/proc) are read into buffer_.
//
// Invariant: data_ points into the mapping when mapping_ is set, else into buffer_ (so a move
// re-points data_ at the new object's buffer_: a short buffer lives inside the string object).
#include "attntrace/file_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attntrace/errors.hpp"

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

// Everything left to read from FD.
std::string read_all(int fd, const std::string& path) {
    std::string out;
    std::size_t used = 0;
    for (;;) {
        if (out.size() - used < 65536) out.resize(used + 65536 + out.size() / 2);
        const ssize_t got = ::read(fd, out.data() + used, out.size() - used);
        if (got < 0) {
            if (errno == EINTR) continue;
            throw_errno(path, errno);
        }
        if (got == 0) break;
        used += static_cast<std::size_t>(got);
    }
    out.resize(used);
    out.shrink_to_fit();
    return out;
}

}  // namespace

FileBytes FileBytes::open(const std::string& path) {
    FileBytes file;
    file.name_ = path;
    if (path == "-") {
        file.buffer_ = read_all(STDIN_FILENO, path);
    } else {
        int fd;
        do {
            fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) throw_errno(path, errno);
        const FdCloser closer{fd};

        struct stat info {};
        if (::fstat(fd, &info) != 0) throw_errno(path, errno);
        if (S_ISDIR(info.st_mode)) throw_errno(path, EISDIR);
        if (S_ISREG(info.st_mode) && info.st_size > 0) {
            const auto size = static_cast<std::size_t>(info.st_size);
            void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapping != MAP_FAILED) {
                file.mapping_ = mapping;
                file.data_ = static_cast<const char*>(mapping);
                file.size_ = size;
                return file;
            }
            // Some file systems cannot map: read it instead.
        }
        // A pipe, a device, an empty file, or a /proc file that reports size 0.
        file.buffer_ = read_all(fd, path);
    }
    file.data_ = file.buffer_.data();
    file.size_ = file.buffer_.size();
    return file;
}

FileBytes::FileBytes(FileBytes&& other) noexcept
    : name_(std::move(other.name_)),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      buffer_(std::move(other.buffer_)) {
    data_ = mapping_ != nullptr ? static_cast<const char*>(mapping_) : buffer_.data();
    other.buffer_.clear();
    other.data_ = other.buffer_.data();
}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
    if (this == &other) return *this;
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
    name_ = std::move(other.name_);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
    buffer_ = std::move(other.buffer_);
    data_ = mapping_ != nullptr ? static_cast<const char*>(mapping_) : buffer_.data();
    other.buffer_.clear();
    other.data_ = other.buffer_.data();
    return *this;
}

FileBytes::~FileBytes() {
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace attntrace
