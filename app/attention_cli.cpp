#include "attention_cli.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "attntrace/io/atomic_write.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "flag_parsing.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/memory.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/report.hpp"

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

void add_attention_input_flags(CLI::App& cmd, AttentionFlags& f) {
    cmd.add_option("--scale", f.scale, "score scale (default 1/sqrt(head dim))");
    cmd.add_flag("--causal", f.causal, "query i sees keys <= i (top-left aligned, as PyTorch's is_causal)");
    cmd.add_option("--attn-mask", f.attn_mask,
                   "mask file: bool (true = not allowed) or float (added to the scores); (Lq, Lk) or broadcastable")
        ->check(file_name());
}

void add_attention_flags(CLI::App& cmd, AttentionFlags& f) {
    add_attention_input_flags(cmd, f);
    cmd.add_option("-o,--output", f.output, "write the output tensor: .npy, .json, or - (stdout, npy)")
        ->check(file_name());
    cmd.add_option("--attn-weights", f.attn_weights, "write the softmax weights: .npy, .json or - (stdout, npy)")
        ->check(file_name());
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
    add_picture_flags(cmd, f.pictures, true);
    cmd.add_option("--rotary", f.rotary, "rotary position embedding on q and k: half (Llama, NeoX) or interleaved (GPT-J)")
        ->check(CLI::IsMember({"half", "interleaved"}));
    cmd.add_option("--rotary-theta", f.rotary_theta, "rotary base theta")->capture_default_str();
    cmd.add_option("--rotary-dims", f.rotary_dims, "rotate the first R dims of each head (default: all)")
        ->check(positive_integer());
    cmd.add_flag("--alibi", f.alibi, "add BLOOM's ALiBi bias slope_h * j to the scores");
    cmd.add_option("--window", f.window, "sliding window W: key j visible to query i when i - W < j <= i")
        ->check(positive_integer());
    cmd.add_option("--causal-align", f.causal_align,
                   "causal diagonal: upper-left (PyTorch's default) or lower-right (queries end the keys, KV cache)")
        ->check(CLI::IsMember({"upper-left", "lower-right"}))
        ->capture_default_str();
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
PositionStages<T> positions_from_flags(const AttentionFlags& f, std::size_t heads, std::size_t head_dim) {
    PositionStages<T> pos;
    if (!f.rotary.empty()) {
        const std::size_t dims = f.rotary_dims ? f.rotary_dims : head_dim;
        if (dims % 2 != 0 || dims > head_dim)
            throw UsageError("--rotary-dims: " + std::to_string(dims) + " must be even and at most the head dim " +
                             std::to_string(head_dim));
        if (!(f.rotary_theta > 0)) throw UsageError("--rotary-theta: must be positive");
        pos.rotary = Rotary{f.rotary == "half" ? RotaryStyle::half : RotaryStyle::interleaved, dims,
                            rope_inv_freq(dims, f.rotary_theta, RopeScaling{})};
    } else if (f.rotary_dims) {
        throw UsageError("--rotary-dims: needs --rotary half|interleaved");
    }
    if (f.alibi) pos.alibi = alibi_slopes(heads);
    pos.visibility.causal = f.causal;
    pos.visibility.lower_right = f.causal_align == "lower-right";
    if (f.window) pos.visibility.window = f.window;
    return pos;
}

template PositionStages<float> positions_from_flags<float>(const AttentionFlags&, std::size_t, std::size_t);
template PositionStages<double> positions_from_flags<double>(const AttentionFlags&, std::size_t, std::size_t);

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
    if (output_file_ && result.output_streamed)
        output_file_->commit();
    else if (!flags_.output.empty())
        save_tensor(flags_.output, result.output, stdout_format(flags_.output));
    if (weights_file_)
        weights_file_->commit();
    else if (!flags_.attn_weights.empty() && result.weights)
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
        ReportData data{context.header, trace, nlohmann::json::array(), labels.query, labels.key, f.batch};
        data.head_stats = trace_json(context, std::vector<StageRecord<T>>{}, result.row_stats, result.empty_rows,
                                     false)["head_stats"];
        write_file_atomically(f.report, naming_flags(kPictureFlagNames, [&] { return html_report(pooled, data); }));
    }
    return draw_pictures(f, pooled, picture_title(context, flags_.query, f.batch), labels, stream, roles);
}

template class AttentionRun<float>;
template class AttentionRun<double>;

