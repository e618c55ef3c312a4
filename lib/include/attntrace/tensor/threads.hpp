#pragma once
// Threading, in one place: how many workers a run uses, the loop that spreads tasks over them, and
// the guard that keeps BLAS single-threaded inside our threads.
//
// A thread that cannot be started (ulimit -v, ulimit -u, --threads 1024 on a small machine) is
// not an error: the loop runs with the workers it could start (at least the calling thread). An
// exception thrown by a task stops the other workers' loops and is rethrown to the caller.
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <system_error>
#include <thread>

namespace attntrace {

// The address space this process may still map under `ulimit -v` (RLIMIT_AS less what is mapped
// now), or SIZE_MAX when it is unlimited.
std::size_t address_space_left();

// The worker count for REQUESTED threads (0: every core this process may use).
std::size_t thread_count(std::size_t requested);

// Runs work(worker) on workers 1 .. threads-1 (as many as can be started) and on the calling
// thread as worker 0, and returns when all are done; returns how many workers ran. The workers are
// threads started on first use and kept, parked, for later calls. A call made from inside WORK, or
// from another thread while one runs, runs on its calling thread alone (returns 1). WORK must not
// throw.
std::size_t run_workers(std::size_t threads, const std::function<void(std::size_t)>& work);

// Alongside<R>: WORK runs on a thread of its own, started by the constructor, while the caller goes
// on (reading one input file while another is read); get() waits for it and returns its result or
// rethrows its exception. When no thread can be started, get() runs WORK itself. The destructor
// waits for a started WORK, so nothing it refers to goes away under it.
template <class R>
class Alongside {
public:
    explicit Alongside(std::function<R()> work) : task_(std::move(work)), result_(task_.get_future()) {
        try {
            thread_ = std::thread(std::ref(task_));
        } catch (const std::system_error&) {  // no thread (ulimit -u): get() runs it
        }
    }
    Alongside(const Alongside&) = delete;
    Alongside& operator=(const Alongside&) = delete;
    ~Alongside() {
        if (thread_.joinable()) thread_.join();
    }
    R get() {
        if (thread_.joinable())
            thread_.join();
        else if (!ran_inline_)
            ran_inline_ = true, task_();
        return result_.get();
    }

private:
    std::packaged_task<R()> task_;
    std::future<R> result_;
    std::thread thread_;
    bool ran_inline_ = false;
};

// Lowers the calling thread's scheduling priority to the least (nice 19): a side thread whose work
// is wanted only later (Alongside) then runs on the cores the workers leave idle, not in their place.
// Best effort: nothing happens where the system refuses.
void lower_thread_priority();

// Runs fn(task, worker) for task in [0, tasks) on up to `threads` workers; each worker takes the
// next task when it is free, so a slow core or a causal block with few keys does not hold the rest.
// worker < min(threads, tasks), so per-worker scratch sized that way is enough.
template <class Fn>
void parallel_for(std::size_t tasks, std::size_t threads, Fn&& fn) {
    threads = threads < tasks ? threads : tasks;
    if (threads <= 1) {
        for (std::size_t t = 0; t < tasks; ++t) fn(t, std::size_t{0});
        return;
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    run_workers(threads, [&](std::size_t worker) {
        try {
            for (std::size_t t; !failed.load(std::memory_order_relaxed) &&
                                (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;)
                fn(t, worker);
        } catch (...) {
            if (!failed.exchange(true)) error = std::current_exception();
        }
    });
    if (error) std::rethrow_exception(error);
}

// Calls work(r0, r1, c0, c1) for blocks of a (ROWS, COLS) product on up to THREADS workers, one
// block each: blocks of columns, so that each worker packs only its share of the right operand (a
// layer's weight, the larger one when the rows are few), or blocks of rows when the rows outnumber
// the columns. Block edges are multiples of 64 columns or 16 rows.
template <class Work>
void split_product(std::size_t rows, std::size_t cols, std::size_t threads, Work&& work) {
    const bool by_rows = rows > cols;
    const std::size_t span = by_rows ? rows : cols, align = by_rows ? 16 : 64;
    const std::size_t most = span / align;
    const std::size_t blocks = threads < most ? threads : (most > 0 ? most : 1);
    const std::size_t per = ((span + blocks - 1) / blocks + align - 1) / align * align;
    parallel_for(blocks, blocks, [&](std::size_t b, std::size_t) {
        const std::size_t a0 = b * per < span ? b * per : span, a1 = a0 + per < span ? a0 + per : span;
        if (a0 == a1) return;
        if (by_rows) return work(a0, a1, std::size_t{0}, cols);
        work(std::size_t{0}, rows, a0, a1);
    });
}

// Our threads do all the parallel work (over heads, query blocks and projection rows) and BLAS
// runs single-threaded inside them: OpenBLAS's own pool, left spinning between calls, would
// fight our threads for the cores. The guard restores OpenBLAS's setting afterwards.
class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
    std::size_t saved_;
};

}  // namespace attntrace
