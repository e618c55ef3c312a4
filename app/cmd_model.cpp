// attntrace model MODEL (--text S | --text-file F | --ids 1,2,3 | --ids F.npy | --each-line F):
// a Hugging Face checkpoint's whole forward pass, every head of every layer traced (docs/model.md).
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"
#include "commands.hpp"
#include "model_pictures.hpp"
#include "model_run.hpp"
#include "picture_flags.hpp"

using namespace attntrace;
namespace fs = std::filesystem;

namespace {

// Exactly one input; the flags that cannot go together; the pictures' flags (model_pictures.hpp).
void check_flags(const ModelFlags& f) {
    check_model_picture_flags(f);
    const int inputs = int(f.text.has_value()) + int(!f.text_file.empty()) + int(!f.ids.empty()) + int(!f.each_line.empty());
    if (inputs != 1) throw UsageError("model: give exactly one of --text, --text-file, --ids and --each-line");
    if (!f.each_line.empty())
        for (const auto& [flag, path] : {std::pair{"--hidden-states", f.hidden_states}, {"--attentions", f.attentions},
                                         {"--logits", f.logits}, {"--experts", f.experts},
                                         {"--expert-weights", f.expert_weights}})
            if (!path.empty()) throw UsageError(std::string(flag) + ": not with --each-line (one document per line, no tensors)");
    if (!f.max_memory.empty() && !parse_byte_size(f.max_memory))
        throw UsageError("--max-memory: '" + f.max_memory + "' is not a size like 600M or 4G");
    parse_seed(f.seed);
}

// No output replaces an input (the checkpoint's files, the text or ids file), no two outputs are
// one file, at most one goes to stdout, and not with the JSON trace.
void check_outputs(const ModelFlags& f) {
    std::vector<std::string> inputs{f.text_file, f.each_line, f.ids, f.model};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(f.model, ec)) inputs.push_back(entry.path().string());
    const std::vector<std::pair<std::string, std::string>> outputs{
        {"--hidden-states", f.hidden_states}, {"--attentions", f.attentions}, {"--logits", f.logits},
        {"--experts", f.experts}, {"--expert-weights", f.expert_weights},
        {"--plot", f.plot}, {"--report", f.report}, {"--rollout", f.rollout}};
    std::size_t to_stdout = 0;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const auto& [flag, path] = outputs[i];
        if (path.empty()) continue;
        to_stdout += path == "-";
        ensure_not_an_input(path, inputs);
        for (std::size_t j = 0; j < i; ++j)
            if (!outputs[j].second.empty() && same_output_file(path, outputs[j].second))
                throw UsageError(flag + ": " + path + " is the file of " + outputs[j].first);
    }
    if (to_stdout > 1)
        throw UsageError("--hidden-states/--attentions/--logits/--experts/--expert-weights: only one can go to stdout (-)");
    if (to_stdout == 1 && f.format == TraceFormat::json)
        throw UsageError("--format: the JSON trace takes stdout; write the tensors to files");
}

// --each-line: one JSON document per non-empty line on stdout; a line that fails gets
// {"line": n, "error": ...} and the run goes on, exiting 3 at the end.
template <class T>
void run_each_line(const ModelSession& s) {
    const std::string all = read_all(s.flags.each_line);
    const std::string name = s.flags.each_line == "-" ? "stdin" : s.flags.each_line;
    std::size_t failed = 0, number = 0;
    for (std::size_t at = 0; at < all.size();) {
        const std::size_t end = std::min(all.find('\n', at), all.size());
        std::string_view line(all.data() + at, end - at);
        at = end + 1, ++number;
        if (line.ends_with('\r')) line.remove_suffix(1);
        if (line.empty()) continue;
        nlohmann::json doc;
        try {
            const std::string source = "line " + std::to_string(number) + " of " + name;
            doc = model_trace_json(run_sequence<T>(s, sequence_from_text(*s.tokenizer, line, !s.flags.no_special, source), false));
        } catch (const InputError& e) {
            doc = {{"line", number}, {"error", e.what()}};
            ++failed;
        }
        std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
    }
    if (failed) throw InputError(name + ": " + std::to_string(failed) + " of the lines failed (see their documents)");
}

