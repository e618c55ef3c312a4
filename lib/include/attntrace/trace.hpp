#pragma once
// The trace: a recorder that observes the core's stages, and renderers that turn the record into
// the text trace (one line per stage, in execution order) or the JSON trace. The app chooses the
// renderer and the stream; nothing here prints.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/observer.hpp"
#include "attntrace/tensor.hpp"

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
    // KEEP: the stages whose values are kept (for --trace values, --dump, head statistics);
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

struct TextStyle {
    bool values = false;   // --trace values: each stage's tensor as torch's str() prints it
    bool unicode = false;  // terminal only: "·" and "ᵀ" in the notes
    bool color = false;    // terminal only, and never with NO_COLOR
};

// HEADER: the first line ("mha: 2 heads ..."), built by the caller.
template <class T>
std::string render_text_trace(const std::string& header, const std::vector<StageRecord<T>>& stages,
                              const TextStyle& style);

}  // namespace attntrace
