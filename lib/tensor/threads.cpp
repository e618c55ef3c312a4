// Threading (see threads.hpp): workers that could not be started are simply not used.
#include "attntrace/tensor/threads.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attntrace/tensor/gemm.hpp"

namespace attntrace {

namespace {

// What one more worker reserves in address space before it does anything: its stack, a malloc
// arena (a 64 MiB heap, carved out of a 128 MiB mapping, all the workers' at once as they start)
// and OpenBLAS's per-thread buffer (128 MiB on x86-64). Under `ulimit -v` OpenBLAS spins forever
// when that buffer cannot be mapped, so a worker that would not fit is never started.
std::size_t worker_reservation() {
    rlimit stack{};
    std::size_t stack_bytes = std::size_t{8} << 20;
    if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY) stack_bytes = stack.rlim_cur;
    return stack_bytes + (std::size_t{128} << 20) + kBlasBufferBytes;
}

// How many of WANTED more workers fit under RLIMIT_AS (WANTED when it is unlimited). One
// reservation is kept back for the calling thread: OpenBLAS is loaded on the first product, often
// after this count, and then maps itself and the caller's buffer too.
std::size_t new_workers_within_address_space(std::size_t wanted) {
    const std::size_t left = address_space_left();
    if (left == SIZE_MAX) return wanted;
    const std::size_t fit = left / worker_reservation();
    return std::min(wanted, fit > 0 ? fit - 1 : 0);
}

}  // namespace

std::size_t address_space_left() {
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
    std::size_t pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%zu", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    const std::size_t used = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return as.rlim_cur > used ? as.rlim_cur - used : 0;
}

namespace {

// The workers, started on first use and kept, parked, for the rest of the process: a run makes
// several parallel calls (the projections, the attention, the output projection), and starting
// 15 threads for each of them costs more than waking parked ones (about 2 ms per call for 16
// threads on the 2-core VM measured). One job at a time; a call from inside a job (or from a
// second thread while one runs) runs on its calling thread alone.
class WorkerPool {
public:
    static WorkerPool& instance() {
        static WorkerPool* pool = new WorkerPool;  // never destroyed: parked threads end with the process
        return *pool;
    }

    std::size_t run(std::size_t threads, const std::function<void(std::size_t)>& work) {
        std::unique_lock<std::mutex> job_lock(job_mutex_, std::try_to_lock);
        if (threads <= 1 || in_worker_ || !job_lock.owns_lock()) {
            work(0);
            return 1;
        }
        const std::size_t helpers = grow(threads - 1);
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            job_ = &work;
            job_helpers_ = helpers;
            remaining_ = helpers;
            generation_.fetch_add(1, std::memory_order_release);
        }
        start_.notify_all();
        in_worker_ = true;  // a parallel call inside work(0) runs inline, as it would on a helper
        std::exception_ptr error;
        try {
            work(0);
        } catch (...) {  // WORK must not throw; if it does, the helpers still finish before it goes
            error = std::current_exception();
        }
        in_worker_ = false;
        spin_while([&] { return remaining_.load(std::memory_order_acquire) != 0; });
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return remaining_ == 0; });
        job_ = nullptr;
        if (error) std::rethrow_exception(error);
        return helpers + 1;
    }

private:
    // Starts helpers until there are WANTED (or no more fit, or one cannot be started); returns how
    // many there are, at most WANTED.
    std::size_t grow(std::size_t wanted) {
        if (helpers_.size() < wanted)
            wanted = helpers_.size() + new_workers_within_address_space(wanted - helpers_.size());
        while (helpers_.size() < wanted) {
            try {
                helpers_.emplace_back([this, index = helpers_.size() + 1] { serve(index); });
            } catch (const std::system_error&) {  // EAGAIN: no memory for a stack, or no process slot
                break;
            } catch (const std::bad_alloc&) {
                break;
            }
        }
        return std::min(wanted, helpers_.size());
    }

    // Helper INDEX (worker INDEX of every job it takes part in) waits for a job that wants it.
    void serve(std::size_t index) {
        in_worker_ = true;
        std::uint64_t seen = 0;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            lock.unlock();  // the next job mostly follows within microseconds: no sleep, no wake-up
            spin_while([&] { return generation_.load(std::memory_order_acquire) == seen; });
            lock.lock();
            start_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (index > job_helpers_) continue;
            const std::function<void(std::size_t)>* work = job_;
            lock.unlock();
            (*work)(index);
            lock.lock();
            if (--remaining_ == 0) done_.notify_one();
        }
    }

    // Spins (pause) while BUSY() holds, up to ~50 us, before a condition variable's sleep: a helper
    // woken by the futex took up to ~100 us to join a product of ~0.3-1.5 ms (the GGUF forward's:
    // the main thread took ~25 % more of its tasks, docs/performance.md "## GGUF weights").
    template <class Busy>
    static void spin_while(Busy&& busy) {
        for (int i = 0; i < 1024 && busy(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
            _mm_pause();  // ~140 cycles from Skylake on
#else
            std::this_thread::yield();
#endif
        }
    }

    std::mutex job_mutex_;  // held by the caller of the job in flight
    std::mutex mutex_;      // guards the job's fields below
    std::condition_variable start_, done_;
    const std::function<void(std::size_t)>* job_ = nullptr;
    std::size_t job_helpers_ = 0;
    std::atomic<std::size_t> remaining_{0};     // written under mutex_, also read spinning
    std::atomic<std::uint64_t> generation_{0};  // written under mutex_, also read spinning
    std::vector<std::thread> helpers_;  // only the job's caller adds to it (under job_mutex_)
    static thread_local bool in_worker_;
};

thread_local bool WorkerPool::in_worker_ = false;

}  // namespace

std::size_t thread_count(std::size_t requested) { return requested ? requested : available_cores(); }

std::size_t run_workers(std::size_t threads, const std::function<void(std::size_t)>& work) {
    return WorkerPool::instance().run(threads, work);
}

SingleThreadedBlas::SingleThreadedBlas() : saved_(blas_threads()) { set_blas_threads(1); }
SingleThreadedBlas::~SingleThreadedBlas() { set_blas_threads(saved_); }

void lower_thread_priority() {
    // Linux: SCHED_IDLE (sched(7)) runs the thread only where no other wants the core, below nice
    // 19, which still took ~4 of a tokenizer's 7 ms from the forward's workers here; a thread id
    // names the thread alone
    const sched_param none{};
    if (sched_setscheduler(static_cast<pid_t>(syscall(SYS_gettid)), SCHED_IDLE, &none) != 0)
        setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
}

}  // namespace attntrace
