// Tensor files as files: format detection, FileBytes (mmap, stdin, pipes), atomic writes with
// their failure modes, and the refusal to overwrite an input.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attntrace/io/atomic_output.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/atomic_write.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/json_tensor.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using namespace attntrace::testing;
namespace fs = std::filesystem;

namespace {

// Runs the enclosing scope with DIR as the working directory.
struct WorkingDir {
    fs::path saved = fs::current_path();
    explicit WorkingDir(const fs::path& dir) { fs::current_path(dir); }
    ~WorkingDir() { fs::current_path(saved); }
};

std::set<std::string> entries(const fs::path& dir) {
    std::set<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
    return names;
}

// Stdin or stdout replaced by FD for the scope.
struct Redirect {
    int target;
    int saved;
    Redirect(int target_fd, int fd) : target(target_fd), saved(::dup(target_fd)) {
        std::fflush(stdout);
        REQUIRE(::dup2(fd, target) >= 0);
    }
    ~Redirect() {
        std::fflush(stdout);
        ::dup2(saved, target);
        ::close(saved);
    }
};

}  // namespace

// ---- format detection ---------------------------------------------------------------------------

TEST_CASE("parse_tensor reads .npy bytes by their magic string") {
    const Array<double> array = {{1.5, -2.0}, {0.25, 8.0}};
    const LoadedTensor<double> tensor = parse_tensor<double>(npy_bytes(array), "a.npy");
    CHECK(tensor.source.format == FileFormat::npy);
    CHECK(tensor.source.path == "a.npy");
    CHECK(tensor.array == array);
}

TEST_CASE("parse_tensor reads JSON whatever whitespace comes first") {
    const auto parse = [](const char* text) {
        LoadedTensor<float> tensor = parse_tensor<float>(text, "x.json");
        CHECK(tensor.source.format == FileFormat::json);
        return tensor.array;
    };
    check_shapes(parse, {
        {"[1, 2]", "(2,)"},
        {"  \n\t[1, 2, 3]", "(3,)"},
        {"\r\n{\"data\": [[1]]}", "(1, 1)"},
        {"-1.5", "()"},
        {"7\n", "()"},
        {" 0.5 ", "()"},
    });
    CHECK(parse_tensor<double>("  -1.5", "x").array() == -1.5);
}

TEST_CASE("parse_tensor rejects empty and unrecognised bytes, naming the file and the first bytes") {
    CHECK(error_of<InputError>([] { parse_tensor<float>("", "x"); }) == "x: empty file");
    CHECK(error_of<InputError>([] { parse_tensor<float>(" \n\t\r", "x"); }) == "x: empty file (only whitespace)");
    CHECK(error_of<InputError>([] { parse_tensor<float>("hello", "x"); }) ==
          "x: not a .npy or JSON tensor (starts with b'hello')");
    CHECK(error_of<InputError>([] { parse_tensor<float>("\"1, 2\"", "x"); }) ==
          "x: not a .npy or JSON tensor (starts with b'\"1, 2\"')");
    CHECK(error_of<InputError>([] { parse_tensor<float>("\xef\xbb\xbf[1]", "x"); }) ==
          "x: not a .npy or JSON tensor (starts with b'\\xef\\xbb\\xbf[1]')");
    CHECK(error_of<InputError>([] { parse_tensor<float>(std::string("PK\x03\x04\x14\0\0\0\x08\0", 10), "m.pt"); }) ==
          "m.pt: not a .npy or JSON tensor (starts with b'PK\\x03\\x04\\x14\\x00\\x00\\x00'...); a zip archive "
          "(.npz, or torch.save output) holds several arrays: save one with numpy.save");
    // A cut-off magic string is a (truncated) .npy file: parse_npy reports it.
    const std::string truncated = error_of<InputError>([] { parse_tensor<float>("\x93NUM", "t.npy"); });
    CHECK(truncated.rfind("t.npy: ", 0) == 0);
}

TEST_CASE("format_from_extension knows .npy and .json in any case, and nothing else") {
    CHECK(format_from_extension("a.npy") == FileFormat::npy);
    CHECK(format_from_extension("dir.v2/a.JSON") == FileFormat::json);
    CHECK(format_from_extension("/x/y.Npy") == FileFormat::npy);
    CHECK_FALSE(format_from_extension("a.txt").has_value());
    CHECK_FALSE(format_from_extension("npy").has_value());
    CHECK_FALSE(format_from_extension("dir.npy/a").has_value());
    CHECK_FALSE(format_from_extension("-").has_value());
}

// ---- FileBytes and load_tensor --------------------------------------------------------------------

