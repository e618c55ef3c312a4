#pragma once
// A progress bar on stderr for long runs: "attention [##########----------]  50%", redrawn in place
// at most 10 times a second and erased when the run ends. Only on a terminal (never in pipes or
// logs), and only for runs expected to take over a second. Safe to call from the core's threads.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>

class ProgressBar {
public:
    // ENABLED: stderr is a terminal and the run is expected to be long (see expected_seconds).
    explicit ProgressBar(bool enabled) : enabled_(enabled) {}
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // DONE of TOTAL units of work are finished.
    void update(std::size_t done, std::size_t total);

private:
    bool enabled_;
    bool drawn_ = false;
    std::mutex mutex_;
    std::chrono::steady_clock::time_point last_{};
};

// A rough run time for attention over PLANES (batch x heads) planes of (LQ, LK) with head dim P:
// two GEMMs of 2*LQ*LK*P flops each, at a conservative 5 GFLOP/s per core.
double expected_seconds(std::size_t planes, std::size_t lq, std::size_t lk, std::size_t p, std::size_t threads);

// Whether to show a bar: stderr is a terminal and the run is expected to take over a second.
bool want_progress(double seconds);
