#pragma once
// What sdpa and mha share on the command line: the flags, loading the masks, running the trace
// and writing the outputs.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/attention.hpp"
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
    std::size_t threads = 0;
    std::vector<std::string> dumps;  // STAGE=FILE (trace issue)
};

// Adds the flags both commands take to CMD.
void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);

// The attention mask from FLAGS (bool when the file's dtype is not a float).
template <class T>
void load_attn_mask(const AttentionFlags& flags, attntrace::Masks<T>& masks);

// The recorder the flags ask for (which stages keep values).
template <class T>
attntrace::StageRecorder<T> make_recorder(const AttentionFlags& flags);

// Writes the output, the weights and the trace. INPUTS are every file the run read (never written
// over). HEADER is the trace's first line.
template <class T>
void finish_attention(const AttentionFlags& flags, const std::vector<std::string>& inputs,
                      attntrace::AttentionResult<T>& result, const attntrace::StageRecorder<T>& recorder,
                      const std::string& header);

// Refuses before any work when an output would overwrite an input.
void check_outputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs);