TEST_CASE("load_tensor reads a file and keeps the name it was given") {
    const std::string path = ATTNTRACE_FIXTURES "/json/bare_2x3.json";
    const LoadedTensor<double> tensor = load_tensor<double>(path);
    CHECK(tensor.source.path == path);
    CHECK(tensor.source.format == FileFormat::json);
    CHECK(tensor.array == Array<double>{{1, 2.5, -3}, {400, -0.125, 0.6}});
}

TEST_CASE("load_tensor reads stdin for -") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const std::string text = "{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4]]}";
    REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
    LoadedTensor<float> tensor;
    {
        const Redirect stdin_from_pipe(STDIN_FILENO, fds[0]);
        tensor = load_tensor<float>("-");
    }
    ::close(fds[0]);
    CHECK(tensor.source.path == "-");
    CHECK(tensor.source.dtype == DType::f4);
    CHECK(tensor.array == Array<float>{{1, 2}, {3, 4}});
}

TEST_CASE("FileBytes reads an empty file as no bytes") {
    TempDir dir;
    write_file(dir / "empty.npy", "");
    const FileBytes file = FileBytes::open(dir / "empty.npy");
    CHECK(file.bytes().empty());
    CHECK(file.name() == dir / "empty.npy");
    CHECK(error_of<InputError>([&] { load_tensor<float>(dir / "empty.npy"); }) == dir / "empty.npy" + ": empty file");
}

TEST_CASE("FileBytes names a missing path, a directory and a path through a file") {
    TempDir dir;
    CHECK(error_of<InputError>([&] { FileBytes::open(dir / "nope.npy"); }) == dir / "nope.npy" + ": no such file");
    CHECK(error_of<InputError>([&] { FileBytes::open(dir.path.string()); }) == dir.path.string() + ": is a directory");
    write_file(dir / "file", "x");
    CHECK(error_of<InputError>([&] { FileBytes::open(dir / "file/x.npy"); }) ==
          dir / "file/x.npy" + ": Not a directory");
}

TEST_CASE("FileBytes reads a FIFO to its end") {
    TempDir dir;
    const std::string fifo = dir / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string big(200000, ' ');  // more than one pipe buffer
    big.replace(0, 6, "[1, 2]");
    std::thread writer([&] {
        std::ofstream out(fifo, std::ios::binary);
        out << big;
    });
    const FileBytes file = FileBytes::open(fifo);
    writer.join();
    CHECK(file.bytes() == big);
    CHECK(parse_tensor<double>(file.bytes(), fifo).array == Array<double>{1, 2});
}

TEST_CASE("FileBytes reads files whose size the kernel reports as 0") {
    const FileBytes file = FileBytes::open("/proc/self/status");
    CHECK(file.bytes().find("Pid:") != std::string_view::npos);
}

TEST_CASE("a moved FileBytes still holds its bytes, short buffered ones included") {
    TempDir dir;
    const std::string big = "[1, 2, 3" + std::string(70000, ' ') + "]";  // over 64 KiB: mapped
    write_file(dir / "mapped.json", big);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    REQUIRE(::write(fds[1], "[4]", 3) == 3);  // short enough for std::string's in-object buffer
    ::close(fds[1]);
    std::optional<FileBytes> piped;
    {
        const Redirect stdin_from_pipe(STDIN_FILENO, fds[0]);
        piped.emplace(FileBytes::open("-"));
    }
    ::close(fds[0]);
    std::optional<FileBytes> mapped(FileBytes::open(dir / "mapped.json"));

    FileBytes moved_pipe(std::move(*piped));
    piped.reset();
    CHECK(moved_pipe.bytes() == "[4]");
    CHECK(moved_pipe.name() == "-");

    REQUIRE(attntrace::mapped_file_at(mapped->bytes().data()) != nullptr);
    FileBytes moved_map(std::move(*mapped));
    mapped.reset();
    CHECK(moved_map.bytes() == big);

    moved_map = std::move(moved_pipe);
    CHECK(moved_map.bytes() == "[4]");
    CHECK(moved_map.name() == "-");
}

TEST_CASE("FileBytes: a regular file of at most 64 KiB is read whole, a larger one mapped") {
    TempDir dir;
    for (const std::size_t size : {std::size_t{1}, std::size_t{65536}, std::size_t{65537}}) {
        std::string text(size, 'x');
        text.front() = 'a', text.back() = 'z';
        write_file(dir / "f.bin", text);
        const FileBytes file = FileBytes::open(dir / "f.bin");
        CHECK(file.bytes() == text);
        CHECK((attntrace::mapped_file_at(file.bytes().data()) != nullptr) == (size > 65536));
    }
}

