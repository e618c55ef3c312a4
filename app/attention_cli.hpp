#pragma once
// What sdpa and mha share on the command line: the flags, loading the attention mask, the memory
// budget, and writing the outputs, the dumps and the trace.
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/attention.hpp"
#include "attntrace/tensor.hpp"
#include "attntrace/trace.hpp"

// The modes of a run, parsed from their flags' words.
enum class Precision { f32, f64 };              // --dtype
enum class TraceDetail { none, shapes, values };  // --trace
enum class TraceFormat { text, json };          // --format
std::string_view precision_name(Precision p);   // "f32", "f64"

// Runs fn.template operator()<double>() for f64, <float>() for f32.
template <class Fn>
void with_precision(Precision precision, Fn&& fn) {
    if (precision == Precision::f64) {
        fn.template operator()<double>();
    } else {
        fn.template operator()<float>();
    }
}

struct AttentionFlags {
    std::string query, key, value;
    std::optional<double> scale;
    bool causal = false;
    std::string attn_mask;
    std::string output;
    std::string attn_weights;
    Precision dtype = Precision::f32;
    TraceDetail trace = TraceDetail::shapes;
    TraceFormat format = TraceFormat::text;
    std::size_t threads = 0;
    std::vector<std::string> dumps;  // STAGE=FILE
    std::string max_memory;          // "" = default budget
};

// Adds the flags both commands take to CMD.
void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);

// One run of sdpa or mha from the flags: the recorder, the core's options, the budget check, and
// the outputs at the end. STAGE_NAMES are the command's stages (--dump checks against them).
template <class T>
class AttentionRun {
public:
    AttentionRun(const AttentionFlags& flags, const std::vector<std::string>& stage_names);

    // Every path the run reads or writes must be checked before any work.
    void check_outputs(const std::vector<std::string>& inputs, const std::vector<std::string>& extra_outputs) const;
    // The attention mask from the flags (bool when the file's dtype is not a float).
    void load_attn_mask(attntrace::Masks<T>& masks) const;
    // Refuses (exit 3) when the (..., Lq, Lk) buffers this run keeps would exceed --max-memory.
    // PLANE_SHAPE: the shape of one such buffer, (B, H, Lq, Lk) or (..., Lq, Lk).
    void check_budget(const attntrace::Shape& plane_shape) const;

    attntrace::AttentionOptions options;
    attntrace::StageRecorder<T> recorder;

    // Writes the output, the weights, the dumps, then the trace (stdout, or stderr when a tensor
    // goes to stdout).
    void finish(attntrace::AttentionResult<T>& result, attntrace::TraceContext context) const;

private:
    const AttentionFlags& flags_;
    std::vector<std::pair<std::string, std::string>> dumps_;  // stage, file
};

using attntrace::shape_of;

// The JSON trace's options both commands share: "scale", "masks" {causal, attn_mask,
// attn_mask_kind, empty_rows}, "dtype", "threads".
template <class T>
nlohmann::json shared_trace_options(const AttentionFlags& flags, const attntrace::Masks<T>& masks,
                                    const attntrace::AttentionResult<T>& result);

// The JSON trace's "inputs": [{"name", "file", "format", "dtype", "shape"}] for query, key, value.
template <class T>
nlohmann::json inputs_json(const attntrace::LoadedTensor<T>& query, const attntrace::LoadedTensor<T>& key,
                           const attntrace::LoadedTensor<T>& value);
