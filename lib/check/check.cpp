#include "attntrace/check/check.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xreducer.hpp>

#include "attntrace/check/diagnosis.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/stats.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/attention/trace.hpp"

namespace attntrace {

namespace {

constexpr double minus_inf = -std::numeric_limits<double>::infinity();
constexpr double fill_threshold = -1e4;  // a finite masked score at or below this is a fill

Shape shape_of(const Array<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

// The stages with a head axis before the length: (B, H, L, X).
bool is_head_stage(std::string_view stage) {
    return stage == "q_heads" || stage == "k_heads" || stage == "v_heads" || stage == "context";
}

// The stages whose query rows follow the weights' rows (an empty row may hold NaN there).
bool row_stage(std::string_view stage) {
    return stage == "weights" || stage == "context" || stage == "merged" || stage == "output";
}

// The (B, L, H, X) name of a head stage's other layout.
std::string head_layout_name(std::string_view stage, bool batch) {
    const std::string b = batch ? "B, " : "";
    if (stage == "q_heads") return "(" + b + "Lq, H, P)";
    if (stage == "k_heads") return "(" + b + "Lk, G, P)";
    if (stage == "v_heads") return "(" + b + "Lk, G, Pv)";
    return "(" + b + "Lq, H, Pv)";
}

// A's values (any shape) in SHAPE (the same count).
Array<double> reshaped(const Array<double>& a, const Shape& shape) {
    Array<double> r = a;
    r.reshape(shape);
    return r;
}

struct Candidate {
    Array<double> values;  // in the reference's shape
    std::string layout;
};

// Every way A's shape can be read as the reference's REF (stage STAGE), most literal first.
std::vector<Candidate> layouts(const Array<double>& a, const Shape& ref, std::string_view stage, bool mha) {
    std::vector<Candidate> out;
    const Shape s = shape_of(a);
    const std::size_t r = ref.size();
    const bool no_batch_possible = r >= 1 && ref[0] == 1 && s.size() + 1 == r;
    if (s == ref) out.push_back({a, ""});
    if (no_batch_possible && std::equal(s.begin(), s.end(), ref.begin() + 1)) out.push_back({reshaped(a, ref), "no batch axis"});
    if (mha && is_head_stage(stage) && r >= 3) {
        Shape swapped = ref;
        std::swap(swapped[r - 3], swapped[r - 2]);
        std::vector<std::size_t> perm(r);
        for (std::size_t d = 0; d < r; ++d) perm[d] = d;
        std::swap(perm[r - 3], perm[r - 2]);
        const bool no_batch = no_batch_possible && std::equal(s.begin(), s.end(), swapped.begin() + 1);
        if (s == swapped || no_batch) {
            Array<double> t = xt::transpose(reshaped(a, swapped), perm);
            out.push_back({std::move(t), head_layout_name(stage, !no_batch) + (no_batch ? ", no batch axis" : "")});
        }
    }
    if (mha && r == 4 && s == Shape{ref[0] * ref[1], ref[2], ref[3]})
        out.push_back({reshaped(a, ref), "(B*H, ...): batch and heads merged"});
    return out;
}

// d2l's -1e6, transformers' finfo.min: a large negative value where the reference masked a score
// reads as -inf. Returns the convention recognised, if any.
std::optional<std::string> read_masked_fill(Array<double>& user, const Array<double>& ref) {
    double lo = 0, hi = minus_inf;
    std::size_t fills = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double u = user.data()[i];
        if (ref.data()[i] != minus_inf || !std::isfinite(u) || u > fill_threshold) continue;
        lo = std::min(lo, u), hi = std::max(hi, u);
        user.data()[i] = minus_inf;
        ++fills;
    }
    if (fills == 0) return std::nullopt;
    if (lo == hi) return "masked scores as a " + short_number(lo) + " fill (read as -inf)";
    return "masked scores as large negative fills from " + short_number(lo) + " to " + short_number(hi) +
           " (read as -inf)";
}

// Whether query row ROW (an index of WEIGHTS without its last axis) has no allowed key.
std::vector<bool> empty_rows(const Array<double>& weights) {
    const std::size_t lk = weights.dimension() ? weights.shape().back() : 1;
    std::vector<bool> empty(lk ? weights.size() / lk : 0, true);
    for (std::size_t i = 0; i < weights.size(); ++i)
        if (weights.data()[i] != 0) empty[i / lk] = false;
    return empty;
}

// Whether the element INDEX of a stage of rank INDEX.size() lies in an empty query row: stages with
// the weights' leading axes (weights, context, sdpa's output), or mha's (B, Lq, X) stages (merged,
// output), where one empty head makes the row's NaN.
bool in_empty_row(const Shape& index, const Shape& wshape, const std::vector<bool>& empty) {
    const std::size_t rw = wshape.size();
    auto row_of = [&](const Shape& lead) {  // lead: the weights' index without its last axis
        std::size_t row = 0;
        for (std::size_t d = 0; d + 1 < rw; ++d) row = row * wshape[d] + lead[d];
        return row;
    };
    if (index.size() == rw) return empty[row_of(Shape(index.begin(), index.end() - 1))];
    if (index.size() + 1 != rw || rw < 3) return false;
    Shape lead(index.begin(), index.end() - 1);        // (b..., i)
    lead.insert(lead.end() - 1, 0);                    // (b..., h, i)
    for (std::size_t h = 0; h < wshape[rw - 3]; ++h) {
        lead[lead.size() - 2] = h;
        if (empty[row_of(lead)]) return true;
    }
    return false;
}

// PyTorch before 2.5: a row with no allowed key holds NaN where attntrace has zeros. NaNs in the
// reference's empty rows read as the reference's values, when every NaN lies in one.
std::optional<std::string> read_empty_rows(Array<double>& user, const Array<double>& ref, const StageValues& run) {
    const auto w = run.find("weights");
    if (w == run.end()) return std::nullopt;
    const Shape wshape = shape_of(w->second), shape = shape_of(ref);
    const auto empty = empty_rows(w->second);
    std::vector<std::size_t> nans;
    for (std::size_t i = 0; i < user.size(); ++i) {
        if (!std::isnan(user.data()[i]) || std::isnan(ref.data()[i])) continue;
        if (!in_empty_row(unravel_index(i, shape), wshape, empty)) return std::nullopt;
        nans.push_back(i);
    }
    if (nans.empty()) return std::nullopt;
    for (auto i : nans) user.data()[i] = ref.data()[i];
    return "rows with no allowed key as NaN (PyTorch before 2.5; attntrace writes zeros)";
}

// max |a| over A's finite values (any shape); 0 when none.
double max_finite_abs(const Array<double>& a) {
    double m = 0;
    for (double x : a)
        if (std::isfinite(x)) m = std::max(m, std::abs(x));
    return m;
}

}  // namespace

StageValues run_stages(const CheckProblem& p) {
    StageRecorder<double> recorder({}, true);
    AttentionOptions options = p.options;
    options.need_weights = false, options.average_heads = false, options.row_stats = false;
    if (p.is_mha) {
        mha(p.query, p.key, p.value, p.params, p.config, p.masks, options, &recorder);
    } else {
        sdpa(p.query, p.key, p.value, p.masks, options, &recorder);
    }
    StageValues out;
    for (const auto& s : recorder.stages())
        if (s.values) out.emplace(s.name, *s.values);
    return out;
}

const std::vector<std::string>& check_stage_names(const CheckProblem& problem) {
    return problem.is_mha ? mha_stage_names() : sdpa_stage_names();
}

std::vector<StageFile> load_stage_files(const std::string& dir, const std::vector<std::string>& stage_names,
                                        std::vector<std::string>& ignored) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a directory of stage files");
    std::map<std::string, std::string> found;  // stage -> path
    std::vector<std::string> entries;
    for (const auto& entry : fs::directory_iterator(dir, ec)) entries.push_back(entry.path().filename().string());
    if (ec) throw InputError(dir + ": cannot list the directory (" + ec.message() + ")");
    std::sort(entries.begin(), entries.end());
    for (const auto& name : entries) {
        const fs::path p(name);
        const std::string stem = p.stem().string(), ext = p.extension().string();
        const bool known = std::find(stage_names.begin(), stage_names.end(), stem) != stage_names.end();
        if (!known || (ext != ".npy" && ext != ".json")) {
            ignored.push_back(name);
            continue;
        }
        const std::string path = (fs::path(dir) / name).string();
        if (found.count(stem))
            throw InputError(path + ": stage '" + stem + "' has two files (" + found[stem] + " too); keep one");
        found[stem] = path;
    }
    std::vector<StageFile> files;
    for (const auto& stage : stage_names) {
        const auto it = found.find(stage);
        if (it == found.end()) continue;
        auto loaded = load_tensor<double>(it->second);
        files.push_back({stage, it->second, loaded.source.dtype, std::move(loaded.array)});
    }
    return files;
}

