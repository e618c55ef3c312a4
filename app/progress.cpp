#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

ProgressBar::~ProgressBar() {
    if (drawn_) std::fprintf(stderr, "\r\x1b[2K");  // erase the bar: the trace follows clean
}

void ProgressBar::update(std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr std::size_t width = 30;
    const std::size_t filled = std::min(width, done * width / total);
    const std::string bar = std::string(filled, '#') + std::string(width - filled, '-');
    std::fprintf(stderr, "\rattention [%s] %3zu%%", bar.c_str(), std::min<std::size_t>(100, done * 100 / total));
    std::fflush(stderr);
}

double expected_seconds(std::size_t planes, std::size_t lq, std::size_t lk, std::size_t p, std::size_t threads) {
    const double flops = 4.0 * double(planes) * double(lq) * double(lk) * double(std::max<std::size_t>(p, 1));
    return flops / (5e9 * double(std::max<std::size_t>(threads, 1)));
}

bool want_progress(double seconds) { return seconds > 1.0 && isatty(fileno(stderr)); }
