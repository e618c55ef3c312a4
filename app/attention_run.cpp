#include "attention_run.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "attntrace/tensor/timeline.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/pictures/report.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "flag_parsing.hpp"

using namespace attntrace;

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

// "mha data/bloem/x.npy, layer encoder.0., batch 0": the command, the query file, the parameter
// prefix (the layer, when a checkpoint holds several) and the batch row shown.
std::string picture_title(const TraceContext& context, const std::string& query, std::size_t batch) {
    std::string title = context.command + " " + query;
    const auto prefix = context.options.value("params", nlohmann::json::object()).value("prefix", std::string());
    if (!prefix.empty()) title += ", layer " + prefix;
    return title + ", batch " + std::to_string(batch);
}

bool is_plane_stage(const std::string& s) { return s == "scores" || s == "masked_scores" || s == "weights"; }

std::optional<FileFormat> stdout_format(const std::string& path) {
    if (path == "-") return FileFormat::npy;
    return std::nullopt;
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
    options.softcap = flags.softcap;
    options.need_weights = !flags.attn_weights.empty();
    options.threads = flags.threads;
    attntrace::set_read_threads(flags.threads);  // the inputs are read with the same workers
    check_picture_flags(flags.pictures);
    // The pictures use weights pooled inside the core (never the (Lq, Lk) weights), and the head
    // detectors name the heads in the heatmap headers.
    options.row_stats = flags.trace != TraceDetail::none || flags.format == TraceFormat::json || flags.pictures.any();
    if (flags.pictures.any()) options.pooled_cells = kPictureCells;
}

namespace {

// COUNT elements of T at DATA into FILE as the elements from FIRST on of the .npy data that starts
// at byte AT: what a streamed tensor's sink does with each block.
template <class T>
void write_elements(StreamedFile& file, std::size_t at, std::size_t first, const void* data, std::size_t count) {
    file.write_at(at + first * sizeof(T), {static_cast<const char*>(data), count * sizeof(T)});
}

}  // namespace

template <class T>
void AttentionRun<T>::stream_weights(const Shape& weights_shape) {
    const std::string& path = flags_.attn_weights;
    if (path.empty() || format_from_extension(path) != FileFormat::npy || options.average_heads) return;
    weights_file_ = attntrace::StreamedFile::open(path);  // null for stdout, /dev/null, a FIFO
    if (!weights_file_) return;
    const std::string header = attntrace::npy_header<T>(weights_shape);
    weights_file_->write_at(0, header);
    options.need_weights = false;
    options.weights_sink = [file = weights_file_.get(), at = header.size()](std::size_t first, const void* data,
                                                                            std::size_t count) {
        write_elements<T>(*file, at, first, data, count);
    };
}

template <class T>
void AttentionRun<T>::stream_output() {
    const std::string& path = flags_.output;
    if (path.empty() || format_from_extension(path) != FileFormat::npy) return;
    output_file_ = attntrace::StreamedFile::open(path);  // null for stdout, /dev/null, a FIFO
    if (!output_file_) return;
    options.output_sink = [this](const attntrace::Shape& shape, std::size_t first, const void* data, std::size_t count) {
        std::call_once(output_header_, [&] {
            const std::string header = attntrace::npy_header<T>(shape);
            output_file_->write_at(0, header);
            output_data_at_ = header.size();
        });
        write_elements<T>(*output_file_, output_data_at_, first, data, count);
    };
}

template <class T>
void AttentionRun<T>::enable_progress(std::size_t planes, std::size_t lq, std::size_t lk, std::size_t p) {
    const std::size_t threads = flags_.threads ? flags_.threads : available_cores();
    if (!want_progress(expected_seconds(planes, lq, lk, p, threads))) return;
    progress_ = std::make_unique<ProgressBar>(true);
    options.progress = [bar = progress_.get()](std::size_t done, std::size_t total) { bar->update(done, total); };
}

