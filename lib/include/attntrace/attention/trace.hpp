#pragma once
// The trace: a recorder that observes the core's stages, and renderers that turn the record into
// the text trace (one line per stage, in execution order, then the head statistics) or the JSON
// trace. The app chooses the renderer and the stream; nothing here prints.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/detectors.hpp"
#include "attntrace/attention/observer.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

template <class T>
struct StageRecord {
    std::string name;
    Shape shape;
    std::string note;
    nlohmann::json attributes;
    std::optional<Array<T>> values;  // kept only for the stages asked for
};

template <class T>
class StageRecorder final : public Observer<T> {
public:
    // KEEP: the stages whose values are kept (for --trace values, --dump, the JSON trace);
    // keep_all keeps every stage's values.
    explicit StageRecorder(std::set<std::string> keep = {}, bool keep_all = false)
        : keep_(std::move(keep)), keep_all_(keep_all) {}

    bool wants_values(std::string_view stage) const override {
        return keep_all_ || keep_.count(std::string(stage)) > 0;
    }
    void stage(const StageView<T>& view) override;

    const std::vector<StageRecord<T>>& stages() const { return stages_; }
    const StageRecord<T>* find(std::string_view name) const;

private:
    std::set<std::string> keep_;
    bool keep_all_;
    std::vector<StageRecord<T>> stages_;
};

// Per head: the mean entropy of its weight rows (nats), and for the first queries of the first
// batch, the key that got the most weight and how much. The head axis is the one before Lq in
// RowStats::shape; every axis before it is a batch axis (averaged over for the entropy).
struct HeadSummary {
    std::size_t head = 0;
    double mean_entropy = 0;      // over the non-empty rows of every batch
    std::size_t empty_rows = 0;
    struct Top {
        std::size_t query = 0;
        std::int64_t key = -1;    // -1: an empty row
        double weight = 0;
        double entropy = 0;
    };
    std::vector<Top> top;         // queries 0 .. min(Lq, max_queries) - 1 of batch 0
    HeadScores scores;            // the head detectors (NaN: no row had that key, or no detector rows)
    std::string role;             // head_role(scores): "previous-token", "sink", "diagonal" or ""
};
std::vector<HeadSummary> summarize_heads(const RowStats& stats, std::size_t max_queries);

// One head of the JSON trace's "head_stats" (fields below, at trace_json).
nlohmann::json head_summary_json(const HeadSummary& head);

// "previous_token 0.912  diagonal 0.050  first_token 0.020  max_weight 0.930" ("-" for a NaN).
std::string head_scores_text(const HeadScores& scores);

// Everything about a run that is not a stage: the first line of the text trace, and the
// "command", "options", "inputs" and "outputs" members of the JSON trace.
struct TraceContext {
    std::string header;
    std::string command;       // "mha" or "sdpa"
    nlohmann::json options;    // resolved: heads, head dims, scale, masks, params, ...
    nlohmann::json inputs;     // [{"name", "file", "dtype", "shape"}]
    nlohmann::json outputs;    // {"output": FILE or null, "attn_weights": ..., "dumps": [{"stage", "file"}]}
};

struct TextStyle {
    bool values = false;   // --trace values: each stage's tensor as torch's str() prints it
    bool unicode = false;  // terminal only: "·", "ᵀ", "×", "→"
    bool color = false;    // terminal only, and never with NO_COLOR
    std::size_t top_queries = 8;  // queries shown per head in the head statistics
};

template <class T>
std::string render_text_trace(const TraceContext& context, const std::vector<StageRecord<T>>& stages,
                              const std::optional<RowStats>& row_stats, const TextStyle& style);

// The JSON trace: {"command", "options", "inputs", "stages": [{"name", "shape", "note",
// "attributes", "stats": {"min", "max", "mean" (over the finite values), "nan", "inf"} or null,
// "data" (with_values)}], "head_stats":
// [{"head", "mean_entropy", "empty_rows", "previous_token", "diagonal", "first_token", "max_weight"
// (null when no row has that key), "role" (null when none), "top": [{"query", "key", "weight",
// "entropy"}]}],
// "empty_rows", "outputs"}. Stage stats need the stage's values, which the JSON trace keeps.
template <class T>
nlohmann::json trace_json(const TraceContext& context, const std::vector<StageRecord<T>>& stages,
                          const std::optional<RowStats>& row_stats, std::size_t empty_rows, bool with_values);

}  // namespace attntrace
