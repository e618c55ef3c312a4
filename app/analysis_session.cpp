// The analyses' shared flags and session (analysis_session.hpp).
#include "analysis_session.hpp"

#include <filesystem>
#include <iostream>
#include <iterator>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"
#include "attntrace/text/token_display.hpp"

using namespace attntrace;
namespace fs = std::filesystem;

void add_analysis_flags(CLI::App& cmd, AnalysisFlags& f, bool with_versus, bool input) {
    required_file(cmd, "MODEL", f.model, "the checkpoint folder (config.json, model.safetensors or shards, tokenizer.json) or a GGUF file (its tokenizer inside)");
    if (input) {
        cmd.add_option("--text", f.text, "the text to run (tokenized with the checkpoint's own tokenizer)");
        cmd.add_option("--text-file", f.text_file, "the text to run, from a file (- for stdin)")->check(file_name());
        cmd.add_option("--ids", f.ids, "token ids to run: a comma list 15496,995 or a 1-D integer .npy");
        cmd.add_flag("--no-special-tokens", f.no_special, "tokenize without the special tokens (BOS, [CLS] ...)");
    }
    cmd.add_option("--target", f.target, "the token whose logit is measured: a text that is one token (\" Paris\")");
    cmd.add_option("--target-id", f.target_id, "the same as an id");
    if (with_versus) {
        cmd.add_option("--versus", f.versus, "measure the target's logit minus this token's (one token)");
        cmd.add_option("--versus-id", f.versus_id, "the same as an id");
    }
    cmd.add_option("--position", f.position, "where the metric is read (default: the last token; a masked LM's first mask)");
    cmd.add_option("-o,--output", f.output, "write the values as .npy")->check(file_name());
    cmd.add_option("--plot", f.plot, "draw the values: FILE.png or FILE.svg")->check(file_name());
    add_dtype_flag(cmd, f.dtype);
    add_format_flag(cmd, f.format);
    cmd.add_option("--threads", f.threads, "number of threads (default: all cores)")->check(positive_integer(1024));
    cmd.add_option("--max-memory", f.max_memory, "the memory a forward pass may hold (e.g. 4G; default: half the RAM)");
}

namespace {

std::optional<std::uint32_t> id_flag(const std::string& flag, const std::string& value) {
    if (value.empty()) return std::nullopt;
    const auto id = parse_uint(value);
    if (!id || *id > UINT32_MAX) throw UsageError(flag + ": '" + value + "' is not a token id");
    return static_cast<std::uint32_t>(*id);
}

// The token FLAG_TEXT / FLAG_ID name (at most one of them given).
std::optional<std::uint32_t> token_flags(const AnalysisSession& s, const std::string& name,
                                         const std::optional<std::string>& text, const std::string& id) {
    if (text && !id.empty()) throw UsageError("--" + name + ": give --" + name + " or --" + name + "-id, not both");
    if (text) return one_token(s, "--" + name, *text);
    return id_flag("--" + name + "-id", id);
}

}  // namespace

AnalysisSession open_analysis(const AnalysisFlags& f) {
    const int inputs = int(f.text.has_value()) + int(!f.text_file.empty()) + int(!f.ids.empty());
    if (inputs != 1) throw UsageError("give exactly one of --text, --text-file and --ids");
    AnalysisSession s{open_model(f.model), std::nullopt, {}};
    const std::string needed_by = f.text ? "--text" : !f.text_file.empty() ? "--text-file" : f.target ? "--target"
                                                                             : f.versus ? "--versus" : "";
    s.tokenizer = model_tokenizer(f.model, needed_by);
    if (!f.ids.empty()) {
        s.seq = sequence_from_ids(read_ids(f.ids), s.tokenizer ? &*s.tokenizer : nullptr, "--ids");
    } else {
        const std::string source = f.text ? "--text" : f.text_file == "-" ? "stdin" : f.text_file;
        s.seq = sequence_from_text(*s.tokenizer, f.text ? *f.text : read_all(f.text_file), !f.no_special, source);
    }
    check_ids(s.model.config, s.seq.ids, s.seq.source);
    return s;
}

std::uint32_t one_token(const AnalysisSession& s, const std::string& flag, const std::string& text) {
    if (!s.tokenizer) throw UsageError(flag + ": " + s.model.dir + " has no tokenizer.json; name the token by its id");
    if (text.empty()) throw UsageError(flag + ": an empty text is no token");
    const Encoding e = s.tokenizer->encode(text, false, flag);
    if (e.ids.size() == 1) return e.ids.front();
    std::string tokens;
    for (std::size_t i = 0; i < e.ids.size(); ++i)
        tokens += (i ? ", " : "") + nlohmann::json(std::string(e.tokens[i])).dump() + " (" + std::to_string(e.ids[i]) + ")";
    throw InputError(flag + ": " + nlohmann::json(text).dump() + " is " + std::to_string(e.ids.size()) +
                     " tokens, not one: " + tokens);
}