template <class T>
void AttentionRun<T>::check_outputs(const std::vector<std::string>& inputs,
                                    const std::vector<std::pair<std::string, std::string>>& extra_outputs) const {
    std::vector<std::pair<std::string, std::string>> outputs{{"-o", flags_.output},
                                                             {"--attn-weights", flags_.attn_weights},
                                                             {"--plot", flags_.pictures.plot},
                                                             {"--report", flags_.pictures.report}};
    for (const auto& [stage, file] : dumps_) outputs.emplace_back("--dump " + stage, file);
    outputs.insert(outputs.end(), extra_outputs.begin(), extra_outputs.end());
    std::erase_if(outputs, [](const auto& output) { return output.second.empty(); });
    std::vector<std::string> read = inputs;  // the token files are read too
    read.insert(read.end(), {flags_.pictures.labels, flags_.pictures.key_labels});
    std::size_t to_stdout = 0;
    for (const auto& [flag, out] : outputs) {
        if (out == "-") ++to_stdout;
        ensure_not_an_input(out, read);
    }
    if (to_stdout > 1) throw UsageError("-o: only one output can go to stdout (-)");
    for (std::size_t i = 0; i < outputs.size(); ++i)
        for (std::size_t j = i + 1; j < outputs.size(); ++j)
            if (same_output_file(outputs[i].second, outputs[j].second))
                throw UsageError(outputs[j].first + ": " + outputs[j].second + " is the file of " + outputs[i].first +
                                 " (" + outputs[i].second + "); two tensors cannot go to one file");
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
    try {
        check_memory_budget(planes, elements, sizeof(T), budget,
                            "(" + std::string(kept ? which : "weights") + ") of shape " + shape_string(plane_shape) +
                                " " + (sizeof(T) == 4 ? "float32" : "float64"),
                            avoid);
    } catch (const InputError& e) {
        throw InputError(with_flag_name(e.what(), {{"memory budget", "--max-memory"}}));
    }
}

template <class T>
void AttentionRun<T>::finish(AttentionResult<T>& result, TraceContext context) const {
    progress_.reset();
    timeline_mark("finish: committing the outputs");
    if (output_file_ && result.output_streamed)
        output_file_->commit();
    else if (!flags_.output.empty())
        save_tensor(flags_.output, result.output, stdout_format(flags_.output));
    if (weights_file_)
        weights_file_->commit();
    else if (!flags_.attn_weights.empty() && result.weights)
        save_tensor(flags_.attn_weights, *result.weights, stdout_format(flags_.attn_weights));
    timeline_mark("finish: outputs committed");
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
    // The trace goes to stdout unless a tensor does; then to stderr, so pipelines stay clean.
    bool tensor_on_stdout = flags_.output == "-" || flags_.attn_weights == "-";
    for (const auto& [stage, file] : dumps_) tensor_on_stdout |= file == "-";
    if (flags_.format == TraceFormat::json) {
        // replace: a file name that is not UTF-8 must not make dump() throw (as info --json)
        std::cout << trace_json(context, recorder.stages(), result.row_stats, result.empty_rows,
                                flags_.trace == TraceDetail::values)
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << '\n'
                  << std::flush;
        std::cerr << pictures(result, context, stderr) << std::flush;  // stdout holds the JSON
        return;
    }
    FILE* stream = tensor_on_stdout ? stderr : stdout;
    std::string text;
    if (flags_.trace != TraceDetail::none) {
        TextStyle style;
        style.values = flags_.trace == TraceDetail::values;
        style.unicode = style.color = terminal_style(stream);
        text = render_text_trace(context, recorder.stages(), result.row_stats, style);
    }
    text += pictures(result, context, stream);
    (tensor_on_stdout ? std::cerr : std::cout) << text << std::flush;
}

template <class T>
std::string AttentionRun<T>::pictures(const AttentionResult<T>& result, const TraceContext& context,
                                      FILE* stream) const {
    const PictureFlags& f = flags_.pictures;
    if (!f.any() || !result.pooled) return "";
    const PooledWeights& pooled = *result.pooled;
    const auto labels = load_axis_labels(f, pooled.lq, pooled.lk);
    std::vector<std::string> roles;
    if (result.row_stats)
        for (const auto& h : summarize_heads(*result.row_stats, 0)) roles.push_back(h.role);
    if (!f.report.empty()) {
        TextStyle plain;  // the report shows the text trace without terminal colour
        plain.values = flags_.trace == TraceDetail::values;
        const std::string trace = render_text_trace(context, recorder.stages(), result.row_stats, plain);
        ReportData data{context.header, trace, nlohmann::json::array(), labels.query, labels.key, f.batch,
                        colour_scale(f)};
        data.head_stats = trace_json(context, std::vector<StageRecord<T>>{}, result.row_stats, result.empty_rows,
                                     false)["head_stats"];
        write_file_atomically(f.report, naming_flags(kPictureFlagNames, [&] { return html_report(pooled, data); }));
    }
    return draw_pictures(f, pooled, picture_title(context, flags_.query, f.batch), labels, stream, roles);
}

template class AttentionRun<float>;
template class AttentionRun<double>;
