#include "attention_cli.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "attntrace/errors.hpp"
#include "flag_parsing.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/memory.hpp"
#include "attntrace/tensor_io.hpp"

using namespace attntrace;

namespace {

// A flag whose words name the values of enum MODE (its current value is the default). The help and
// the error for another word read as CLI::IsMember's: "--dtype: f16 not in {f32,f64}".
template <class E>
void add_mode_option(CLI::App& cmd, const std::string& name, E& mode, const std::vector<std::pair<std::string, E>>& words,
                     const std::string& help) {
    std::string list, default_word;
    for (const auto& [word, value] : words) {
        list += (list.empty() ? "" : ",") + word;
        if (value == mode) default_word = word;
    }
    list = "{" + list + "}";
    const CLI::Validator to_value(
        [words, list](std::string& text) -> std::string {
            for (const auto& [word, value] : words)
                if (text == word) {
                    text = std::to_string(static_cast<int>(value));
                    return {};
                }
            return text + " not in " + list;
        },
        list);
    cmd.add_option(name, mode, help)->type_name("TEXT")->transform(to_value)->default_str(default_word);
}

}  // namespace

void add_attention_flags(CLI::App& cmd, AttentionFlags& f) {
    cmd.add_option("--scale", f.scale, "score scale (default 1/sqrt(head dim))");
    cmd.add_flag("--causal", f.causal, "query i sees keys <= i (top-left aligned, as PyTorch's is_causal)");
    cmd.add_option("--attn-mask", f.attn_mask,
                   "mask file: bool (true = not allowed) or float (added to the scores); (Lq, Lk) or broadcastable");
    cmd.add_option("-o,--output", f.output, "write the output tensor: .npy, .json, or - (stdout, npy)");
    cmd.add_option("--attn-weights", f.attn_weights, "write the softmax weights: .npy, .json or - (stdout, npy)");
    add_mode_option(cmd, "--dtype", f.dtype, {{"f32", Precision::f32}, {"f64", Precision::f64}},
                    "compute and output precision");
    add_mode_option(cmd, "--trace", f.trace,
                    {{"none", TraceDetail::none}, {"shapes", TraceDetail::shapes}, {"values", TraceDetail::values}},
                    "what the trace shows: none, shapes (with head statistics), values");
    add_mode_option(cmd, "--format", f.format, {{"text", TraceFormat::text}, {"json", TraceFormat::json}},
                    "the trace as text, or as one JSON document on stdout");
    cmd.add_option("--dump", f.dumps, "write a stage's tensor: STAGE=FILE (.npy, .json); repeatable");
    cmd.add_option("--threads", f.threads, "number of threads (default: all cores)")
        ->check(positive_integer(1024));
    cmd.add_option("--max-memory", f.max_memory,
                   "refuse runs whose (Lq, Lk) buffers need more (e.g. 4G; default: half the RAM)");
}

std::string_view precision_name(Precision p) { return p == Precision::f64 ? "f64" : "f32"; }

template <class T>
nlohmann::json shared_trace_options(const AttentionFlags& f, const Masks<T>& masks, const AttentionResult<T>& result) {
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    return {{"scale", result.scale},
            {"masks",
             {{"causal", f.causal},
              {"attn_mask", or_null(f.attn_mask)},
              {"attn_mask_kind", f.attn_mask.empty() ? nlohmann::json() : nlohmann::json(masks.attn_mask_is_bool ? "bool" : "float")},
              {"empty_rows", result.empty_rows}}},
            {"dtype", precision_name(f.dtype)},
            {"threads", f.threads ? nlohmann::json(f.threads) : nlohmann::json()}};
}

template nlohmann::json shared_trace_options(const AttentionFlags&, const Masks<float>&, const AttentionResult<float>&);
template nlohmann::json shared_trace_options(const AttentionFlags&, const Masks<double>&, const AttentionResult<double>&);