template <class T>
void run_model(const ModelFlags& f) {
    check_flags(f);
    check_outputs(f);
    set_read_threads(f.threads);
    const bool text = f.text || !f.text_file.empty() || !f.each_line.empty();
    ModelSession s = open_session(f, text);
    if (!f.each_line.empty()) return run_each_line<T>(s);
    Sequence seq;
    if (!f.ids.empty()) {
        seq = sequence_from_ids(read_ids(f.ids), s.tokenizer ? &*s.tokenizer : nullptr, "--ids");
    } else {
        const std::string source = f.text ? "--text" : f.text_file == "-" ? "stdin" : f.text_file;
        seq = sequence_from_text(*s.tokenizer, f.text ? *f.text : read_all(f.text_file), !f.no_special, source);
    }
    std::optional<PictureCollector<T>> pictures;
    ExtraObserver<T> extra;
    if (wants_model_pictures(f)) {
        const std::size_t l = seq.ids.size();
        extra = {&pictures.emplace(s, l), picture_cells(f, l), picture_bytes(s, l, sizeof(T))};
    }
    ModelTrace trace = run_sequence<T>(s, seq, true, extra);
    if (finish_tokenizer(s) && s.tokenizer) {  // read alongside the run: the labels now
        label_tokens(seq.tokens, *s.tokenizer);
        label_tokens(trace.tokens, *s.tokenizer);
        label_predictions(trace.predictions, *s.tokenizer);
    }
    const bool tensor_on_stdout = f.hidden_states == "-" || f.attentions == "-" || f.logits == "-";
    // the trace on stdout (stderr when a tensor takes stdout), then the heatmaps on the same stream;
    // the JSON trace alone on stdout, the heatmaps then on stderr
    const bool json = f.format == TraceFormat::json;
    FILE* stream = json || tensor_on_stdout ? stderr : stdout;
    const std::string heatmaps = pictures ? draw_model_pictures<T>(s, seq, trace, *pictures, stream) : "";
    if (json)
        std::cout << model_trace_json(trace).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    else
        (tensor_on_stdout ? std::cerr : std::cout) << render_model_text(trace);
    (stream == stderr ? std::cerr : std::cout) << heatmaps << std::flush;
}

}  // namespace

void setup_model(CLI::App& app) {
    auto run = [](const ModelFlags& f) { with_precision(f.dtype, [&]<class T>() { run_model<T>(f); }); };
    auto [f, cmd] = add_command<ModelFlags>(app, "model", "A Hugging Face checkpoint's whole forward pass, every head traced", run);
    required_file(*cmd, "MODEL", f->model,
                  "the checkpoint folder (config.json, model.safetensors or shards, tokenizer.json) or a GGUF file (its tokenizer inside)");
    cmd->add_option("--text", f->text, "the text to run (tokenized with the folder's tokenizer.json)");
    cmd->add_option("--text-file", f->text_file, "the text to run, from a file (- for stdin)")->check(file_name());
    cmd->add_option("--ids", f->ids, "token ids to run: a comma list 15496,995 or a 1-D integer .npy (no tokenizer needed)");
    cmd->add_option("--each-line", f->each_line, "run each line of this file (- for stdin) alone: one JSON document per line")
        ->check(file_name());
    cmd->add_flag("--no-special-tokens", f->no_special, "tokenize without the special tokens (BOS, [CLS] ...)");
    cmd->add_option("--layers", f->layers, "the layers whose heads are traced and written, e.g. 0-3,7 (default: all)");
    cmd->add_option("--hidden-states", f->hidden_states, "write (layers + 1, L, E) as output_hidden_states (.npy)")
        ->check(file_name());
    cmd->add_option("--attentions", f->attentions, "write (kept layers, H, L, L) as output_attentions (.npy)")
        ->check(file_name());
    cmd->add_option("--logits", f->logits, "write the (L, vocab) logits (.npy)")->check(file_name());
    cmd->add_option("--experts", f->experts, "a mixture of experts: write the experts each position chose, "
                                             "(kept MoE layers, L, K) int64 (.npy)")->check(file_name());
    cmd->add_option("--expert-weights", f->expert_weights, "a mixture of experts: write their weights, "
                                                           "(kept MoE layers, L, K) (.npy)")->check(file_name());
    cmd->add_option("--top", f->top, "the K most likely next tokens (default 5), or tokens at each mask for BERT/RoBERTa");
    cmd->add_option("--induction", f->induction, "also score each head on BOS + R + R, R being N random tokens")
        ->check(positive_integer());
    cmd->add_option("--seed", f->seed, "the seed of --induction's random tokens (default 0)");
    add_dtype_flag(*cmd, f->dtype);
    add_format_flag(*cmd, f->format);
    cmd->add_option("--threads", f->threads, "number of threads (default: all cores)")->check(positive_integer(1024));
    cmd->add_option("--max-memory", f->max_memory, "refuse runs that would need more (e.g. 4G; default: half the RAM)");
    cmd->add_flag("--heatmap", f->heatmap, "print every kept head as a heatmap with its tokens (colour on a terminal)");
    cmd->add_option("--plot", f->plot, "write every kept head in one image, layers x heads: FILE.png or FILE.svg");
    cmd->add_option("--report", f->report, "write a self-contained HTML page of every kept head: FILE.html");
    cmd->add_option("--rollout", f->rollout, "write attention rollout across the kept layers (L, L): FILE.npy");
    add_scale_flag(*cmd, f->scale, "--scale");
    cmd->footer(R"(Examples:
  attntrace model tests/fixtures/models/full_gpt2 --text "the cat sat on the mat"
  attntrace model gpt2/ --ids 464,3797,3332 --attentions a.npy --logits l.npy --format json
  attntrace model qwen3-q4_k_m.gguf --text "Hello world" --top 3   (tokenized as llama.cpp does)
  attntrace model bert/ --text "the cat [MASK] on the mat" --top 5
  attntrace model gpt2/ --text "x" --induction 50 --seed 1 --layers 4-7
  attntrace model gpt2/ --text "the cat sat on the mat" --plot heads.png --report heads.html)");
}
