// The renderers of attntrace check's report: JSON and text (check.hpp).
#include <cmath>
#include <cstdio>

#include "attntrace/check/check.hpp"
#include "attntrace/tensor/stats.hpp"

namespace attntrace {

namespace {

bool compared(const StageCheck& s) { return s.status == StageStatus::match || s.status == StageStatus::differs; }

nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

// S padded with spaces to WIDTH characters.
std::string padded(std::string s, std::size_t width) {
    if (s.size() < width) s.resize(width, ' ');
    return s;
}

// "max abs 1e-07 at [0, 1, 2], max rel 3e-07 (float32: rtol 0.0001, atol 1.2e-05)" and what was recognised.
std::string stage_facts(const StageCheck& s) {
    if (s.status == StageStatus::missing) return "(no file)";
    if (s.status == StageStatus::shape_mismatch)
        return s.file + ": shape " + shape_string(s.file_shape) + " but the stage is " + shape_string(s.reference_shape);
    const auto& r = s.result;
    std::string t = "max abs " + short_number(r.max_abs_diff);
    if (r.max_abs_index) t += " at " + index_string(*r.max_abs_index);
    t += ", max rel " + short_number(r.max_rel_diff);
    if (s.status == StageStatus::differs)
        t += ", " + std::to_string(r.mismatches) + " of " + std::to_string(r.count) + " not close";
    if (r.nan_pairs) t += ", " + std::to_string(r.nan_pairs) + " NaN";
    t += " (" + s.dtype + ": rtol " + short_number(s.tol.rtol) + ", atol " + short_number(s.tol.atol) + ")";
    if (!s.layout.empty()) t += "; read as " + s.layout;
    for (const auto& c : s.conventions) t += "; " + c;
    return t;
}

}  // namespace

nlohmann::json check_json(const CheckReport& report) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& s : report.stages) {
        const bool with_numbers = compared(s);
        const auto& r = s.result;
        nlohmann::json where;
        if (with_numbers && r.max_abs_index) where = *r.max_abs_index;
        stages.push_back({{"name", s.name},
                          {"status", status_name(s.status)},
                          {"max_abs", with_numbers ? finite_or_null(r.max_abs_diff) : nlohmann::json()},
                          {"max_rel", with_numbers ? finite_or_null(r.max_rel_diff) : nlohmann::json()},
                          {"where", where}});
    }
    nlohmann::json diagnosis;
    if (report.diagnosis)
        diagnosis = {{"code", report.diagnosis->code}, {"stage", report.diagnosis->stage}, {"detail", report.diagnosis->detail}};
    return {{"stages", stages},
            {"first_divergence", report.first_divergence ? nlohmann::json(*report.first_divergence) : nlohmann::json()},
            {"diagnosis", diagnosis}};
}

std::string check_text(const CheckReport& report) {
    std::string t = "check against the " + report.command + " reference (float64):\n";
    for (const auto& s : report.stages)
        t += "  " + padded(s.name, 14) + padded(std::string(status_name(s.status)), 16) + stage_facts(s) + "\n";
    if (!report.ignored.empty()) {
        t += "ignored (no stage of that name):";
        for (const auto& f : report.ignored) t += " " + f;
        t += "\n";
    }
    if (!report.first_divergence) return t + "every stage given matches\n";
    t += "first divergence: " + *report.first_divergence + "\n";
    if (report.diagnosis) t += "diagnosis: " + report.diagnosis->code + ": " + report.diagnosis->detail + "\n";
    return t;
}

}  // namespace attntrace