MetricRequest metric_request(const AnalysisSession& s, const AnalysisFlags& f, bool target_required, bool position) {
    MetricRequest r;
    r.target = token_flags(s, "target", f.target, f.target_id);
    r.versus = token_flags(s, "versus", f.versus, f.versus_id);
    if (target_required && !r.target) throw UsageError("--target: give the token to measure (--target or --target-id)");
    const std::size_t l = s.seq.ids.size();
    if (!position) return r;
    if (f.position) {
        r.position = *f.position;
    } else if (s.model.config.causal()) {
        r.position = l - 1;
    } else {
        const auto mask = mask_token_id(s.model, s.tokenizer ? &*s.tokenizer : nullptr);
        const auto at = mask ? std::find(s.seq.ids.begin(), s.seq.ids.end(), *mask) : s.seq.ids.end();
        if (at == s.seq.ids.end())
            throw UsageError("--position: the text has no mask token for this masked LM to predict; name the position");
        r.position = std::size_t(at - s.seq.ids.begin());
    }
    if (r.position >= l)
        throw UsageError("--position: " + std::to_string(r.position) + " is out of range (the sequence has " +
                         std::to_string(l) + " tokens, positions 0 to " + std::to_string(l - 1) + ")");
    return r;
}

template <class T>
AnalysisContext analysis_context(const AnalysisSession& s, const AnalysisFlags& f, const std::string& command) {
    AnalysisContext c;
    c.command = command;
    c.dir = f.model;
    c.config = &s.model.config;
    c.dtype = sizeof(T) == 4 ? "float32" : "float64";
    c.threads = f.threads;
    c.tokens = s.seq.tokens;
    const Tokenizer* tok = s.tokenizer ? &*s.tokenizer : nullptr;
    c.token_text = [tok](std::uint32_t id) {
        return tok && id < tok->vocab_size() ? tok->decode(std::span<const std::uint32_t>(&id, 1)) : std::string();
    };
    c.token_label = [tok](std::uint32_t id) {
        if (!tok || id >= tok->vocab_size()) return "#" + std::to_string(id);
        return display_tokens(*tok, std::span<const std::uint32_t>(&id, 1)).front();
    };
    c.prompt_text = [tok](const std::vector<TraceToken>& tokens) {
        std::vector<std::uint32_t> ids;
        for (const TraceToken& t : tokens) {
            if (!tok || t.id >= tok->vocab_size()) return std::string();
            ids.push_back(t.id);
        }
        return tok->decode(ids);
    };
    return c;
}

template AnalysisContext analysis_context<float>(const AnalysisSession&, const AnalysisFlags&, const std::string&);
template AnalysisContext analysis_context<double>(const AnalysisSession&, const AnalysisFlags&, const std::string&);

void check_analysis_outputs(const AnalysisFlags& f, const std::vector<std::pair<std::string, std::string>>& outputs) {
    std::vector<std::string> inputs{f.text_file, f.ids, f.model};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(f.model, ec)) inputs.push_back(entry.path().string());
    if (f.output == "-" && f.format == TraceFormat::json)
        throw UsageError("--format: the JSON document takes stdout; write -o to a file");
    if (!f.plot.empty() && !f.plot.ends_with(".png") && !f.plot.ends_with(".svg"))
        throw UsageError("--plot: " + f.plot + " must end in .png or .svg");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const auto& [flag, path] = outputs[i];
        if (path.empty()) continue;
        ensure_not_an_input(path, inputs);
        for (std::size_t j = 0; j < i; ++j)
            if (!outputs[j].second.empty() && same_output_file(path, outputs[j].second))
                throw UsageError(flag + ": " + path + " is the file of " + outputs[j].first);
    }
}

std::uint64_t analysis_budget(const AnalysisFlags& f) {
    if (f.max_memory.empty()) return default_memory_budget();
    const auto bytes = parse_byte_size(f.max_memory);
    if (!bytes) throw UsageError("--max-memory: '" + f.max_memory + "' is not a size like 600M or 4G");
    return *bytes;
}

void write_matrix_picture(const std::string& path, const MatrixPicture& picture) {
    write_file_atomically(path, path.ends_with(".svg") ? matrix_svg(picture) : matrix_png(picture));
}

void print_analysis(const AnalysisFlags& f, const nlohmann::json& doc, const std::string& text) {
    if (f.format == TraceFormat::json)
        std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    else
        (f.output == "-" ? std::cerr : std::cout) << text;  // -o - takes stdout
}