template <class T>
nlohmann::json inputs_json(const LoadedTensor<T>& query, const LoadedTensor<T>& key, const LoadedTensor<T>& value) {
    auto one = [](const char* name, const LoadedTensor<T>& t) {
        return nlohmann::json{{"name", name},
                              {"file", t.source.path},
                              {"format", format_name(t.source.format)},
                              {"dtype", dtype_name(t.source.dtype)},
                              {"shape", shape_of(t.array)}};
    };
    return {one("query", query), one("key", key), one("value", value)};
}

template nlohmann::json inputs_json(const LoadedTensor<float>&, const LoadedTensor<float>&, const LoadedTensor<float>&);
template nlohmann::json inputs_json(const LoadedTensor<double>&, const LoadedTensor<double>&,
                                    const LoadedTensor<double>&);

namespace {

std::vector<std::pair<std::string, std::string>> parse_dumps(const std::vector<std::string>& dumps,
                                                             const std::vector<std::string>& stages) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& d : dumps) {
        const auto eq = d.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == d.size())
            throw UsageError("--dump: '" + d + "' is not STAGE=FILE, e.g. --dump weights=w.npy");
        const std::string stage = d.substr(0, eq);
        if (std::find(stages.begin(), stages.end(), stage) == stages.end()) {
            std::string list;
            for (const auto& s : stages) list += (list.empty() ? "" : ", ") + s;
            throw UsageError("--dump: unknown stage '" + stage + "'; the stages are " + list);
        }
        out.emplace_back(stage, d.substr(eq + 1));
    }
    return out;
}

bool is_plane_stage(const std::string& s) { return s == "scores" || s == "masked_scores" || s == "weights"; }

std::optional<FileFormat> stdout_format(const std::string& path) {
    if (path == "-") return FileFormat::npy;
    return std::nullopt;
}

// Colour and Unicode on a terminal only, and never when NO_COLOR is set to anything non-empty
// (no-color.org).
bool terminal_style(FILE* stream) {
    const char* no_color = std::getenv("NO_COLOR");
    return isatty(fileno(stream)) && (no_color == nullptr || *no_color == '\0');
}

}  // namespace

template <class T>
AttentionRun<T>::AttentionRun(const AttentionFlags& flags, const std::vector<std::string>& stage_names)
    : recorder([&] {
          std::set<std::string> keep;
          for (const auto& [stage, file] : parse_dumps(flags.dumps, stage_names)) keep.insert(stage);
          return StageRecorder<T>(keep, flags.trace == TraceDetail::values || flags.format == TraceFormat::json);
      }()),
      flags_(flags),
      dumps_(parse_dumps(flags.dumps, stage_names)) {
    if (!flags.max_memory.empty() && !parse_byte_size(flags.max_memory))
        throw UsageError("--max-memory: '" + flags.max_memory + "' is not a size like 600M or 4G");
    options.scale = flags.scale;
    options.need_weights = !flags.attn_weights.empty();
    options.threads = flags.threads;
    options.row_stats = flags.trace != TraceDetail::none || flags.format == TraceFormat::json;
}

template <class T>
void AttentionRun<T>::check_outputs(const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& extra_outputs) const {
    std::vector<std::string> outputs{flags_.output, flags_.attn_weights};
    for (const auto& [stage, file] : dumps_) outputs.push_back(file);
    outputs.insert(outputs.end(), extra_outputs.begin(), extra_outputs.end());
    std::size_t to_stdout = 0;
    for (const auto& out : outputs) {
        if (out.empty()) continue;
        if (out == "-") ++to_stdout;
        ensure_not_an_input(out, inputs);
    }
    if (to_stdout > 1) throw UsageError("-o: only one output can go to stdout (-)");
    if (to_stdout == 1 && flags_.format == TraceFormat::json)
        throw UsageError("--format: the JSON trace takes stdout; write the tensors to files");
}

