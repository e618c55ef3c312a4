// The memory-bandwidth ceiling for the benchmark's weights case: how fast THREADS threads can put
// BYTES bytes where attntrace puts its attention weights, measured in the same run (median of 7).
//   membw_ceiling BYTES THREADS DIR
// prints one line of GB/s (1e9 bytes per second, BYTES divided by the wall time of one rep):
//   "fresh_pages X fresh_huge_pages H page_cache_mmap Y page_cache_write Z memcpy W"
//   fresh_pages      mmap anonymous memory and fill it (the kernel zeroes each page on first touch)
//   fresh_huge_pages the same with madvise(MADV_HUGEPAGE) on a 2 MiB-aligned mapping (one fault
//                    per 2 MiB where transparent huge pages are enabled, "madvise" or "always")
//   page_cache_mmap  create a file in DIR, ftruncate, mmap it shared and fill it (no msync/fsync)
//   page_cache_write create a file in DIR and pwrite an already-resident buffer into it (no fsync)
//   memcpy           copy between two already-resident buffers (the warm DRAM/cache rate)
// Every rep makes a new mapping or file, so the page-fault and page-cache allocation costs an
// output file pays are in the figure, as they are in attntrace's time.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// Runs part(begin, end) on THREADS threads over [0, bytes) in page-aligned slices.
void parallel_slices(std::size_t bytes, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& part) {
    const std::size_t page = 4096;
    const std::size_t slice = (bytes / threads + page - 1) / page * page;
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t) {
        const std::size_t begin = std::min(bytes, t * slice), end = std::min(bytes, begin + slice);
        if (begin < end) pool.emplace_back(part, begin, end);
    }
    for (auto& th : pool) th.join();
}

// Median GB/s of 7 reps of run() moving BYTES bytes.
double median_rate(std::size_t bytes, const std::function<void()>& run) {
    std::vector<double> seconds;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    return double(bytes) / seconds[seconds.size() / 2] / 1e9;
}

[[noreturn]] void fail(const std::string& what) {
    std::perror(what.c_str());
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: membw_ceiling BYTES THREADS DIR\n");
        return 2;
    }
    const std::size_t bytes = std::strtoull(argv[1], nullptr, 10);
    const std::size_t threads = std::max<std::size_t>(1, std::strtoull(argv[2], nullptr, 10));
    const std::string path = std::string(argv[3]) + "/membw_ceiling.tmp";
    std::vector<char> src(bytes, 1), dst(bytes, 0);  // resident: filled before any timing

    const auto fill_fresh = [&](bool huge) {
        const std::size_t align = huge ? std::size_t(2) << 20 : 0;
        void* raw = mmap(nullptr, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) fail("mmap");
        char* p = static_cast<char*>(raw);
        if (huge) {
            p += (align - reinterpret_cast<std::uintptr_t>(p) % align) % align;
            madvise(p, bytes, MADV_HUGEPAGE);
        }
        parallel_slices(bytes, threads, [&](std::size_t b, std::size_t e) { std::memset(p + b, 2, e - b); });
        munmap(raw, bytes + align);
    };
    const double fresh = median_rate(bytes, [&] { fill_fresh(false); });
    const double fresh_huge = median_rate(bytes, [&] { fill_fresh(true); });
    const double mapped = median_rate(bytes, [&] {
        const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) fail(path);
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) fail("mmap " + path);
        parallel_slices(bytes, threads, [&](std::size_t b, std::size_t e) { std::memset(static_cast<char*>(p) + b, 3, e - b); });
        munmap(p, bytes);
        close(fd);
        unlink(path.c_str());
    });
    const double written = median_rate(bytes, [&] {
        const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) fail(path);
        parallel_slices(bytes, threads, [&](std::size_t b, std::size_t e) {
            for (std::size_t at = b; at < e;) {
                const ssize_t n = pwrite(fd, src.data() + at, e - at, off_t(at));
                if (n <= 0) fail("pwrite " + path);
                at += std::size_t(n);
            }
        });
        close(fd);
        unlink(path.c_str());
    });
    const double copied = median_rate(bytes, [&] {
        parallel_slices(bytes, threads, [&](std::size_t b, std::size_t e) { std::memcpy(dst.data() + b, src.data() + b, e - b); });
    });
    std::printf("fresh_pages %.2f fresh_huge_pages %.2f page_cache_mmap %.2f page_cache_write %.2f memcpy %.2f\n", fresh,
                fresh_huge, mapped, written, copied);
}
