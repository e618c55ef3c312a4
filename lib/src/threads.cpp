// Threading (see threads.hpp): workers that could not be started are simply not used.
#include "attntrace/threads.hpp"

#include <algorithm>
#include <cstdio>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "attntrace/gemm.hpp"

namespace attntrace {

namespace {

// What one more worker reserves in address space before it does anything: its stack, a malloc
// arena (64 MiB on 64-bit glibc) and OpenBLAS's per-thread buffer (128 MiB on x86-64). Under
// `ulimit -v` OpenBLAS spins forever when that buffer cannot be mapped, so a worker that would
// not fit is never started.
std::size_t worker_reservation() {
    rlimit stack{};
    std::size_t stack_bytes = std::size_t{8} << 20;
    if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY) stack_bytes = stack.rlim_cur;
    return stack_bytes + (std::size_t{64} << 20) + (std::size_t{128} << 20);
}

// The workers (the calling thread included) that fit under RLIMIT_AS; THREADS when it is unlimited.
std::size_t workers_within_address_space(std::size_t threads) {
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return threads;
    std::size_t pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%zu", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    const std::size_t used = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t left = as.rlim_cur > used ? as.rlim_cur - used : 0;
    return std::max<std::size_t>(1, std::min(threads, 1 + left / worker_reservation()));
}

}  // namespace

std::size_t thread_count(std::size_t requested) { return requested ? requested : available_cores(); }

std::size_t run_workers(std::size_t threads, const std::function<void(std::size_t)>& work) {
    threads = workers_within_address_space(threads);
    std::vector<std::thread> pool;
    try {
        pool.reserve(threads > 0 ? threads - 1 : 0);
    } catch (const std::bad_alloc&) {  // a huge --threads: start them one by one below
    }
    for (std::size_t w = 1; w < threads; ++w) {
        try {
            pool.emplace_back(work, w);
        } catch (const std::system_error&) {  // EAGAIN: no memory for a stack, or no process slot
            break;
        } catch (const std::bad_alloc&) {
            break;
        }
    }
    work(0);  // the calling thread is worker 0
    for (auto& t : pool) t.join();
    return pool.size() + 1;
}

SingleThreadedBlas::SingleThreadedBlas() : saved_(blas_threads()) { set_blas_threads(1); }
SingleThreadedBlas::~SingleThreadedBlas() { set_blas_threads(saved_); }

}  // namespace attntrace