std::string_view status_name(StageStatus status) {
    switch (status) {
        case StageStatus::match: return "match";
        case StageStatus::differs: return "differs";
        case StageStatus::shape_mismatch: return "shape mismatch";
        case StageStatus::missing: break;
    }
    return "missing";
}

Tolerance default_tolerance(DType dtype, const Array<double>& ref, const ToleranceOverride& override_tol) {
    Tolerance tol;  // compare's: rtol 1e-5, atol 1e-8
    if (dtype == DType::f4 || dtype == DType::f2) {
        const bool half = dtype == DType::f2;
        tol.rtol = half ? 1e-2 : 1e-4;
        tol.atol = std::max(1e-8, (half ? 1e-3 : 1e-5) * max_finite_abs(ref));
    }
    if (override_tol.rtol) tol.rtol = *override_tol.rtol;
    if (override_tol.atol) tol.atol = *override_tol.atol;
    return tol;
}

namespace {

// FILE against REF (the stage of RUN, or its head average) in each layout that fits: the first
// that matches, else the first that fits; nullopt when none does.
std::optional<StageCheck> best_layout(const StageFile& file, const Array<double>& ref, const StageValues& run,
                                      const StageCheck& base, const std::string& prefix) {
    std::optional<StageCheck> first;
    for (auto& cand : layouts(file.values, shape_of(ref), file.stage, run.count("q_heads") > 0)) {
        StageCheck c = base;
        c.reference_shape = shape_of(ref);
        c.layout = prefix.empty() ? cand.layout : prefix + (cand.layout.empty() ? "" : ", " + cand.layout);
        std::optional<std::string> fill;
        if (file.stage == "masked_scores") fill = read_masked_fill(cand.values, ref);
        if (fill) c.conventions.push_back(*fill);
        if (row_stage(file.stage))
            if (auto nan = read_empty_rows(cand.values, ref, run)) c.conventions.push_back(*nan);
        c.result = compare_tensors(cand.values, ref, c.tol);
        c.status = c.result.close ? StageStatus::match : StageStatus::differs;
        if (c.result.close) return c;
        if (!first) first = std::move(c);
    }
    return first;
}

}  // namespace

