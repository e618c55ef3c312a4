#include "attntrace/tensor/timeline.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>

namespace attntrace {

namespace {

using Clock = std::chrono::steady_clock;

struct Mark {
    Clock::time_point at;
    int thread;
    const char* what;
};

struct Timeline {
    std::atomic<bool> on{false};
    Clock::time_point start;
    std::mutex mutex;
    std::vector<Mark> marks;
    int threads = 0;
};

Timeline& timeline() {
    static Timeline t;
    return t;
}

}  // namespace

void enable_timeline() {
    Timeline& t = timeline();
    t.start = Clock::now();
    t.on.store(true);
}

void timeline_mark(const char* what) {
    Timeline& t = timeline();
    if (!t.on.load(std::memory_order_relaxed)) return;
    const Clock::time_point now = Clock::now();
    thread_local int thread = -1;
    const std::lock_guard<std::mutex> lock(t.mutex);
    if (thread < 0) thread = t.threads++;
    t.marks.push_back({now, thread, what});
}

std::string timeline_text() {
    Timeline& t = timeline();
    const std::lock_guard<std::mutex> lock(t.mutex);
    std::string text;
    char line[160];
    for (const Mark& m : t.marks) {
        const double ms = std::chrono::duration<double, std::milli>(m.at - t.start).count();
        std::snprintf(line, sizeof line, "%9.3f ms  thread %d  %s\n", ms, m.thread, m.what);
        text += line;
    }
    return text;
}

}  // namespace attntrace
