// LD_PRELOAD shim for tests/e2e/hostile.sh: the write faults a test cannot otherwise cause on
// demand, each turned on by an environment variable.
//   FAULT_KILL_AFTER=N   once N bytes have gone to regular files, write the rest of that write's
//                        bytes up to N and SIGKILL the process: a kill -9 in the middle of a write
//   FAULT_NO_TMPFILE=1   open(DIR, O_TMPFILE ...) fails with EOPNOTSUPP, as on a file system
//                        without O_TMPFILE (attntrace then falls back to a named temp file)
// and a read fault: a model file cut short by another process while attntrace reads it in place.
//   FAULT_SHRINK_ON_POPULATE=PATH  the first madvise(MADV_POPULATE_READ) truncates PATH to 4 KiB
//                        first (then fails as on a file cut short)
//   FAULT_SHRINK_AFTER_POPULATE=1  ... and that madvise then reports success: the file was cut
//                        after its pages were mapped, before they are read, so the reads raise SIGBUS
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);
using OpenFn = int (*)(const char*, int, ...);

unsigned long long written_to_files = 0;

int open_with(const char* name, const char* path, int flags, mode_t mode) {
    const char* no_tmpfile = std::getenv("FAULT_NO_TMPFILE");
    if ((flags & O_TMPFILE) == O_TMPFILE && no_tmpfile != nullptr && *no_tmpfile != '\0') {
        errno = EOPNOTSUPP;
        return -1;
    }
    const auto real = reinterpret_cast<OpenFn>(dlsym(RTLD_NEXT, name));
    return real(path, flags, mode);
}

mode_t mode_argument(int flags, va_list args) {
    return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? static_cast<mode_t>(va_arg(args, int)) : 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* bytes, size_t size) {
    static const auto real = reinterpret_cast<WriteFn>(dlsym(RTLD_NEXT, "write"));
    const char* limit_text = std::getenv("FAULT_KILL_AFTER");
    struct stat info {};
    if (limit_text != nullptr && *limit_text != '\0' && ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
        const unsigned long long limit = std::strtoull(limit_text, nullptr, 10);
        if (written_to_files + size > limit) {
            if (limit > written_to_files) real(fd, bytes, static_cast<size_t>(limit - written_to_files));
            ::raise(SIGKILL);
        }
        written_to_files += size;
    }
    return real(fd, bytes, size);
}

extern "C" int open(const char* path, int flags, ...) {
    va_list args;
    va_start(args, flags);
    const mode_t mode = mode_argument(flags, args);
    va_end(args);
    return open_with("open", path, flags, mode);
}

extern "C" int open64(const char* path, int flags, ...) {
    va_list args;
    va_start(args, flags);
    const mode_t mode = mode_argument(flags, args);
    va_end(args);
    return open_with("open64", path, flags, mode);
}

extern "C" int madvise(void* address, size_t length, int advice) {
    using MadviseFn = int (*)(void*, size_t, int);
    static const auto real = reinterpret_cast<MadviseFn>(dlsym(RTLD_NEXT, "madvise"));
    static bool shrunk = false;
    const char* victim = std::getenv("FAULT_SHRINK_ON_POPULATE");
    if (advice == MADV_POPULATE_READ && victim != nullptr && *victim != '\0' && !shrunk) {
        shrunk = true;
        if (::truncate(victim, 4096) != 0) ::raise(SIGKILL);  // the test cannot go on
        const char* after = std::getenv("FAULT_SHRINK_AFTER_POPULATE");
        if (after != nullptr && *after != '\0') return 0;
    }
    return real(address, length, advice);
}