void add_mha_model_flags(CLI::App& cmd, MhaFlags& f) {
    required_file(cmd, "-q,--query", f.common.query, "QUERY (B, Lq, Eq) or (Lq, Eq)");
    cmd.add_option("-k,--key", f.common.key, "KEY (B, Lk, Ek); default QUERY")->check(file_name());
    cmd.add_option("-v,--value", f.common.value, "VALUE (B, Lk, Ev); default KEY")->check(file_name());
    cmd.add_option("--heads", f.heads, "number of heads H")->check(positive_integer());
    cmd.add_option("--kv-heads", f.kv_heads, "grouped-query attention: G key/value heads (H % G == 0)")
        ->check(positive_integer());
    cmd.add_option("--params", f.params, "parameters: .safetensors, .json, or a directory of NAME.npy")
        ->check(file_name());
    cmd.add_option("--prefix", f.prefix, "use only parameter names starting with this prefix (stripped)");
    cmd.add_option("--seed", f.seed, "seed of the random init when there is no --params")->capture_default_str();
    cmd.add_flag("--bias,!--no-bias", f.bias, "random init: with biases (default) or without");
    cmd.add_option("--head-dim", f.head_dim, "random init: P (default E/H)")->check(positive_integer());
    cmd.add_option("--value-head-dim", f.value_head_dim, "random init: Pv (default P)")->check(positive_integer());
    cmd.add_option("--out-dim", f.out_dim, "random init: PO (default E)")->check(positive_integer());
    cmd.add_flag("--no-out-proj", f.no_out_proj, "concatenate the heads with no output projection");
    cmd.add_option("--key-padding-mask", f.key_padding_mask, "(B, Lk) bool or 0/1: true ignores that key")
        ->check(file_name());
    cmd.add_option("--valid-lens", f.valid_lens, "d2l valid lengths: 3,2 or a (B,) / (B, Lq) file")->check(file_name());
}

namespace {

template <class T>
attntrace::MhaParams<T> resolve_params(const MhaFlags& f, const attntrace::MhaDims& dims) {
    if (!f.params.empty() && f.add_bias_kv)
        throw attntrace::UsageError("--add-bias-kv: only for the random init; with --params, bias_k and bias_v come "
                                    "from the file");
    if (!f.params.empty()) return attntrace::load_mha_params<T>(f.params, f.prefix, dims);
    const std::size_t h = dims.heads;
    attntrace::HeadSizes sizes;
    if (f.head_dim == 0 && dims.query_dim % h != 0)
        throw attntrace::ShapeError(f.common.query + ": embed dim " + std::to_string(dims.query_dim) +
                                    " is not divisible by --heads " + std::to_string(h) +
                                    " (give --head-dim, or a number of heads that divides it)");
    sizes.head_dim = f.head_dim ? f.head_dim : dims.query_dim / h;
    sizes.value_head_dim = f.value_head_dim ? f.value_head_dim : sizes.head_dim;
    sizes.out_dim = f.out_dim ? f.out_dim : dims.query_dim;
    attntrace::MhaParams<T> params = attntrace::random_mha_params<T>(dims, sizes, f.bias, parse_seed(f.seed));
    if (f.add_bias_kv) attntrace::add_random_bias_kv(params, parse_seed(f.seed));
    return params;
}

// --key-padding-mask and --valid-lens ("3,2" or a file).
template <class T>
void load_mha_masks(const MhaFlags& f, attntrace::Masks<T>& masks) {
    if (!f.key_padding_mask.empty()) {
        masks.key_padding_mask = attntrace::load_tensor<T>(f.key_padding_mask).array;
        masks.key_padding_mask_name = f.key_padding_mask;
    }
    const auto valid_list = f.valid_lens.empty() ? std::nullopt : parse_uint_list(f.valid_lens);
    if (valid_list) {
        masks.valid_lens = attntrace::Array<T>::from_shape({valid_list->size()});
        std::copy(valid_list->begin(), valid_list->end(), masks.valid_lens->begin());
        masks.valid_lens_name = f.valid_lens;  // "3,2"
    } else if (!f.valid_lens.empty()) {
        masks.valid_lens = attntrace::load_tensor<T>(f.valid_lens).array;
        masks.valid_lens_name = f.valid_lens;
    }
}

}  // namespace

template <class T>
MhaInputs<T> load_mha_inputs(const MhaFlags& f, const AttentionRun<T>& run, std::size_t heads,
                             std::size_t kv_heads, bool own_params) {
    const auto& c = f.common;
    const std::string key_path = c.key.empty() ? c.query : c.key;
    const std::string value_path = c.value.empty() ? key_path : c.value;
    MhaInputs<T> in{attntrace::load_tensor<T>(c.query), {}, {}, value_path == key_path, {}, {}, {}};
    if (key_path != c.query) in.key_file = attntrace::load_tensor<T>(key_path);
    if (value_path != key_path && value_path != c.query) in.value_file = attntrace::load_tensor<T>(value_path);
    run.load_attn_mask(in.masks);
    load_mha_masks(f, in.masks);

    const auto dim = [](const attntrace::Array<T>& a) { return a.dimension() ? a.shape().back() : 0; };
    if (heads == 0) heads = f.heads, kv_heads = f.kv_heads ? f.kv_heads : f.heads;
    in.dims = {heads, kv_heads, dim(in.query.array), dim(in.key().array),
               dim(in.value().array), !f.no_out_proj};
    if (in.dims.heads % in.dims.kv_heads != 0)
        throw attntrace::UsageError("--kv-heads: " + std::to_string(in.dims.heads) + " query heads cannot share " +
                                    std::to_string(in.dims.kv_heads) + " kv heads (" + std::to_string(in.dims.heads) +
                                    " % " + std::to_string(in.dims.kv_heads) + " != 0)");
    if (own_params) in.params = resolve_params<T>(f, in.dims);
    return in;
}

template MhaInputs<float> load_mha_inputs(const MhaFlags&, const AttentionRun<float>&, std::size_t, std::size_t,
                                          bool);
template MhaInputs<double> load_mha_inputs(const MhaFlags&, const AttentionRun<double>&, std::size_t, std::size_t,
                                           bool);
