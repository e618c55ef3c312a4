#pragma once
// attntrace check: compares another implementation's stage tensors (one file per stage, named by
// the trace's stage names) with the reference, computed in float64, stage by stage in forward
// order, and names the first stage that diverges; diagnosis.hpp names the mistake.
//
// Legend: B batch, Lq/Lk query/key lengths, E embed dim, H heads, G kv heads, P head dim,
// Pv value head dim, PO output dim (as attention.hpp).
//
// A stage file may differ from the trace's form and still match:
//   layouts      the batch axis left out when B = 1; head stages (q_heads, k_heads, v_heads,
//                context) as (B, Lq, H, P); (B, H, ...) stages with B and H merged, (B*H, Lq, ...)
//   conventions  a masked score as -inf or as a large negative fill (d2l's -1e6, finfo.min), and a
//                row with no allowed key holding zeros or NaN (PyTorch before 2.5)
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/attention.hpp"
#include "attntrace/check/compare.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// What the reference runs on, in float64: sdpa's Q, K, V, or mha's inputs and parameters.
struct CheckProblem {
    bool is_mha = true;
    Array<double> query;        // mha (B, Lq, Eq) or (Lq, Eq); sdpa (..., Lq, E)
    Array<double> key;          // mha (B, Lk, Ek); sdpa (..., Lk, E)
    Array<double> value;        // mha (B, Lk, Ev); sdpa (..., Lk, Ev)
    MhaParams<double> params;   // mha only
    MhaConfig config;           // mha only
    Masks<double> masks;
    AttentionOptions options;   // scale and threads; the rest is set by the run
};

// Every stage's values of one run, by stage name (the shapes of observer.hpp).
using StageValues = std::map<std::string, Array<double>>;

// Runs PROBLEM's mha or sdpa once and keeps every stage.
StageValues run_stages(const CheckProblem& problem);

// The trace's stage names for PROBLEM, in forward order.
const std::vector<std::string>& check_stage_names(const CheckProblem& problem);

// One file of the other implementation's directory.
struct StageFile {
    std::string stage;            // a stage name
    std::string path;             // DIR/stage.npy or DIR/stage.json
    DType dtype = DType::f8;      // as stored
    Array<double> values;         // as stored, any layout
};

// The files DIR/NAME.npy and DIR/NAME.json for NAME in STAGE_NAMES, in that order. Files that name
// no stage go to IGNORED. Throws InputError when DIR is not a directory, when a stage has both
// a .npy and a .json file, or when a file cannot be read.
std::vector<StageFile> load_stage_files(const std::string& dir, const std::vector<std::string>& stage_names,
                                        std::vector<std::string>& ignored);

enum class StageStatus { match, differs, shape_mismatch, missing };
std::string_view status_name(StageStatus status);  // "match", "differs", "shape mismatch", "missing"

// --rtol / --atol: each replaces the dtype's default when given.
struct ToleranceOverride {
    std::optional<double> rtol;
    std::optional<double> atol;
};

// The default tolerance for a stage file of DTYPE whose reference values are REF (any shape):
//   float64 (and integer files): compare's rtol 1e-5, atol 1e-8;
//   float32: rtol 1e-4, atol 1e-5 * max|REF| (finite values), at least 1e-8;
//   float16: rtol 1e-2, atol 1e-3 * max|REF|, at least 1e-8 (a float16 value is already 5e-4 off).
Tolerance default_tolerance(DType dtype, const Array<double>& ref, const ToleranceOverride& override_tol);

struct StageCheck {
    std::string name;
    StageStatus status = StageStatus::missing;
    std::string file;                      // "" when missing
    std::string dtype;                     // the file's dtype name
    Shape file_shape;                      // as stored
    Shape reference_shape;                 // the trace's
    std::string layout;                    // how the file was read, "" when as the trace
    std::vector<std::string> conventions;  // the forms recognised, e.g. "masked scores as a -1e+06 fill"
    Tolerance tol;
    CompareResult result;                  // in the trace's layout; empty when shapes differ
};

// Compares FILE with stage FILE.stage of RUN (RUN's weights tell which rows are empty).
StageCheck check_stage(const StageFile& file, const StageValues& run, const ToleranceOverride& tol);

// The mistake that explains the first divergence (diagnosis.hpp).
struct Diagnosis {
    std::string code;    // a code of the vocabulary, or "unknown"
    std::string stage;   // the first diverging stage
    std::string detail;  // what was tested and found
};

struct CheckReport {
    std::string command;                       // "mha" or "sdpa"
    std::vector<StageCheck> stages;            // every stage of the trace, in forward order
    std::optional<std::string> first_divergence;
    std::optional<Diagnosis> diagnosis;        // set with first_divergence
    std::vector<std::string> ignored;          // files in DIR that name no stage
};

// The whole check of DIR against PROBLEM's reference. Throws InputError when DIR holds no stage file.
CheckReport check_implementation(const CheckProblem& problem, const std::string& dir, const ToleranceOverride& tol);

// {"stages": [{"name", "status", "max_abs", "max_rel", "where", ...}], "first_divergence",
//  "diagnosis": {"code", "stage", "detail"}} (nulls when nothing diverges).
nlohmann::json check_json(const CheckReport& report);

// One line per stage, then the first divergence and the diagnosis.
std::string check_text(const CheckReport& report);

}  // namespace attntrace
