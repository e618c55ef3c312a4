// Loading (format detection) and saving (atomic writes) of tensor files. The formats themselves
// live in npy.cpp and json_tensor.cpp.
#include "attntrace/tensor_io.hpp"

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attntrace/atomic_output.hpp"
#include "attntrace/errors.hpp"
#include "attntrace/file_bytes.hpp"

namespace attntrace {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view npy_magic = "\x93NUMPY";

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The first bytes as Python prints bytes: b'PK\x03\x04'.
std::string bytes_repr(std::string_view bytes, std::size_t limit) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "b'";
    for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '\'' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    out += '\'';
    if (bytes.size() > limit) out += "...";
    return out;
}

[[noreturn]] void throw_output_errno(const std::string& path, int error) {
    throw OutputError(path + ": " + std::strerror(error));
}

using Pieces = std::initializer_list<std::string_view>;

// Writes all of PIECES, in order, to FD; returns 0 or the errno of the failure.
int write_all(int fd, Pieces pieces) {
    for (std::string_view bytes : pieces) {
        while (!bytes.empty()) {
            const ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
            if (wrote < 0) {
                if (errno == EINTR) continue;
                return errno;
            }
            bytes.remove_prefix(static_cast<std::size_t>(wrote));
        }
    }
    return 0;
}

// ---- the temp file a signal handler must remove ------------------------------------------------
// One slot: attntrace writes one file at a time. A second concurrent writer (none today) would
// still write atomically, just without signal clean-up.
constexpr std::size_t temp_path_capacity = 4096 + 64;
char pending_temp_path[temp_path_capacity];
std::atomic<int> pending_temp_state{0};  // 0 free, 1 being set up, 2 pending_temp_path exists
static_assert(std::atomic<int>::is_always_lock_free);

// A temporary file from mkstemp, removed unless commit() renamed it.
class TempFile {
public:
    // TEMPLATE ends in XXXXXX. Throws OutputError naming TARGET.
    TempFile(const std::string& template_path, const std::string& target) {
        int expected = 0;
        if (template_path.size() < temp_path_capacity &&
            pending_temp_state.compare_exchange_strong(expected, 1)) {
            registered_ = true;
            std::memcpy(pending_temp_path, template_path.c_str(), template_path.size() + 1);
            fd_ = ::mkstemp(pending_temp_path);
            const int error = errno;
            if (fd_ < 0) {
                pending_temp_state.store(0);
                registered_ = false;
                throw_output_errno(target, error);
            }
            path_ = pending_temp_path;
            pending_temp_state.store(2);
        } else {
            path_ = template_path;
            fd_ = ::mkstemp(path_.data());
            if (fd_ < 0) throw_output_errno(target, errno);
        }
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!committed_) ::unlink(path_.c_str());
        if (registered_) pending_temp_state.store(0);
    }

    int fd() const { return fd_; }

    // Closes the file; returns 0 or the errno of the failure.
    int close() {
        const int result = ::close(std::exchange(fd_, -1));
        return result == 0 ? 0 : errno;
    }

    // Renames the file to TARGET; returns 0 or the errno of the failure.
    // Puts the file at TARGET atomically. Over an existing file it swaps the two names
    // (RENAME_EXCHANGE) and then deletes the old file now at the temp name: ext4 treats a plain
    // rename over a file as "replace" and flushes the new data to disk first, which took up to
    // 20 ms for a 32 MiB weights file here. Either way TARGET always holds one whole file.
    int commit(const std::string& target) {
        if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
            ::unlink(path_.c_str());  // the old content; the destructor would remove it too
            committed_ = true;
            return 0;
        }
        if (::rename(path_.c_str(), target.c_str()) != 0) return errno;  // no TARGET yet, or no exchange
        committed_ = true;
        return 0;
    }

private:
    std::string path_;
    int fd_ = -1;
    bool registered_ = false;
    bool committed_ = false;
};

// Writes to an existing file that is not a regular file (/dev/null, a FIFO, /dev/stdout when it
// is a pipe): it cannot be replaced, only written.
void write_in_place(const std::string& path, Pieces bytes) {
    int fd;
    do {
        fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) throw_output_errno(path, errno);
    const int write_error = write_all(fd, bytes);
    const int close_error = ::close(fd) == 0 ? 0 : errno;
    if (write_error != 0) throw_output_errno(path, write_error);
    if (close_error != 0) throw_output_errno(path, close_error);
}

mode_t current_umask() {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return mask;
}

}  // namespace

void remove_pending_temp_files() noexcept {
    if (pending_temp_state.load() == 2) ::unlink(pending_temp_path);
}

// ---- reading ----------------------------------------------------------------------------------

template <class T>
LoadedTensor<T> load_tensor(const std::string& path) {
    const FileBytes file = FileBytes::open(path);
    return parse_tensor<T>(file.bytes(), path);
}

