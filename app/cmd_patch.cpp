// attntrace patch MODEL --clean S --corrupt S (or --clean-ids ... --corrupt-ids ...) --target S
// [--versus S] [--position P] [--site head|resid|attn|mlp] [-o F.npy] [--plot F.png|F.svg]
// [--each-line F]: activation patching between two prompts, every site of a kind in one process
// (docs/interventions.md).
#include <cmath>
#include <filesystem>
#include <iostream>

#include "analysis_session.hpp"
#include "attntrace/analysis/patch.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"

using namespace attntrace;

namespace {

struct PatchFlags : AnalysisFlags {
    std::optional<std::string> clean, corrupt;
    std::string clean_ids, corrupt_ids, each_line;
    PatchSite site = PatchSite::head;
};

// A prompt from its text or its ids flag (exactly one of them).
Sequence prompt(const AnalysisSession& s, const PatchFlags& f, const std::string& name, const std::optional<std::string>& text,
                const std::string& ids) {
    if (text.has_value() == !ids.empty())
        throw UsageError("--" + name + ": give --" + name + " or --" + name + "-ids (one of them)");
    if (!ids.empty()) return sequence_from_ids(read_ids(ids), s.tokenizer ? &*s.tokenizer : nullptr, "--" + name + "-ids");
    if (!s.tokenizer) throw UsageError("--" + name + ": " + f.model + " has no tokenizer.json; give --" + name + "-ids");
    return sequence_from_text(*s.tokenizer, *text, !f.no_special, "--" + name);
}

MatrixPicture patch_picture(const AnalysisContext& c, const PatchResult& r) {
    MatrixPicture m;
    const bool head = r.site == PatchSite::head;
    m.title = std::string("activation patching, ") + patch_site_name(r.site) + ": " + describe_model(*c.config);
    m.lines.push_back("metric: " + metric_text(c, r.metric) + "; clean " + std::to_string(r.clean) + ", corrupted " +
                      std::to_string(r.corrupt));
    auto prompt_text = [&](const std::vector<TraceToken>& tokens) {  // the text decoded whole, or the ids without a tokenizer
        std::string text = c.prompt_text ? c.prompt_text(tokens) : std::string(), ids;
        for (const TraceToken& t : tokens) ids += (ids.empty() ? "ids " : ",") + std::to_string(t.id);
        return text.empty() ? ids : text;
    };
    m.lines.push_back("clean: " + prompt_text(c.tokens));
    m.lines.push_back("corrupted: " + prompt_text(c.corrupt_tokens));
    m.lines.push_back("colour: (m_patched - m_corrupt) / (m_clean - m_corrupt); 1 restores the clean answer");
    m.row_axis = "layer", m.col_axis = head ? "head" : "clean token (▶ where the prompts differ)";
    const std::size_t n = r.values.shape()[0], w = r.values.shape()[1];
    for (std::size_t i = 0; i < n; ++i) m.row_labels.push_back(std::to_string(i));
    for (std::size_t j = 0; j < w; ++j) {
        m.col_labels.push_back(head ? std::to_string(j) : std::to_string(j) + " " + c.token_label(c.tokens[j].id));
        if (!head) m.marked_cols.push_back(c.tokens[j].id != c.corrupt_tokens[j].id);
    }
    m.values.assign(r.values.data(), r.values.data() + r.values.size());
    m.diverging = true;
    m.top = 1;
    for (double v : m.values) m.top = std::max(m.top, std::isfinite(v) ? std::abs(v) : 0.0);
    m.legend = "share of the clean answer restored";
    return m;
}

template <class T>
nlohmann::json patch_pair(const AnalysisSession& s, const PatchFlags& f, const Sequence& clean, const Sequence& corrupt,
                          const MetricRequest& request, PatchResult* out = nullptr) {
    PatchOptions o;
    o.site = f.site;
    o.threads = f.threads;
    o.budget = analysis_budget(f);
    PatchResult r = naming_flags({{"position", "--position"}},
                                 [&] { return patch<T>(s.model, clean.ids, corrupt.ids, request, o); }, kBudgetPhrase);
    AnalysisContext c = analysis_context<T>(s, f, "patch");
    c.tokens = clean.tokens, c.corrupt_tokens = corrupt.tokens;
    if (!f.output.empty()) save_tensor(f.output, r.values, FileFormat::npy);
    if (!f.plot.empty()) write_matrix_picture(f.plot, patch_picture(c, r));
    if (f.format != TraceFormat::json && f.each_line.empty()) std::cout << patch_text(c, r);
    if (out) *out = std::move(r);
    return patch_json(c, r);
}

// --each-line: "clean TAB corrupt TAB target [TAB versus]" per line, one JSON document each; a line
// that fails gets {"line": n, "error": ...}, and the run exits 3 at the end.
template <class T>
void each_line(AnalysisSession& s, const PatchFlags& f) {
    const std::string all = read_all(f.each_line), name = f.each_line == "-" ? "stdin" : f.each_line;
    std::size_t failed = 0, number = 0;
    for (std::size_t at = 0; at < all.size();) {
        const std::size_t end = std::min(all.find('\n', at), all.size());
        std::string line = all.substr(at, end - at);
        at = end + 1, ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        nlohmann::json doc;
        try {
            std::vector<std::string> fields;
            for (std::size_t p = 0, q; p <= line.size(); p = q + 1) fields.push_back(line.substr(p, (q = std::min(line.find('\t', p), line.size())) - p));
            const std::string where = "line " + std::to_string(number) + " of " + name;
            if (fields.size() < 3 || fields.size() > 4) throw InputError(where + ": expected clean, corrupt, target [, versus] separated by tabs");
            const Sequence clean = sequence_from_text(*s.tokenizer, fields[0], !f.no_special, where);
            const Sequence corrupt = sequence_from_text(*s.tokenizer, fields[1], !f.no_special, where);
            s.seq = clean;
            PatchFlags lf = f;
            lf.target = fields[2], lf.target_id.clear();
            lf.versus = fields.size() == 4 ? std::optional(fields[3]) : f.versus;
            doc = patch_pair<T>(s, lf, clean, corrupt, metric_request(s, lf, true));
        } catch (const InputError& e) {
            doc = {{"line", number}, {"error", e.what()}};
            ++failed;
        } catch (const UsageError& e) {
            doc = {{"line", number}, {"error", e.what()}};
            ++failed;
        }
        std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
    }
    if (failed) throw InputError(name + ": " + std::to_string(failed) + " of the lines failed (see their documents)");
}

template <class T>
void run_patch(const PatchFlags& f) {
    check_analysis_outputs(f, {{"-o", f.output}, {"--plot", f.plot}});
    if (!f.each_line.empty() && (!f.output.empty() || !f.plot.empty()))
        throw UsageError("--each-line: one JSON document per line; -o and --plot are for one pair");
    AnalysisSession s{open_model(f.model), std::nullopt, {}};
    s.tokenizer = model_tokenizer(f.model, "");
    if (!f.each_line.empty()) {
        if (!s.tokenizer) throw UsageError("--each-line: " + f.model + " has no tokenizer.json");
        return each_line<T>(s, f);
    }
    const Sequence clean = prompt(s, f, "clean", f.clean, f.clean_ids);
    const Sequence corrupt = prompt(s, f, "corrupt", f.corrupt, f.corrupt_ids);
    s.seq = clean;
    const MetricRequest request = metric_request(s, f, true);
    const nlohmann::json doc = patch_pair<T>(s, f, clean, corrupt, request);
    if (f.format == TraceFormat::json) std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

}  // namespace

void setup_patch(CLI::App& app) {
    auto run = [](const PatchFlags& f) { with_precision(f.dtype, [&]<class T>() { run_patch<T>(f); }); };
    auto [f, cmd] = add_command<PatchFlags>(app, "patch", "Activation patching: which sites carry the difference between two prompts", run);
    add_analysis_flags(*cmd, *f, true, false);
    cmd->add_option("--clean", f->clean, "the clean prompt");
    cmd->add_option("--corrupt", f->corrupt, "the corrupted prompt, of as many tokens");
    cmd->add_option("--clean-ids", f->clean_ids, "the clean prompt's ids: a comma list or a 1-D integer .npy");
    cmd->add_option("--corrupt-ids", f->corrupt_ids, "the corrupted prompt's ids");
    cmd->add_flag("--no-special-tokens", f->no_special, "tokenize without the special tokens (BOS, [CLS] ...)");
    add_mode_option(*cmd, "--site", f->site,
                    {{"head", PatchSite::head}, {"resid", PatchSite::resid}, {"attn", PatchSite::attn}, {"mlp", PatchSite::mlp}},
                    "what is patched: a head's z at every position, or resid_pre / attn_out / mlp_out at one position");
    cmd->add_option("--each-line", f->each_line, "patch each line's pair (clean TAB corrupt TAB target [TAB versus]): JSON lines")
        ->check(file_name());
    cmd->footer(R"(Examples:
  attntrace patch gpt2/ --clean "When Mary and John went to the store, John gave a drink to" \
      --corrupt "When Mary and John went to the store, Mary gave a drink to" --target " Mary" --versus " John"
  attntrace patch gpt2/ --clean "..." --corrupt "..." --target " Mary" --site resid --plot resid.png -o resid.npy
  attntrace patch gpt2/ --each-line pairs.tsv | jq -c '.values | flatten | max')");
}
