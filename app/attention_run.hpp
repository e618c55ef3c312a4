#pragma once
// One run of sdpa or mha from its flags: the output checks, the memory budget, the streamed
// outputs, and at the end the outputs, the dumps, the trace and the pictures.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attention_flags.hpp"
#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/trace.hpp"
#include "attntrace/io/atomic_write.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/tensor/tensor.hpp"
#include "progress.hpp"

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
    // --attn-weights written while the weights are computed, block by block (pwrite), when it is a
    // .npy file and nothing else needs them whole: no (..., Lq, Lk) buffer is allocated and zeroed,
    // and the budget does not count one. WEIGHTS_SHAPE: the weights the file holds. Call it
    // before check_budget; the file appears (atomically) in finish().
    void stream_weights(const attntrace::Shape& weights_shape);
    // -o written while mha's output projection computes it, block by block (pwrite), when it is a
    // .npy file: the write overlaps the projection of the other rows. The header is written with
    // the first block (the core knows the output's shape); the file appears in finish(), and is
    // written whole there instead when the core did not stream it (no output projection).
    void stream_output();

    attntrace::AttentionOptions options;
    attntrace::StageRecorder<T> recorder;

    // A progress bar on stderr (a terminal only) when PLANES x (LQ, LK) with head dim P is expected
    // to take over a second.
    void enable_progress(std::size_t planes, std::size_t lq, std::size_t lk, std::size_t p);

    // Writes the output, the weights, the dumps, then the trace (stdout, or stderr when a tensor
    // goes to stdout), then the pictures.
    void finish(attntrace::AttentionResult<T>& result, attntrace::TraceContext context) const;

private:
    // Writes --plot and --report from the run's weights and returns the --heatmap text, coloured
    // when STREAM (where it goes) is a colour terminal.
    std::string pictures(const attntrace::AttentionResult<T>& result, const attntrace::TraceContext& context,
                         FILE* stream) const;

    mutable std::unique_ptr<ProgressBar> progress_;  // erased (reset) before the trace prints
    std::unique_ptr<attntrace::StreamedFile> weights_file_;  // --attn-weights, when streamed
    std::unique_ptr<attntrace::StreamedFile> output_file_;   // -o, when streamed
    std::once_flag output_header_;                            // written by the first block's worker
    std::size_t output_data_at_ = 0;                          // the header's size
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

