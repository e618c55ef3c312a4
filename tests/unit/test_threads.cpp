// The worker pool behind parallel_for: every worker index runs exactly once per call, the parked
// workers are reused, a nested or concurrent call runs on its own thread, and an exception in a
// task reaches the caller without breaking later calls.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attntrace/tensor/threads.hpp"

using namespace attntrace;

TEST_CASE("run_workers runs each worker index once per call, call after call on the kept workers") {
    for (std::size_t threads : {1u, 2u, 4u, 16u, 3u, 16u}) {
        for (int round = 0; round < 20; ++round) {
            std::vector<std::atomic<int>> runs(threads);
            const std::size_t ran = run_workers(threads, [&](std::size_t w) { runs.at(w).fetch_add(1); });
            REQUIRE(ran >= 1);
            REQUIRE(ran <= threads);
            for (std::size_t w = 0; w < threads; ++w) CHECK(runs[w].load() == (w < ran ? 1 : 0));
        }
    }
}

TEST_CASE("the calling thread is worker 0 and the others are other threads") {
    const auto caller = std::this_thread::get_id();
    std::vector<std::thread::id> ids(4);
    const std::size_t ran = run_workers(4, [&](std::size_t w) { ids[w] = std::this_thread::get_id(); });
    CHECK(ids[0] == caller);
    for (std::size_t w = 1; w < ran; ++w) CHECK(ids[w] != caller);
}

TEST_CASE("a parallel call made inside a task runs inline on that task's thread") {
    std::atomic<std::size_t> inner_tasks{0}, inner_ran_total{0};
    parallel_for(8, 4, [&](std::size_t, std::size_t) {
        const auto me = std::this_thread::get_id();
        const std::size_t ran = run_workers(4, [&](std::size_t w) {
            CHECK(w == 0);
            CHECK(std::this_thread::get_id() == me);
        });
        inner_ran_total += ran;
        parallel_for(5, 4, [&](std::size_t, std::size_t worker) {
            CHECK(worker == 0);
            ++inner_tasks;
        });
    });
    CHECK(inner_ran_total.load() == 8);
    CHECK(inner_tasks.load() == 8 * 5);
}

TEST_CASE("parallel_for from two threads at once runs every task of each exactly once") {
    constexpr std::size_t tasks = 2000;
    std::vector<std::atomic<int>> a(tasks), b(tasks);
    auto fill = [](std::vector<std::atomic<int>>& hits) {
        for (int round = 0; round < 10; ++round)
            parallel_for(tasks, 3, [&](std::size_t t, std::size_t worker) {
                CHECK(worker < 3);
                hits[t].fetch_add(1);
            });
    };
    std::thread other(fill, std::ref(b));
    fill(a);
    other.join();
    for (std::size_t t = 0; t < tasks; ++t) {
        CHECK(a[t].load() == 10);
        CHECK(b[t].load() == 10);
    }
}

TEST_CASE("an exception in a task reaches parallel_for's caller, and the next call still runs") {
    CHECK_THROWS_WITH_AS(parallel_for(100, 4,
                                      [](std::size_t t, std::size_t) {
                                          if (t == 37) throw std::runtime_error("task 37");
                                      }),
                         "task 37", std::runtime_error);
    std::atomic<std::size_t> sum{0};
    parallel_for(100, 4, [&](std::size_t t, std::size_t) { sum += t; });
    CHECK(sum.load() == 4950);
}

TEST_CASE("Alongside runs its work on another thread and hands back its result or its exception") {
    const auto caller = std::this_thread::get_id();
    Alongside<std::thread::id> where([] { return std::this_thread::get_id(); });
    CHECK(where.get() != caller);

    Alongside<int> failing([]() -> int { throw std::runtime_error("bad params"); });
    CHECK_THROWS_WITH_AS(failing.get(), "bad params", std::runtime_error);

    // never asked for: the destructor waits, so what the work refers to outlives it
    std::atomic<int> done{0};
    { Alongside<void> unread([&] { std::this_thread::sleep_for(std::chrono::milliseconds(20)), done = 1; }); }
    CHECK(done.load() == 1);

    // while a parallel_for runs on the kept workers, one from Alongside's thread runs on it alone
    std::atomic<int> tasks{0};
    Alongside<void> beside([&] { parallel_for(100, 4, [&](std::size_t, std::size_t) { ++tasks; }); });
    parallel_for(100, 4, [&](std::size_t, std::size_t) { ++tasks; });
    beside.get();
    CHECK(tasks.load() == 200);
}
