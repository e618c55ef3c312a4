#include "attntrace/tensor/memory.hpp"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

std::uint64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

std::uint64_t default_memory_budget() {
    const std::uint64_t ram = physical_memory_bytes();
    return ram ? ram / 2 : (std::uint64_t{8} << 30);
}

std::optional<std::uint64_t> parse_byte_size(const std::string& text) {
    std::size_t pos = 0;
    while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) ++pos;
    if (pos == 0) return std::nullopt;
    double value = 0;
    try {
        std::size_t used = 0;
        value = std::stod(text.substr(0, pos), &used);
        if (used != pos) return std::nullopt;
    } catch (...) {
        return std::nullopt;
    }
    std::string unit = text.substr(pos);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double scale = 1;
    if (unit.empty() || unit == "B") scale = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
    else return std::nullopt;
    const double bytes = value * scale;
    if (!std::isfinite(bytes) || bytes >= 1.8e19) return std::nullopt;
    return static_cast<std::uint64_t>(bytes);
}

std::string byte_size_string(std::uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 6) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

void check_memory_budget(std::uint64_t planes, std::uint64_t elements_per_plane, std::uint64_t element_size,
                         std::uint64_t budget, const std::string& what, const std::string& avoid) {
    if (planes == 0) return;
    const long double need = static_cast<long double>(planes) * elements_per_plane * element_size;
    if (need <= static_cast<long double>(budget)) return;
    const std::uint64_t shown = need >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(need);
    throw InputError("memory budget: this run would need about " + byte_size_string(shown) + " for " + what +
                     ", over the budget of " + byte_size_string(budget) + "; " + avoid);
}

}  // namespace attntrace