StageCheck check_stage(const StageFile& file, const StageValues& run, const ToleranceOverride& tol) {
    const Array<double>& ref = run.at(file.stage);
    StageCheck base;
    base.name = file.stage, base.file = file.path, base.dtype = std::string(dtype_name(file.dtype));
    base.file_shape = shape_of(file.values), base.reference_shape = shape_of(ref);
    base.tol = default_tolerance(file.dtype, ref, tol);
    base.result.shape_a = base.file_shape, base.result.shape_b = base.reference_shape;
    base.status = StageStatus::shape_mismatch;
    if (auto c = best_layout(file, ref, run, base, "")) return *c;
    // mha's weights averaged over the heads, PyTorch's default (average_attn_weights=True): (B, Lq, Lk)
    if (file.stage == "weights" && run.count("q_heads") && ref.dimension() >= 3) {
        const Array<double> mean = xt::mean(ref, {ref.dimension() - 3});
        if (auto c = best_layout(file, mean, run, base, "averaged over the heads (PyTorch's default)")) return *c;
    }
    return base;
}

CheckReport check_implementation(const CheckProblem& problem, const std::string& dir, const ToleranceOverride& tol) {
    CheckReport report;
    report.command = problem.is_mha ? "mha" : "sdpa";
    const auto& names = check_stage_names(problem);
    const auto files = load_stage_files(dir, names, report.ignored);
    if (files.empty()) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        throw InputError(dir + ": no stage file (name them after the " + report.command + " stages: " + list +
                         "; .npy or .json)");
    }
    const StageValues reference = run_stages(problem);
    for (const auto& name : names) {
        if (!reference.contains(name)) continue;  // a stage this run has not (normed, q_rotary: positions)
        const auto file = std::find_if(files.begin(), files.end(), [&](const StageFile& f) { return f.stage == name; });
        StageCheck c;
        if (file == files.end()) {
            c.name = name;
            c.reference_shape = shape_of(reference.at(name));
        } else {
            c = check_stage(*file, reference, tol);
        }
        const bool diverges = c.status == StageStatus::differs || c.status == StageStatus::shape_mismatch;
        if (diverges && !report.first_divergence) report.first_divergence = name;
        report.stages.push_back(std::move(c));
    }
    if (report.first_divergence)
        report.diagnosis = diagnose(problem, reference, files, *report.first_divergence, tol);
    return report;
}

}  // namespace attntrace
