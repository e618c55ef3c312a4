#pragma once
// What sdpa and mha share on the command line: the flags, loading the attention mask, the memory
// budget, and writing the outputs, the dumps and the trace.
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/attention.hpp"
#include "attntrace/positions.hpp"
#include "attntrace/tensor.hpp"
#include "attntrace/trace.hpp"

struct AttentionFlags {
    std::string query, key, value;
    std::optional<double> scale;
    bool causal = false;
    std::string attn_mask;
    std::string output;
    std::string attn_weights;
    std::string dtype = "f32";
    std::string trace = "shapes";
    std::string format = "text";
    std::size_t threads = 0;
    std::vector<std::string> dumps;  // STAGE=FILE
    std::string max_memory;          // "" = default budget
    // positions (positions.hpp)
    std::string rotary;              // "", "half", "interleaved"
    double rotary_theta = 10000;
    std::size_t rotary_dims = 0;     // 0: the whole head dim
    bool alibi = false;
    std::size_t window = 0;          // 0: none
    std::string causal_align = "upper-left";
};

// The positions the flags ask for (--rotary, --alibi, --window, --causal-align, --causal), for
// HEADS heads of HEAD_DIM. Throws UsageError for rotary dims that are odd or past the head dim.
template <class T>
attntrace::PositionStages<T> positions_from_flags(const AttentionFlags& flags, std::size_t heads, std::size_t head_dim);

// Adds the flags both commands take to CMD.
void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);

// One run of sdpa or mha from the flags: the recorder, the core's options, the budget check, and
// the outputs at the end. STAGE_NAMES are the command's stages (--dump checks against them).
template <class T>
class AttentionRun {
public:
    AttentionRun(const AttentionFlags& flags, const std::vector<std::string>& stage_names);

    // Every path the run reads or writes must be checked before any work: no output is an input,
    // no two outputs name one file, at most one goes to stdout. EXTRA_OUTPUTS: the command's own
    // outputs as (flag, path), e.g. {"--save-params", "p.safetensors"}.
    void check_outputs(const std::vector<std::string>& inputs,
                       const std::vector<std::pair<std::string, std::string>>& extra_outputs) const;
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

// The JSON trace's "inputs": [{"name", "file", "format", "dtype", "shape"}] for query, key, value.
template <class T>
nlohmann::json inputs_json(const attntrace::LoadedTensor<T>& query, const attntrace::LoadedTensor<T>& key,
                           const attntrace::LoadedTensor<T>& value);
