#pragma once
// What lens, ablate, attribute and patch share: the model and its input (--text, --text-file,
// --ids), the metric's flags (--target/--target-id, --versus/--versus-id, --position), the run's
// flags (--dtype, --format, --threads, --max-memory), their outputs (-o, --plot) checked against
// the inputs, and the context their renderers name things by (docs/interventions.md).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "attention_flags.hpp"
#include "attntrace/analysis/render.hpp"
#include "attntrace/pictures/matrix_plot.hpp"
#include "model_run.hpp"

struct AnalysisFlags {
    std::string model;
    std::optional<std::string> text;
    std::string text_file, ids;
    bool no_special = false;
    std::optional<std::string> target, versus;        // a text that must be one token
    std::string target_id, versus_id;                 // or its id
    std::optional<std::size_t> position;
    std::string output, plot;                         // -o F.npy, --plot F.png|F.svg
    Precision dtype = Precision::f32;
    TraceFormat format = TraceFormat::text;
    std::size_t threads = 0;
    std::string max_memory;
};

// Binds the shared flags. WITH_VERSUS: --versus / --versus-id too; INPUT: --text, --text-file,
// --ids, --no-special-tokens (patch has its own pair of prompts).
void add_analysis_flags(CLI::App& cmd, AnalysisFlags& f, bool with_versus, bool input = true);

// The model, its tokenizer (when the folder has one, or the text needs it) and the sequence.
struct AnalysisSession {
    attntrace::Model model;
    std::optional<attntrace::Tokenizer> tokenizer;
    Sequence seq;
};

// Opens F.model and reads the sequence from the input flags (exactly one of them).
AnalysisSession open_analysis(const AnalysisFlags& f);

// The ids of a text flag's value that must be one token (no special tokens): InputError (exit 3)
// naming FLAG and the tokens it became; UsageError without a tokenizer.
std::uint32_t one_token(const AnalysisSession& s, const std::string& flag, const std::string& text);

// The metric's flags read: --position (default: the last token; a masked LM's first mask token),
// --target / --target-id (REQUIRED: an error without), --versus / --versus-id. Without POSITION
// (the lens, which reads every position) no position is chosen.
attntrace::MetricRequest metric_request(const AnalysisSession& s, const AnalysisFlags& f, bool target_required,
                                        bool position = true);

// The renderers' context for COMMAND run in T.
template <class T>
attntrace::AnalysisContext analysis_context(const AnalysisSession& s, const AnalysisFlags& f, const std::string& command);

// No output replaces an input (the model's files, the text or ids file) and no two outputs are one
// file: OUTPUTS as (flag, path), empty paths skipped. --plot must end in .png or .svg.
void check_analysis_outputs(const AnalysisFlags& f, const std::vector<std::pair<std::string, std::string>>& outputs);

// The library's "memory budget: ..." (a sweep that cannot fit) in the flag's words.
inline const FlagNames kBudgetPhrase = {{"memory budget:", "--max-memory:"}};

// --max-memory in bytes (default: half the RAM), UsageError naming the flag when malformed.
std::uint64_t analysis_budget(const AnalysisFlags& f);

// Writes PICTURE to PATH (.png or .svg) atomically.
void write_matrix_picture(const std::string& path, const attntrace::MatrixPicture& picture);

// The run's output on stdout: the JSON document, or the text.
void print_analysis(const AnalysisFlags& f, const nlohmann::json& doc, const std::string& text);
