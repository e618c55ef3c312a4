#pragma once
// The analyses' results as text (for a terminal: at most 100 columns, wide tables cut into
// blocks) and as one JSON document each (docs/interventions.md lists every field).
//
// Legend: L length, N layers, H heads, K layers shown.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/analysis/ablate.hpp"
#include "attntrace/analysis/attribute.hpp"
#include "attntrace/analysis/lens.hpp"
#include "attntrace/analysis/patch.hpp"
#include "attntrace/model/model_trace.hpp"

namespace attntrace {

// What every analysis's output names: the model, the run, the tokens, and how to show a token id.
struct AnalysisContext {
    std::string command;                 // "lens", "ablate", "attribute", "patch"
    std::string dir;
    const ModelConfig* config = nullptr;
    std::string dtype;                   // "float32"
    std::size_t threads = 0;
    std::vector<TraceToken> tokens;      // (L)
    std::vector<TraceToken> corrupt_tokens;  // patch: the corrupted prompt's (L)
    std::function<std::string(std::uint32_t)> token_text;   // an id's decoded text (" Paris"; "" unknown), for JSON
    std::function<std::string(std::uint32_t)> token_label;  // as a reader sees it ("␣Paris"), for text and pictures
    std::function<std::string(const std::vector<TraceToken>&)> prompt_text;  // a prompt decoded whole ("" without a tokenizer)
};

// The metric in words: `log_prob of " Paris" (id 6342) at position 7 ("ris")`.
std::string metric_text(const AnalysisContext& c, const Metric& m);
// {"kind", "position", "target", "versus"} (versus null without one).
nlohmann::json metric_json(const Metric& m);

// With more than one candidate per cell, the text lists them at POSITION (the last when past it).
std::string lens_text(const AnalysisContext& c, const LensResult& r, const std::optional<std::uint32_t>& target,
                      std::size_t position = SIZE_MAX);
nlohmann::json lens_json(const AnalysisContext& c, const LensResult& r, const std::optional<std::uint32_t>& target);

template <class T>
std::string ablation_text(const AnalysisContext& c, const AblationResult<T>& r, Ablation ablation);
template <class T>
nlohmann::json ablation_json(const AnalysisContext& c, const AblationResult<T>& r, Ablation ablation);

std::string attribution_text(const AnalysisContext& c, const Attribution& a);
nlohmann::json attribution_json(const AnalysisContext& c, const Attribution& a);

std::string patch_text(const AnalysisContext& c, const PatchResult& r);
nlohmann::json patch_json(const AnalysisContext& c, const PatchResult& r);

// A (rows, cols) table of CELLS as text, at most 100 columns a line: ROW_LABELS down the side
// under CORNER, COL_LABELS across, cut into blocks of columns that fit; cells right-aligned.
std::string text_table(const std::string& corner, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::vector<std::string>& cells);

// A (rows, cols) table of values as text, at most 100 columns a line: ROW_LABELS down the side,
// COL_LABELS across, cut into blocks of columns that fit; each value with 4 significant digits.
std::string value_table(const std::string& corner, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const double* values);

// The K entries of (rows, cols) VALUES largest in magnitude, as (row, col), largest first.
std::vector<std::pair<std::size_t, std::size_t>> largest_entries(const double* values, std::size_t rows,
                                                                 std::size_t cols, std::size_t k);

}  // namespace attntrace