TEST_CASE("FileBytes::resident gives the mapped bytes in place; mapped_file_at names their file while mapped") {
    TempDir dir;
    std::string text(3 << 20, 'a');  // 3 MiB: populated by more than one worker when allowed
    for (std::size_t i = 0; i < text.size(); i += 4096) text[i] = static_cast<char>('b' + i / 4096 % 20);
    write_file(dir / "big.bin", text);
    attntrace::set_read_threads(2);
    std::optional<FileBytes> file(FileBytes::open(dir / "big.bin"));
    const char* at = file->resident(4096, text.size() - 8192);
    CHECK(at == file->bytes().data() + 4096);
    CHECK(std::string_view(at, text.size() - 8192) == std::string_view(text).substr(4096, text.size() - 8192));
    CHECK(std::string(attntrace::mapped_file_at(at + 100)) == dir / "big.bin");
    CHECK(attntrace::mapped_file_at(text.data()) == nullptr);  // not a mapping of a file
    const void* inside = at;
    file.reset();
    CHECK(attntrace::mapped_file_at(inside) == nullptr);  // unmapped: forgotten
    attntrace::set_read_threads(1);
}

TEST_CASE("FileBytes::resident: a file cut short since it was opened is an InputError naming it") {
    TempDir dir;
    write_file(dir / "cut.bin", std::string(1 << 20, 'x'));
    const FileBytes file = FileBytes::open(dir / "cut.bin");
    REQUIRE(::truncate((dir / "cut.bin").c_str(), 4096) == 0);
    CHECK(error_of<InputError>([&] { file.resident(8192, 65536); }) == dir / "cut.bin" + ": the file shrank while it was read");
    CHECK(file.resident(0, 4096)[0] == 'x');  // what is still there reads as before
}

// ---- writing -------------------------------------------------------------------------------------

TEST_CASE("StreamedFile::write_at: pieces written anywhere are the file's once committed, and nothing before") {
    TempDir dir;
    for (const bool existing : {false, true}) {
        if (existing) write_file(dir / "m.bin", "old");
        auto file = StreamedFile::open(dir / "m.bin");
        REQUIRE(file);
        file->write_at(6000, std::string(4000, 'b'));  // out of order, past the end, as the head's blocks
        file->write_at(0, std::string(6000, 'a'));
        CHECK(entries(dir.path) == (existing ? std::set<std::string>{"m.bin"} : std::set<std::string>{}));
        if (existing) CHECK(read_file(dir / "m.bin") == "old");
        file->commit();
        CHECK(read_file(dir / "m.bin") == std::string(6000, 'a') + std::string(4000, 'b'));
        CHECK(entries(dir.path) == std::set<std::string>{"m.bin"});
    }
    {  // dropped uncommitted: the old file as it was, no temp file
        auto file = StreamedFile::open(dir / "m.bin");
        file->write_at(0, "zzzz");
    }
    CHECK(read_file(dir / "m.bin").size() == 10000);
    CHECK(entries(dir.path) == std::set<std::string>{"m.bin"});
    CHECK(StreamedFile::open("-") == nullptr);  // stdout is written whole, not streamed
}

TEST_CASE("StreamedFile::open_or_hold: a FIFO or device gets the pieces in order at commit; a regular file streams") {
    TempDir dir;
    const std::string fifo = dir / "f";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] {  // opening a FIFO to read waits for the writer, which commit() opens
        std::ifstream in(fifo, std::ios::binary);
        received.assign(std::istreambuf_iterator<char>(in), {});
    });
    {
        auto file = StreamedFile::open_or_hold(fifo);
        REQUIRE(file);
        file->write_at(3 << 20, std::string(1 << 20, 'b'));  // past the end first, as the head's blocks
        file->write_at(0, std::string(3 << 20, 'a'));
        file->commit();
    }
    reader.join();
    CHECK(received == std::string(3 << 20, 'a') + std::string(1 << 20, 'b'));
    CHECK(entries(dir.path) == std::set<std::string>{"f"});  // no temp file beside it

    auto full = StreamedFile::open_or_hold("/dev/full");
    REQUIRE(full);
    full->write_at(0, "xyz");
    CHECK(error_of<OutputError>([&] { full->commit(); }) == "/dev/full: " + std::string(std::strerror(ENOSPC)));

    auto regular = StreamedFile::open_or_hold(dir / "r.bin");  // streamed into its temp file as open() does
    regular->write_at(0, "abc");
    CHECK(entries(dir.path) == std::set<std::string>{"f"});
    regular->commit();
    CHECK(read_file(dir / "r.bin") == "abc");
    CHECK(error_of<OutputError>([] { StreamedFile::open_or_hold(""); }) == "output path is empty");
}

