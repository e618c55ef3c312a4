#pragma once
// What sdpa and mha share on the command line: the flags, loading the attention mask, the memory
// budget, and writing the outputs, the dumps and the trace.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/io/atomic_write.hpp"
#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/tensor.hpp"
#include "attntrace/attention/trace.hpp"
#include "flag_parsing.hpp"
#include "picture_cli.hpp"
#include "progress.hpp"

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
    PictureFlags pictures;           // --heatmap, --plot, --report and their labels
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

// The position parameters the core checks (position_stages.cpp) and the flags that set them.
inline const FlagNames kPositionFlagNames = {{"rotary dims", "--rotary-dims"}, {"ALiBi", "--alibi"}};

// Adds the flags both commands take to CMD.
void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);
// The part of them that says what to compute (--scale, --causal, --attn-mask), for check.
void add_attention_input_flags(CLI::App& cmd, AttentionFlags& flags);

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

// mha's flags: the common ones, and the model and masks only mha has.
struct MhaFlags {
    AttentionFlags common;
    std::size_t heads = 0;
    std::size_t kv_heads = 0;
    std::string params;
    std::string prefix;
    std::string seed = "0";  // parsed by parse_seed: CLI11 would wrap -1
    bool bias = true;
    std::size_t head_dim = 0, value_head_dim = 0, out_dim = 0;
    std::string save_params;
    bool no_out_proj = false;
    std::string key_padding_mask;
    std::string valid_lens;
    bool average_heads = false;
    std::string model_dir;             // mha --model DIR: a Hugging Face checkpoint folder
    std::optional<std::size_t> layer;  // mha --layer N
    bool normed = false;               // mha --normed: the input is already normed
    bool add_bias_kv = false;          // mha --add-bias-kv: random init draws bias_k / bias_v
    bool add_zero_attn = false;        // mha --add-zero-attn
};

// What the library says of the parameters' options (param_names.cpp, params_check.cpp) in the
// words of mha's flags.
inline const FlagNames kParamFlagPhrases = {{"the prefix '", "--prefix '"},
                                            {"give the prefix ", "pass --prefix "},
                                            {"turn the output projection off", "pass --no-out-proj"}};

// Adds -q/-k/-v and the model's flags (--heads ... --valid-lens) to CMD; mha and check share them.
// --heads is left optional (check --sdpa has none): mha marks it required.
void add_mha_model_flags(CLI::App& cmd, MhaFlags& flags);

// What mha runs on, from the flags: one load per distinct path (-q x.npy alone is self-attention on
// one tensor), the masks, the dims checked, and the parameters (loaded, or the seeded init).
template <class T>
struct MhaInputs {
    attntrace::LoadedTensor<T> query;                      // (B, Lq, Eq) or (Lq, Eq)
    std::optional<attntrace::LoadedTensor<T>> key_file;    // (B, Lk, Ek) when -k names another file
    std::optional<attntrace::LoadedTensor<T>> value_file;  // (B, Lk, Ev) when -v names a third file
    bool value_is_key = true;                              // -v is -k's file (or both default)
    attntrace::Masks<T> masks;
    attntrace::MhaDims dims;
    attntrace::MhaParams<T> params;

    const attntrace::LoadedTensor<T>& key() const { return key_file ? *key_file : query; }
    const attntrace::LoadedTensor<T>& value() const {
        return value_file ? *value_file : (value_is_key ? key() : query);
    }
};

// RUN supplies the attention mask (--attn-mask, --causal). HEADS and KV_HEADS are the checkpoint's
// with --model (0: the flags'); OWN_PARAMS false leaves `params` empty (the caller has a checkpoint's).
template <class T>
MhaInputs<T> load_mha_inputs(const MhaFlags& flags, const AttentionRun<T>& run, std::size_t heads = 0,
                             std::size_t kv_heads = 0, bool own_params = true);