template <class T>
void AttentionRun<T>::load_attn_mask(Masks<T>& masks) const {
    masks.causal = flags_.causal;
    if (flags_.attn_mask.empty()) return;
    auto mask = load_tensor<T>(flags_.attn_mask);
    masks.attn_mask_is_bool = !is_float(mask.source.dtype);
    masks.attn_mask = std::move(mask.array);
    masks.attn_mask_name = flags_.attn_mask;
}

template <class T>
void AttentionRun<T>::check_budget(const Shape& plane_shape) const {
    std::uint64_t kept = 0;
    std::string which;
    for (const auto& stage : {"scores", "masked_scores", "weights"})
        if (recorder.wants_values(stage)) {
            ++kept;
            which += std::string(which.empty() ? "" : ", ") + stage;
        }
    // The weights buffer the core computes in, plus the recorder's copy of each kept stage.
    const std::uint64_t planes = (options.need_weights || kept ? 1 : 0) + kept;
    std::uint64_t elements = 1;
    for (auto d : plane_shape) elements *= d;
    std::string avoid = "drop";
    if (options.need_weights) avoid += " --attn-weights";
    if (flags_.trace == TraceDetail::values) avoid += " --trace values";
    if (flags_.format == TraceFormat::json) avoid += " --format json";
    for (const auto& [stage, file] : dumps_)
        if (is_plane_stage(stage)) avoid += " --dump " + stage;
    avoid += " (without them the tiled path needs memory linear in the length), or raise --max-memory";
    const std::uint64_t budget = flags_.max_memory.empty() ? default_memory_budget() : *parse_byte_size(flags_.max_memory);
    check_memory_budget(planes, elements, sizeof(T), budget,
                        "(" + std::string(kept ? which : "weights") + ") of shape " + shape_string(plane_shape) + " " +
                            (sizeof(T) == 4 ? "float32" : "float64"),
                        avoid);
}

template <class T>
void AttentionRun<T>::finish(AttentionResult<T>& result, TraceContext context) const {
    if (!flags_.output.empty()) save_tensor(flags_.output, result.output, stdout_format(flags_.output));
    if (!flags_.attn_weights.empty() && result.weights)
        save_tensor(flags_.attn_weights, *result.weights, stdout_format(flags_.attn_weights));
    nlohmann::json dumped = nlohmann::json::array();  // in command-line order
    for (const auto& [stage, file] : dumps_) {
        const auto* rec = recorder.find(stage);
        if (!rec || !rec->values) throw UsageError("--dump: this run has no stage '" + stage + "'");
        save_tensor(file, *rec->values, stdout_format(file));
        dumped.push_back({{"stage", stage}, {"file", file}});
    }
    auto path_or_null = [](const std::string& p) { return p.empty() ? nlohmann::json() : nlohmann::json(p); };
    context.outputs = {{"output", path_or_null(flags_.output)},
                       {"attn_weights", path_or_null(flags_.attn_weights)},
                       {"dumps", dumped}};
    if (flags_.format == TraceFormat::json) {
        std::cout << trace_json(context, recorder.stages(), result.row_stats, result.empty_rows,
                                flags_.trace == TraceDetail::values)
                         .dump()
                  << '\n'
                  << std::flush;
        return;
    }
    if (flags_.trace == TraceDetail::none) return;
    // The trace goes to stdout unless a tensor does; then to stderr, so pipelines stay clean.
    bool tensor_on_stdout = flags_.output == "-" || flags_.attn_weights == "-";
    for (const auto& [stage, file] : dumps_) tensor_on_stdout |= file == "-";
    FILE* stream = tensor_on_stdout ? stderr : stdout;
    TextStyle style;
    style.values = flags_.trace == TraceDetail::values;
    style.unicode = style.color = terminal_style(stream);
    const std::string text = render_text_trace(context, recorder.stages(), result.row_stats, style);
    (tensor_on_stdout ? std::cerr : std::cout) << text << std::flush;
}

template class AttentionRun<float>;
template class AttentionRun<double>;