TEST_CASE("save_tensor writes the format its extension names, or the one given") {
    TempDir dir;
    const Array<float> array = {{0.1f, 2.0f}, {-3.5f, 1e-38f}};
    save_tensor(dir / "a.json", array);
    CHECK(read_file(dir / "a.json") == json_tensor_text(array));
    save_tensor(dir / "a.NPY", array);
    CHECK(read_file(dir / "a.NPY") == npy_bytes(array));
    save_tensor(dir / "a.txt", array, FileFormat::npy);
    CHECK(read_file(dir / "a.txt") == npy_bytes(array));
    save_tensor(dir / "b.npy", array, FileFormat::json);
    CHECK(read_file(dir / "b.npy") == json_tensor_text(array));
    CHECK(load_tensor<float>(dir / "a.NPY").array == array);

    CHECK(error_of<UsageError>([&] { save_tensor(dir / "out", array); }) ==
          dir / "out" + ": cannot tell the format from the extension; use .npy or .json (or name the format)");
    CHECK(error_of<UsageError>([&] { save_tensor("-", array); }) ==
          "-: cannot tell the format from the extension; use .npy or .json (or name the format)");
    CHECK(entries(dir.path) == std::set<std::string>{"a.json", "a.NPY", "a.txt", "b.npy"});
}

TEST_CASE("save_tensor writes .npy in place into /dev/null, and calls a directory a directory") {
    TempDir dir;
    const Array<float> array = {1.0f, 2.0f};
    CHECK_NOTHROW(save_tensor("/dev/null", array));
    fs::create_directory(dir / "d.json");
    fs::create_directory(dir / "plain");
    for (const std::string path : {dir / "d.json/", dir / "plain", dir / "new.json/"}) {
        CHECK(error_of<OutputError>([&] { save_tensor(path, array); }) == path + ": is a directory");
    }
    CHECK(entries(dir.path) == std::set<std::string>{"d.json", "plain"});
}

TEST_CASE("write_file_atomically creates a file, mode 0644 less the umask, leaving no temp file") {
    TempDir dir;
    write_file_atomically(dir / "new.txt", "hello\n");
    CHECK(read_file(dir / "new.txt") == "hello\n");
    const mode_t mask = ::umask(0);
    ::umask(mask);
    struct stat info {};
    REQUIRE(::stat((dir / "new.txt").c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == (0644 & ~mask));
    CHECK(entries(dir.path) == std::set<std::string>{"new.txt"});
}

TEST_CASE("write_file_atomically replaces an existing file, longer or shorter") {
    TempDir dir;
    write_file(dir / "f", "old old old old");
    write_file_atomically(dir / "f", "new");
    CHECK(read_file(dir / "f") == "new");
    write_file_atomically(dir / "f", std::string(100000, 'z'));
    CHECK(read_file(dir / "f") == std::string(100000, 'z'));
    write_file_atomically(dir / "f", "");
    CHECK(read_file(dir / "f").empty());
    CHECK(entries(dir.path) == std::set<std::string>{"f"});
}

namespace {
// How many of this process's descriptors refer to the file with inode INODE on device DEV.
int descriptors_on(dev_t dev, ino_t inode) {
    int count = 0;
    for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
        struct stat info {};
        const int fd = std::stoi(entry.path().filename().string());
        if (::fstat(fd, &info) == 0 && info.st_dev == dev && info.st_ino == inode) ++count;
    }
    return count;
}
}  // namespace