template <class T>
LoadedTensor<T> parse_tensor(std::string_view bytes, const std::string& name) {
    // A truncated magic string is still an .npy file, and parse_npy says what is missing.
    if (bytes.starts_with(npy_magic) || (!bytes.empty() && npy_magic.starts_with(bytes))) {
        return parse_npy<T>(bytes, name);
    }
    std::size_t first = 0;
    while (first < bytes.size() && is_json_space(bytes[first])) ++first;
    if (first == bytes.size()) {
        throw InputError(name + (bytes.empty() ? ": empty file" : ": empty file (only whitespace)"));
    }
    const char c = bytes[first];
    if (c == '[' || c == '{' || c == '-' || (c >= '0' && c <= '9')) return parse_json_tensor<T>(bytes, name);

    std::string message = name + ": not a .npy or JSON tensor (starts with " + bytes_repr(bytes, 8) + ")";
    if (bytes.starts_with("PK\x03\x04")) {
        message += "; a zip archive (.npz, or torch.save output) holds several arrays: save one with numpy.save";
    }
    throw InputError(message);
}

// ---- writing ----------------------------------------------------------------------------------

std::optional<FileFormat> format_from_extension(const std::string& path) {
    std::string extension = fs::path(path).extension().string();
    for (char& c : extension) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (extension == ".npy") return FileFormat::npy;
    if (extension == ".json") return FileFormat::json;
    return std::nullopt;
}

template <class T>
void save_tensor(const std::string& path, const Array<T>& array, std::optional<FileFormat> format) {
    if (!format) format = format_from_extension(path);
    if (!format) {
        throw UsageError(path + ": cannot tell the format from the extension; use .npy or .json (or --to)");
    }
    if (*format == FileFormat::json) return write_file_atomically(path, json_tensor_text<T>(array));
    if constexpr (std::endian::native == std::endian::little) {  // the data as it is in memory
        const std::string header = npy_header<T>(Shape(array.shape().begin(), array.shape().end()));
        const std::string_view data(reinterpret_cast<const char*>(array.data()), array.size() * sizeof(T));
        write_file_atomically(path, {std::string_view(header), data});
    } else {
        write_file_atomically(path, npy_bytes<T>(array));
    }
}

void write_file_atomically(const std::string& path, std::string_view bytes) { write_file_atomically(path, {bytes}); }

void write_file_atomically(const std::string& path, Pieces bytes) {
    if (path == "-") {
        errno = 0;
        bool wrote = true;
        for (std::string_view piece : bytes)
            wrote = wrote && std::fwrite(piece.data(), 1, piece.size(), stdout) == piece.size();
        const bool flushed = std::fflush(stdout) == 0;
        if (!wrote || !flushed) {
            throw OutputError(std::string("-: ") + (errno != 0 ? std::strerror(errno) : "write error"));
        }
        return;
    }
    if (path.empty()) throw OutputError("output path is empty");

    // Where the bytes go: PATH, or the file a symlink at PATH points to (the link stays).
    std::string target = path;
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0) {
        if (S_ISDIR(info.st_mode)) throw OutputError(path + ": is a directory");
        if (!S_ISREG(info.st_mode)) {
            write_in_place(path, bytes);
            return;
        }
        struct stat link_info {};
        if (::lstat(path.c_str(), &link_info) == 0 && S_ISLNK(link_info.st_mode)) {
            std::error_code error;
            const fs::path resolved = fs::canonical(path, error);
            if (!error) target = resolved.string();
        }
    } else if (errno != ENOENT) {
        throw_output_errno(path, errno);
    }

    const fs::path target_path(target);
    const std::string base = target_path.filename().string();
    if (base.empty() || base == "." || base == "..") throw OutputError(path + ": is a directory");
    std::string dir = target_path.parent_path().string();
    if (!dir.empty() && dir.back() != '/') dir += '/';

    TempFile temp(dir + "." + base + ".tmp-XXXXXX", path);
    if (const int error = write_all(temp.fd(), bytes); error != 0) throw_output_errno(path, error);
    // mkstemp creates the file 0600; make it what a plain open(2) would with mode 0644.
    if (::fchmod(temp.fd(), 0644 & ~current_umask()) != 0) throw_output_errno(path, errno);
    if (const int error = temp.close(); error != 0) throw_output_errno(path, error);
    if (const int error = temp.commit(target); error != 0) throw_output_errno(path, error);
}

void ensure_not_an_input(const std::string& output, const std::vector<std::string>& inputs) {
    if (output == "-") return;
    std::error_code error;
    if (!fs::exists(output, error)) return;
    for (const std::string& input : inputs) {
        if (input == "-") continue;
        if (fs::equivalent(output, input, error) && !error) {
            throw OutputError(output + ": refusing to overwrite an input file" +
                              (input == output ? std::string() : " (" + input + ")"));
        }
    }
}

template LoadedTensor<float> load_tensor<float>(const std::string&);
template LoadedTensor<double> load_tensor<double>(const std::string&);
template LoadedTensor<float> parse_tensor<float>(std::string_view, const std::string&);
template LoadedTensor<double> parse_tensor<double>(std::string_view, const std::string&);
template void save_tensor<float>(const std::string&, const Array<float>&, std::optional<FileFormat>);
template void save_tensor<double>(const std::string&, const Array<double>&, std::optional<FileFormat>);

}  // namespace attntrace