TEST_CASE("defer_replaced_files: a large replaced file loses its name at once and is freed by a helper") {
    TempDir dir;
    const std::string big = dir / "big", small = dir / "small";
    write_file(big, std::string(std::size_t{5} << 20, 'a'));  // 5 MiB: kept for the helper
    write_file(small, std::string(std::size_t{1} << 20, 'b'));  // 1 MiB: deleted at once
    struct stat old_big {}, old_small {};
    REQUIRE(::stat(big.c_str(), &old_big) == 0);
    REQUIRE(::stat(small.c_str(), &old_small) == 0);

    defer_replaced_files(true);
    write_file_atomically(big, "new big");
    write_file_atomically(small, "new small");
    defer_replaced_files(false);
    CHECK(read_file(big) == "new big");
    CHECK(read_file(small) == "new small");
    CHECK(entries(dir.path) == std::set<std::string>{"big", "small"});  // no name left for the old ones
    CHECK(descriptors_on(old_big.st_dev, old_big.st_ino) == 1);
    CHECK(descriptors_on(old_small.st_dev, old_small.st_ino) == 0);

    release_replaced_files();
    CHECK(descriptors_on(old_big.st_dev, old_big.st_ino) == 0);
    int status = -1;
    const pid_t helper = ::waitpid(-1, &status, 0);  // the helper, a child of this process
    REQUIRE(helper > 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    release_replaced_files();  // nothing left: no second helper
    CHECK(::waitpid(-1, &status, WNOHANG) == -1);

    write_file(big, std::string(std::size_t{5} << 20, 'c'));  // deferral off: deleted at once
    REQUIRE(::stat(big.c_str(), &old_big) == 0);
    write_file_atomically(big, "newer");
    CHECK(descriptors_on(old_big.st_dev, old_big.st_ino) == 0);
}

TEST_CASE("write_file_atomically resolves a relative path without a directory") {
    TempDir dir;
    {
        const WorkingDir here(dir.path);
        write_file_atomically("plain.json", "[1]\n");
    }
    CHECK(read_file(dir / "plain.json") == "[1]\n");
    CHECK(entries(dir.path) == std::set<std::string>{"plain.json"});
}

TEST_CASE("write_file_atomically into a missing directory is an OutputError that leaves nothing") {
    TempDir dir;
    const std::string path = dir / "missing/x.npy";
    CHECK(error_of<OutputError>([&] { write_file_atomically(path, "abc"); }) ==
          path + ": No such file or directory");
    CHECK(entries(dir.path).empty());
}

TEST_CASE("write_file_atomically onto a directory is an OutputError that leaves it as it was") {
    TempDir dir;
    fs::create_directory(dir / "sub");
    write_file(dir / "sub/keep", "k");
    CHECK(error_of<OutputError>([&] { write_file_atomically(dir / "sub", "abc"); }) == dir / "sub" + ": is a directory");
    CHECK(entries(dir.path) == std::set<std::string>{"sub"});
    CHECK(entries(dir.path / "sub") == std::set<std::string>{"keep"});
    CHECK(read_file(dir / "sub/keep") == "k");
}

TEST_CASE("write_file_atomically through a path with a file as directory is an OutputError") {
    TempDir dir;
    write_file(dir / "file", "f");
    CHECK(error_of<OutputError>([&] { write_file_atomically(dir / "file/x", "abc"); }) ==
          dir / "file/x" + ": Not a directory");
    CHECK(read_file(dir / "file") == "f");
}

namespace {

// Set by on_file_too_large, the SIGXFSZ handler: the scratch directory's entries before and after
// remove_pending_temp_files.
fs::path watched_dir;
std::atomic<long> entries_before{-1};
std::atomic<long> entries_after{-1};

void on_file_too_large(int) {
    // Not async-signal-safe, but SIGXFSZ comes synchronously from write(2) in this test.
    entries_before = static_cast<long>(entries(watched_dir).size());
    remove_pending_temp_files();
    entries_after = static_cast<long>(entries(watched_dir).size());
}

// Runs F with writes limited to LIMIT bytes per file (RLIMIT_FSIZE): the way to make a write fail
// half way that works for root too. SIGXFSZ goes to HANDLER.
template <class F>
void with_file_size_limit(rlim_t limit, void (*handler)(int), F&& f) {
    struct rlimit saved {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    struct sigaction action {};
    struct sigaction saved_action {};
    action.sa_handler = handler;
    ::sigaction(SIGXFSZ, &action, &saved_action);
    struct rlimit limited = saved;
    limited.rlim_cur = limit;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
    try {
        f();
    } catch (...) {
        ::setrlimit(RLIMIT_FSIZE, &saved);
        ::sigaction(SIGXFSZ, &saved_action, nullptr);
        throw;
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::sigaction(SIGXFSZ, &saved_action, nullptr);
}

}  // namespace

TEST_CASE("a write that fails half way leaves the old file intact and no temp file") {
    TempDir dir;
    write_file(dir / "t.npy", "old content");
    std::string message;
    with_file_size_limit(4096, SIG_IGN, [&] {
        message = error_of<OutputError>([&] { write_file_atomically(dir / "t.npy", std::string(10000, 'n')); });
    });
    CHECK(message == dir / "t.npy" + ": File too large");
    CHECK(read_file(dir / "t.npy") == "old content");
    CHECK(entries(dir.path) == std::set<std::string>{"t.npy"});
}

TEST_CASE("remove_pending_temp_files removes the temp file of a write in progress") {
    TempDir dir;
    write_file(dir / "t.npy", "old content");
    watched_dir = dir.path;
    entries_before = -1;
    entries_after = -1;
    remove_pending_temp_files();  // nothing pending: nothing removed
    CHECK(entries(dir.path) == std::set<std::string>{"t.npy"});
    std::string message;
    with_file_size_limit(4096, on_file_too_large, [&] {
        message = error_of<OutputError>([&] { write_file_atomically(dir / "t.npy", std::string(10000, 'n')); });
    });
    CHECK(message == dir / "t.npy" + ": File too large");
    // t.npy, and .t.npy.tmp-XXXXXX unless the file system keeps the temp file nameless (O_TMPFILE)
    CHECK(entries_before >= 1);
    CHECK(entries_before <= 2);
    CHECK(entries_after == 1);
    CHECK(read_file(dir / "t.npy") == "old content");
}

TEST_CASE("remove_pending_temp_files removes the registered temp file, and only while registered") {
    TempDir dir;
    write_file(dir / ".t.tmp-abcdef", "partial");
    const int slot = register_pending_temp(dir / ".t.tmp-abcdef");
    REQUIRE(slot >= 0);
    write_file(dir / ".u.tmp-ghijkl", "partial too");  // -o and --attn-weights streamed at once
    const int other = register_pending_temp(dir / ".u.tmp-ghijkl");
    REQUIRE(other >= 0);
    CHECK(other != slot);
    std::vector<int> more;  // the remaining slots, then none
    for (std::size_t i = 2; i < kPendingTempSlots; ++i) more.push_back(register_pending_temp(dir / "more"));
    for (int m : more) CHECK(m >= 0);
    CHECK(register_pending_temp(dir / "one too many") == -1);
    for (int m : more) forget_pending_temp(m);
    remove_pending_temp_files();
    CHECK(entries(dir.path).empty());
    forget_pending_temp(slot);
    forget_pending_temp(other);
    write_file(dir / ".t.tmp-abcdef", "kept");
    remove_pending_temp_files();
    CHECK(entries(dir.path) == std::set<std::string>{".t.tmp-abcdef"});
}

TEST_CASE("a legal 250-byte file name is written, new and over an existing file") {
    TempDir dir;
    const std::string name = std::string(246, 'n') + ".npy";
    write_file_atomically(dir / name, "first");
    CHECK(read_file(dir / name) == "first");
    write_file_atomically(dir / name, "second");
    CHECK(read_file(dir / name) == "second");
    CHECK(entries(dir.path) == std::set<std::string>{name});
}

TEST_CASE("a file read while inputs are remembered is never replaced, however it is named") {
    TempDir dir;
    write_file(dir / "in.npy", "input");
    fs::create_hard_link(dir / "in.npy", dir / "hard.npy");
    fs::create_symlink("in.npy", dir / "soft.npy");
    write_file(dir / "other.npy", "other");
    remember_inputs(true);
    { const FileBytes read = FileBytes::open(dir / "in.npy"); }
    for (const std::string name : {"in.npy", "hard.npy", "soft.npy"}) {
        CHECK(error_of<OutputError>([&] { write_file_atomically(dir / name, "clobbered"); }) ==
              dir / name + ": refusing to overwrite an input file" + (name == "in.npy" ? "" : " (" + dir / "in.npy" + ")"));
    }
    CHECK_NOTHROW(write_file_atomically(dir / "other.npy", "replaced"));  // a file not read
    remember_inputs(false);  // and forgotten
    CHECK_NOTHROW(write_file_atomically(dir / "in.npy", "replaced"));
    CHECK(read_file(dir / "hard.npy") == "input");
    CHECK(read_file(dir / "in.npy") == "replaced");
}

TEST_CASE("same_output_file: one file by identity, or one place for a new file; never stdout or a device") {
    TempDir dir;
    write_file(dir / "a.npy", "a");
    fs::create_hard_link(dir / "a.npy", dir / "hard.npy");
    fs::create_symlink("a.npy", dir / "soft.npy");
    fs::create_directory(dir / "sub");
    const WorkingDir here(dir.path);
    CHECK(same_output_file("a.npy", "./a.npy"));
    CHECK(same_output_file("a.npy", "hard.npy"));
    CHECK(same_output_file("soft.npy", dir / "a.npy"));
    CHECK(same_output_file("new.npy", "sub/../new.npy"));
    CHECK(same_output_file("new.npy", dir / "new.npy"));
    CHECK_FALSE(same_output_file("new.npy", "new.json"));
    CHECK_FALSE(same_output_file("a.npy", "new.npy"));
    CHECK_FALSE(same_output_file("-", "-"));
    CHECK_FALSE(same_output_file("/dev/null", "/dev/null"));
}

TEST_CASE("write_file_atomically writes through a symlink and keeps the link") {
    TempDir dir;
    fs::create_directory(dir / "real");
    write_file(dir / "real/target.json", "old");
    fs::create_symlink("real/target.json", dir / "link.json");
    write_file_atomically(dir / "link.json", "new");
    CHECK(fs::is_symlink(dir / "link.json"));
    CHECK(read_file(dir / "real/target.json") == "new");
    CHECK(entries(dir.path) == std::set<std::string>{"link.json", "real"});
    CHECK(entries(dir.path / "real") == std::set<std::string>{"target.json"});
}

TEST_CASE("write_file_atomically writes into a FIFO and /dev/null without replacing them") {
    TempDir dir;
    const std::string fifo = dir / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] {
        std::ifstream in(fifo, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        received = text.str();
    });
    write_file_atomically(fifo, "through the pipe");
    reader.join();
    CHECK(received == "through the pipe");
    CHECK(fs::is_fifo(fifo));
    CHECK(entries(dir.path) == std::set<std::string>{"fifo"});

    const std::set<std::string> dev_before = entries("/dev");
    write_file_atomically("/dev/null", "discarded");
    CHECK(fs::is_character_file("/dev/null"));
    CHECK(entries("/dev") == dev_before);
}

TEST_CASE("write_file_atomically writes - to stdout") {
    TempDir dir;
    const int fd = ::open((dir / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    {
        const Redirect stdout_to_file(STDOUT_FILENO, fd);
        write_file_atomically("-", "to stdout\n");
    }
    ::close(fd);
    CHECK(read_file(dir / "stdout.txt") == "to stdout\n");
}

// ---- reading streams: no further than the file they hold can reach ------------------------------

TEST_CASE("a device that never ends is read only as far as its first bytes decide") {
    for (const char* device : {"/dev/zero", "/dev/urandom"}) {
        CAPTURE(device);
        const FileBytes file = FileBytes::open(device);
        CHECK(file.bytes().size() >= 16);
        CHECK(file.bytes().size() <= 65536);
    }
    CHECK(error_of<InputError>([] { load_tensor<float>("/dev/zero"); }) ==
          "/dev/zero: not a .npy or JSON tensor (starts with b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'...)");
}

TEST_CASE("stdin is read up to the size the .npy header states, and not a byte past it") {
    TempDir dir;
    const Array<float> array = {{1, 2, 3}, {4, 5, 6}};
    const std::string npy = npy_bytes(array);
    write_file(dir / "exact", npy);
    write_file(dir / "extra", npy + "more");
    write_file(dir / "short", npy.substr(0, npy.size() - 1));
    std::optional<LoadedTensor<float>> loaded;
    auto from_stdin = [&](const std::string& name) {
        const int fd = ::open((dir / name).c_str(), O_RDONLY);
        REQUIRE(fd >= 0);
        const Redirect in(STDIN_FILENO, fd);
        ::close(fd);
        return error_of<InputError>([&] { loaded = load_tensor<float>("-"); });
    };
    CHECK(from_stdin("exact").empty());
    REQUIRE(loaded);
    CHECK(loaded->array == array);
    CHECK(from_stdin("extra") == "-: trailing bytes after the data (the .npy header states " + std::to_string(npy.size()) +
                                     " bytes in all)");
    CHECK(from_stdin("short").starts_with("-: truncated data: needs 24 bytes, file holds 23"));
}

TEST_CASE("a stream whose .npy header claims more than the memory is refused before it is read") {
    TempDir dir;
    std::string header = npy_header<float>({std::size_t{1} << 50});  // 4 PiB
    write_file(dir / "claim", header + std::string(1000, '\0'));
    const int fd = ::open((dir / "claim").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    const Redirect in(STDIN_FILENO, fd);
    ::close(fd);
    const std::string message = error_of<InputError>([] { FileBytes::open("-"); });
    CHECK(message.starts_with("-: the .npy header states 4.0 PiB, more than the physical memory ("));
}

// ---- ensure_not_an_input ---------------------------------------------------------------------------

TEST_CASE("ensure_not_an_input refuses the same file however it is spelled or linked") {
    TempDir dir;
    write_file(dir / "x.npy", "x");
    write_file(dir / "other.npy", "o");
    const std::string x = dir / "x.npy";
    CHECK(error_of<OutputError>([&] { ensure_not_an_input(x, {dir / "other.npy", x}); }) ==
          x + ": refusing to overwrite an input file");

    const WorkingDir here(dir.path);
    CHECK(error_of<OutputError>([&] { ensure_not_an_input("./x.npy", {"x.npy"}); }) ==
          "./x.npy: refusing to overwrite an input file (x.npy)");
    CHECK(error_of<OutputError>([&] { ensure_not_an_input("x.npy", {x}); }) ==
          "x.npy: refusing to overwrite an input file (" + x + ")");
    fs::create_directory("sub");
    CHECK(error_of<OutputError>([&] { ensure_not_an_input("sub/../x.npy", {"x.npy"}); }) ==
          "sub/../x.npy: refusing to overwrite an input file (x.npy)");

    fs::create_hard_link("x.npy", "hard.npy");
    CHECK(error_of<OutputError>([&] { ensure_not_an_input("hard.npy", {"x.npy"}); }) ==
          "hard.npy: refusing to overwrite an input file (x.npy)");
    fs::create_symlink("x.npy", "soft.npy");
    CHECK(error_of<OutputError>([&] { ensure_not_an_input("soft.npy", {"-", "x.npy"}); }) ==
          "soft.npy: refusing to overwrite an input file (x.npy)");
}

TEST_CASE("ensure_not_an_input allows other files, new files, stdout and stdin") {
    TempDir dir;
    write_file(dir / "x.npy", "x");
    write_file(dir / "y.npy", "x");  // same content, different file
    CHECK_NOTHROW(ensure_not_an_input(dir / "y.npy", {dir / "x.npy"}));
    CHECK_NOTHROW(ensure_not_an_input(dir / "new.npy", {dir / "x.npy"}));
    CHECK_NOTHROW(ensure_not_an_input("-", {"-", dir / "x.npy"}));
    CHECK_NOTHROW(ensure_not_an_input(dir / "x.npy", {"-", dir / "missing.npy"}));
    CHECK_NOTHROW(ensure_not_an_input(dir / "x.npy", {}));
}

// ---- reading a mapped file's data with pread ------------------------------------------------------

TEST_CASE("FileBytes::copy gives the file's bytes, and a file that shrank is an InputError") {
    TempDir dir;
    std::string bytes(3 * 1024 * 1024 + 17, '\0');  // over the 1 MiB pieces, not a multiple of them
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
    write_file(dir / "big.bin", bytes);
    const FileBytes file = FileBytes::open(dir / "big.bin");
    REQUIRE(file.bytes() == bytes);
    std::string copied(bytes.size() - 100, '\0');
    file.copy(50, copied.size(), copied.data());
    CHECK(copied == bytes.substr(50, copied.size()));
    fs::resize_file(dir / "big.bin", 1000);
    CHECK(error_of<InputError>([&] { file.copy(0, 2000, copied.data()); }) ==
          dir / "big.bin" + ": the file shrank while it was read");
}

TEST_CASE("FileBytes::copy with several read workers gives the same bytes, and a shrunk file is still an InputError") {
    TempDir dir;
    std::string bytes(5 * 1024 * 1024 + 4099, '\0');  // 5 slices of 1 MiB and up, unaligned ends
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 11);
    write_file(dir / "big.bin", bytes);
    const FileBytes file = FileBytes::open(dir / "big.bin");
    for (std::size_t threads : {2u, 3u, 4u, 16u}) {
        set_read_threads(threads);
        std::string copied(bytes.size() - 333, '\0');
        file.copy(333, copied.size(), copied.data());
        CHECK_MESSAGE(copied == bytes.substr(333), threads);
        std::string small(4096, '\0');  // under 2 MiB: one read on the calling thread
        file.copy(1, small.size(), small.data());
        CHECK(small == bytes.substr(1, small.size()));
    }
    fs::resize_file(dir / "big.bin", 3 * 1024 * 1024);
    std::string copied(bytes.size(), '\0');
    CHECK(error_of<InputError>([&] { file.copy(0, copied.size(), copied.data()); }) ==
          dir / "big.bin" + ": the file shrank while it was read");
    set_read_threads(1);
}

TEST_CASE("load_tensor (data read with pread) gives every .npy fixture exactly as parse_npy of its bytes") {
    const fs::path npy_dir = fs::path(ATTNTRACE_FIXTURES) / "npy" / "good";
    std::size_t compared = 0;
    for (const fs::directory_entry& entry : fs::directory_iterator(npy_dir)) {
        if (entry.path().extension() != ".npy") continue;
        const std::string path = entry.path().string();
        const LoadedTensor<float> loaded = load_tensor<float>(path);
        const LoadedTensor<float> parsed = parse_npy<float>(read_file(entry.path()), path);
        CHECK_MESSAGE(shape_of(loaded.array) == shape_of(parsed.array), path);
        CHECK_MESSAGE((parsed.array.size() == 0 ||  // memcmp must not see the null data of an empty array
                       std::memcmp(loaded.array.data(), parsed.array.data(), parsed.array.size() * sizeof(float)) == 0),
                      path);
        ++compared;
    }
    CHECK(compared >= 10);
}
