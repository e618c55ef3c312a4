// One `attntrace model` run (model_run.hpp).
#include "model_run.hpp"

#include <algorithm>
#include <iostream>
#include <iterator>
#include <filesystem>
#include <mutex>
#include <span>

#include "attntrace/io/atomic_write.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/model/forward.hpp"
#include "attntrace/model/layer_spec.hpp"
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/memory.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "flag_parsing.hpp"

using namespace attntrace;
namespace fs = std::filesystem;

std::string read_all(const std::string& file) {
    if (file != "-") return std::string(FileBytes::open(file).bytes());
    std::string all{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    if (std::cin.bad()) throw InputError("stdin: read failed");
    return all;
}

// ---- the sequence ---------------------------------------------------------------------------

std::vector<std::uint32_t> read_ids(const std::string& value) {
    std::vector<std::uint32_t> ids;
    std::error_code ec;  // a long comma list is no file name: no exception for ENAMETOOLONG
    if (value.ends_with(".npy") || fs::is_regular_file(value, ec)) {
        const LoadedTensor<double> t = load_tensor<double>(value);
        if (is_float(t.source.dtype) || t.array.dimension() != 1)
            throw InputError(value + ": ids must be a 1-D integer array, not " + std::string(dtype_name(t.source.dtype)) +
                             " " + shape_string(t.array.shape()));
        for (double id : t.array) {
            if (id < 0 || id > double(UINT32_MAX)) throw InputError(value + ": id " + format_number(id) + " is not a token id");
            ids.push_back(static_cast<std::uint32_t>(id));
        }
        return ids;
    }
    const auto list = parse_uint_list(value);
    if (!list) throw UsageError("--ids: '" + value + "' is neither a comma list of ids (15496,995) nor a .npy file");
    for (std::uint64_t id : *list) {
        if (id > UINT32_MAX) throw UsageError("--ids: " + std::to_string(id) + " is not a token id");
        ids.push_back(static_cast<std::uint32_t>(id));
    }
    return ids;
}

void label_tokens(std::vector<TraceToken>& tokens, const Tokenizer& tokenizer) {
    for (TraceToken& t : tokens)
        if (t.id < tokenizer.vocab_size()) {
            t.token = tokenizer.id_to_token(t.id).value_or("");
            t.text = tokenizer.decode(std::span<const std::uint32_t>(&t.id, 1));
        }
}

void label_predictions(std::vector<Prediction>& predictions, const Tokenizer& tokenizer) {
    for (Prediction& p : predictions)
        for (Candidate& c : p.top)
            if (c.id < tokenizer.vocab_size()) c.text = tokenizer.decode(std::span<const std::uint32_t>(&c.id, 1));
}

Sequence sequence_from_ids(std::vector<std::uint32_t> ids, const Tokenizer* tokenizer, std::string source) {
    Sequence s{std::move(ids), {}, std::move(source), ""};
    for (std::uint32_t id : s.ids) s.tokens.push_back(TraceToken{id, "", ""});
    if (tokenizer) label_tokens(s.tokens, *tokenizer);
    return s;
}

Sequence sequence_from_text(const Tokenizer& tokenizer, std::string_view text, bool special_tokens, std::string source) {
    if (text.empty()) throw InputError(source + ": empty text");
    const Encoding e = tokenizer.encode(text, special_tokens, source);
    Sequence s = sequence_from_ids({e.ids.begin(), e.ids.end()}, &tokenizer, std::move(source));
    s.text = std::string(text);
    for (std::size_t i = 0; i < s.tokens.size(); ++i) s.tokens[i].token = e.tokens[i];
    return s;
}

std::optional<std::uint32_t> mask_token_id(const Model& model, const Tokenizer* tokenizer) {
    if (model.config.mask_token_id) return model.config.mask_token_id;
    if (!tokenizer) return std::nullopt;
    for (const char* name : {"[MASK]", "<mask>"})
        if (const auto id = tokenizer->token_to_id(name)) return id;
    return std::nullopt;
}

// ---- the session ----------------------------------------------------------------------------

std::optional<Tokenizer> model_tokenizer(const std::string& model, const std::string& needed_by) {
    std::error_code ec;
    if (is_gguf_path(model)) {
        if (!needed_by.empty()) return Tokenizer::load(model);
        try {  // only for the tokens' labels: a tokenizer attntrace cannot read leaves them ids
            return Tokenizer::load(model);
        } catch (const InputError&) {
            return std::nullopt;
        }
    }
    if (!needed_by.empty() || fs::exists(fs::path(model) / "tokenizer.json", ec)) return Tokenizer::load(model);
    return std::nullopt;
}

namespace {

// A GGUF file's tokenizer for the labels alone (model_tokenizer with no flag needing it), read on a
// side thread at the least priority: it takes the cores the forward leaves idle (ms 0-2 opening the
// file, the serial parts between products) instead of ~7 ms of the main thread before the forward
// (docs/performance.md, "## GGUF weights").
std::unique_ptr<Alongside<std::optional<Tokenizer>>> read_tokenizer_alongside(const std::string& model) {
    return std::make_unique<Alongside<std::optional<Tokenizer>>>([model] {
        lower_thread_priority();
        timeline_mark("model: reading the tokenizer alongside");
        std::optional<Tokenizer> t = model_tokenizer(model, "");
        timeline_mark("model: tokenizer read alongside");
        return t;
    });
}

}  // namespace

bool finish_tokenizer(ModelSession& s) {
    if (!s.tokenizer_reading) return false;
    s.tokenizer = s.tokenizer_reading->get();
    s.tokenizer_reading.reset();
    return true;
}

ModelSession open_session(const ModelFlags& f, bool text_needed) {
    timeline_mark("model: opening");
    const bool alongside = !text_needed && !f.induction && is_gguf_path(f.model) && thread_count(f.threads) > 1;
    auto reading = alongside ? read_tokenizer_alongside(f.model) : nullptr;
    ModelSession s{f, open_model(f.model), std::nullopt, std::move(reading), {}, 0};
    const ModelConfig& m = s.model.config;
    timeline_mark("model: opened");
    s.top = f.top.value_or(m.causal() ? 5 : 0);
    if (!alongside)
        s.tokenizer = model_tokenizer(f.model, text_needed ? (f.each_line.empty() ? "--text" : "--each-line") : "");
    else if (!m.causal() && s.top > 0)  // the masks' positions come from the tokenizer before the run
        finish_tokenizer(s);
    timeline_mark("model: tokenizer read");
    s.kept = naming_flags({{"layers", "--layers"}}, [&] { return parse_layer_spec(f.layers, m.layers.size()); });
    if (!s.model.has_head() && (s.top > 0 || !f.logits.empty()))
        throw UsageError(std::string(f.logits.empty() ? "--top" : "--logits") + ": " + s.model.head_missing);
    if (f.induction && f.induction == 0) throw UsageError("--induction: the random sequence needs at least 1 token");
    for (const auto& [flag, path] : {std::pair{"--experts", f.experts}, {"--expert-weights", f.expert_weights}})
        if (!path.empty() && !m.moe)
            throw UsageError(std::string(flag) + ": " + f.model + " is not a mixture of experts (" + m.model_type + ")");
    return s;
}

namespace {

// ---- the outputs ----------------------------------------------------------------------------

// A .npy output written where its values are computed (pwrite into its temporary file, or for
// stdout or another non-regular file into an in-memory file written there at the end), or, where
// no in-memory file can be made, held whole in an array and written at the end.
template <class T>
class NpyOutput {
public:
    NpyOutput(const std::string& path, const Shape& shape) : path_(path), shape_(shape), file_(StreamedFile::open_or_hold(path)) {
        if (!file_) {
            held_ = Array<T>::from_shape(shape);
            return;
        }
        header_ = npy_header<T>(shape);
        file_->write_at(0, header_);
    }
    void write(std::size_t first, const T* data, std::size_t count) {
        if (file_)
            file_->write_at(header_.size() + first * sizeof(T), {reinterpret_cast<const char*>(data), count * sizeof(T)});
        else
            std::copy(data, data + count, held_->data() + first);
    }
    void commit() {
        if (file_) return file_->commit();
        save_tensor(path_, *held_, FileFormat::npy);
    }

private:
    std::string path_;
    Shape shape_;
    std::unique_ptr<StreamedFile> file_;
    std::string header_;
    std::optional<Array<T>> held_;
};

// --attentions (kept layers, H, L, L) and --hidden-states (N + 1, L, E), written layer by layer.
template <class T>
class OutputFiles final : public ModelObserver<T> {
public:
    OutputFiles(const ModelSession& s, std::size_t length) : kept_(s.kept), plane_(s.model.config.heads * length * length) {
        const ModelConfig& m = s.model.config;
        std::size_t slot = 0;
        for (bool k : kept_) slots_.push_back(k ? slot++ : SIZE_MAX);
        if (!s.flags.attentions.empty())
            attentions_.emplace(s.flags.attentions, Shape{slot, m.heads, length, length});
        if (!s.flags.hidden_states.empty())
            hidden_.emplace(s.flags.hidden_states, Shape{m.layers.size() + 1, length, m.hidden});
    }
    bool wants_weights(std::size_t layer) const override { return attentions_ && kept_[layer]; }
    void attention_rows(std::size_t layer, std::size_t first, const T* w, std::size_t count) override {
        attentions_->write(slots_[layer] * plane_ + first, w, count);
    }
    void hidden_state(std::size_t index, const T* x, std::size_t rows, std::size_t e) override {
        if (hidden_) hidden_->write(index * rows * e, x, rows * e);
    }
    void commit() {
        if (attentions_) attentions_->commit();
        if (hidden_) hidden_->commit();
    }

private:
    std::vector<bool> kept_;
    std::vector<std::size_t> slots_;
    std::size_t plane_;
    std::optional<NpyOutput<T>> attentions_, hidden_;
};

// --experts (kept MoE layers, L, K) int64 and --expert-weights the same in T, from ROUTING.
template <class T>
void write_routing(const ModelFlags& f, const std::map<std::size_t, LayerRouting>& routing, std::size_t length,
                   std::size_t k) {
    const Shape shape{routing.size(), length, k};
    Array<std::int64_t> ids = Array<std::int64_t>::from_shape(shape);
    Array<T> weights = Array<T>::from_shape(shape);
    std::size_t at = 0;
    for (const auto& [layer, r] : routing)
        for (std::size_t i = 0; i < r.rows * r.k; ++i, ++at) ids.data()[at] = r.chosen[i], weights.data()[at] = T(r.weights[i]);
    if (!f.experts.empty()) write_file_atomically(f.experts, npy_bytes(ids));
    if (!f.expert_weights.empty()) write_file_atomically(f.expert_weights, npy_bytes(weights));
}

// ---- predictions and induction --------------------------------------------------------------

std::optional<std::uint32_t> mask_id(const ModelSession& s) { return mask_token_id(s.model, s.tokenizer ? &*s.tokenizer : nullptr); }

// The positions whose top tokens the trace shows: the last (a decoder's next token) or each mask.
std::vector<std::size_t> prediction_positions(const ModelSession& s, const Sequence& seq) {
    if (s.top == 0) return {};
    if (s.model.config.causal()) return {seq.ids.size() - 1};
    std::vector<std::size_t> out;
    const auto mask = mask_id(s);
    for (std::size_t i = 0; mask && i < seq.ids.size(); ++i)
        if (seq.ids[i] == *mask) out.push_back(i);
    return out;
}

template <class T>
std::vector<Prediction> predictions(const ModelSession& s, const T* logits, const std::vector<std::size_t>& positions) {
    std::vector<Prediction> out;
    const std::size_t v = s.model.config.vocab;
    for (std::size_t i = 0; i < positions.size(); ++i) {
        const T* row = logits + i * v;
        out.push_back(Prediction{positions[i], top_candidates(row, v, s.top)});
    }
    if (s.tokenizer) label_predictions(out, *s.tokenizer);
    return out;
}

// The tokens the tokenizer's post-processor puts before a text (BOS, [CLS]), else config.json's
// bos_token_id (GPT-2's <|endoftext|>, as TransformerLens prepends it), else none; none with
// --no-special-tokens.
std::vector<std::uint32_t> induction_prefix(const ModelSession& s) {
    if (s.flags.no_special) return {};
    std::vector<std::uint32_t> prefix;
    if (s.tokenizer) {
        const auto with = s.tokenizer->encode("a", true, "induction").ids;
        const auto without = s.tokenizer->encode("a", false, "induction").ids;
        const auto at = std::search(with.begin(), with.end(), without.begin(), without.end());
        prefix.assign(with.begin(), at == with.end() ? with.begin() : at);
    }
    if (prefix.empty() && s.model.config.bos_token_id) prefix.push_back(*s.model.config.bos_token_id);
    return prefix;
}

// --induction N: the extra run on PREFIX + R + R, scoring the kept layers' heads.
template <class T>
std::pair<InductionSequence, std::map<std::size_t, std::vector<double>>> induction_run(const ModelSession& s) {
    const ModelConfig& m = s.model.config;
    std::vector<std::uint32_t> excluded = m.special_ids;
    std::size_t vocab = m.vocab;
    if (s.tokenizer) {
        const auto special = s.tokenizer->special_ids();
        excluded.insert(excluded.end(), special.begin(), special.end());
        vocab = std::min(vocab, s.tokenizer->vocab_size());
    }
    const InductionSequence seq = naming_flags({{"induction", "--induction"}}, [&] {
        return induction_sequence(*s.flags.induction, parse_seed(s.flags.seed), vocab, excluded, induction_prefix(s));
    });
    ForwardOptions o;
    o.attention_layers = s.kept;
    o.row_stats = false;
    o.layers = kept_layers(s.kept).back() + 1;
    o.threads = s.flags.threads;
    InductionScorer<T> scorer(seq, s.kept, m.heads);
    naming_flags({}, [&] { forward<T>(s.model, seq.ids, o, scorer); }, {{"ids: ", "--induction: "}});
    return {seq, scorer.scores};
}

// Refuses (exit 3, naming --max-memory) a run whose peak would pass the budget.
void check_budget(const ModelSession& s, std::size_t length, const ForwardOptions& o, std::size_t element,
                  std::uint64_t extra_bytes) {
    std::uint64_t bytes = forward_memory_bytes(s.model.config, length, o, element) + extra_bytes;
    const ModelConfig& m = s.model.config;
    const std::uint64_t l = length;  // a tensor to stdout is held whole until the end (NpyOutput)
    if (s.flags.attentions == "-") bytes += kept_layers(s.kept).size() * m.heads * l * l * element;
    if (s.flags.hidden_states == "-") bytes += (m.layers.size() + 1) * l * m.hidden * element;
    const std::string budget_text = s.flags.max_memory;
    const std::uint64_t budget = budget_text.empty() ? default_memory_budget() : *parse_byte_size(budget_text);
    try {
        const std::string what = extra_bytes ? "(the largest layer's weights, the activations, the logits and the pictures) for "
                                             : "(the largest layer's weights, the activations and the logits) for ";
        check_memory_budget(1, bytes, 1, budget, what + std::to_string(length) + " tokens",
                            extra_bytes ? "raise --max-memory, use fewer tokens or fewer --layers" : "raise --max-memory or use fewer tokens");
    } catch (const InputError& e) {
        throw InputError(with_flag_name(e.what(), {{"memory budget", "--max-memory"}}));
    }
}

}  // namespace

template <class T>
ModelTrace run_sequence(const ModelSession& s, const Sequence& seq, bool write_outputs, const ExtraObserver<T>& extra) {
    const ModelFlags& f = s.flags;
    ForwardOptions o;
    o.attention_layers = s.kept;
    o.threads = f.threads;
    o.all_logits = write_outputs && !f.logits.empty();
    const std::vector<std::size_t> positions = prediction_positions(s, seq);
    if (!o.all_logits) o.logit_positions = positions;
    const bool all_layers = o.all_logits || !positions.empty() || (write_outputs && !f.hidden_states.empty());
    o.layers = all_layers ? 0 : kept_layers(s.kept).back() + 1;
    check_ids(s.model.config, seq.ids, seq.source);
    o.pooled_cells = extra.pooled_cells;
    check_budget(s, seq.ids.size(), o, sizeof(T), extra.bytes);
    HeadStatsCollector<T> stats;
    RoutingCollector<T> routing(s.kept);
    std::optional<OutputFiles<T>> files;
    ObserverList<T> observers;
    observers.add(&stats);
    observers.add(&routing);
    if (write_outputs) observers.add(&files.emplace(s, seq.ids.size()));
    if (extra.observer) observers.add(extra.observer);
    std::optional<NpyOutput<T>> logits_file;  // written by the head, a block of columns at a time
    Array<T> predicted;                       // (positions, V): their rows, kept as the blocks pass
    if (o.all_logits) {
        const std::size_t rows = seq.ids.size(), v = s.model.config.vocab;
        logits_file.emplace(f.logits, Shape{rows, v});
        predicted = Array<T>::from_shape({positions.size(), v});
        o.logits_columns = [&, rows, v](std::size_t first, std::size_t count, const void* data) {
            const T* block = static_cast<const T*>(data);
            for (std::size_t r = 0; r < rows; ++r) logits_file->write(r * v + first, block + r * count, count);
            for (std::size_t i = 0; i < positions.size(); ++i)
                std::copy_n(block + positions[i] * count, count, predicted.data() + i * v + first);
        };
    }
    timeline_mark("model: forward");
    const ForwardResult<T> result = forward<T>(s.model, seq.ids, o, observers);
    timeline_mark("model: forward done");
    ModelTrace trace;
    trace.dir = f.model, trace.config = &s.model.config, trace.dtype = sizeof(T) == 4 ? "float32" : "float64";
    trace.threads = f.threads, trace.tokens = seq.tokens;
    trace.heads = std::move(stats.layers);  // not copied: 1.2 MB of fresh pages at GPT-2 small, L = 256 (3.4 ms)
    if (f.induction) std::tie(trace.induction, trace.induction_scores) = induction_run<T>(s);
    if (s.top > 0) trace.predicted = s.model.config.causal() ? "next" : "mask";
    if (result.logits || o.all_logits)  // of `positions` only, or those rows kept from every position's
        trace.predictions = predictions(s, o.all_logits ? predicted.data() : result.logits->data(), positions);
    timeline_mark("model: predictions read");
    auto path_or_null = [&](const std::string& p) { return write_outputs && !p.empty() ? nlohmann::json(p) : nlohmann::json(); };
    trace.outputs = {{"hidden_states", path_or_null(f.hidden_states)},
                     {"attentions", path_or_null(f.attentions)},
                     {"logits", path_or_null(f.logits)}};
    trace.routing = std::move(routing.layers);
    if (s.model.config.moe) {
        trace.outputs["experts"] = path_or_null(f.experts);
        trace.outputs["expert_weights"] = path_or_null(f.expert_weights);
        if (write_outputs) write_routing<T>(f, trace.routing, seq.ids.size(), s.model.config.moe->top_k);
    }
    timeline_mark("model: committing the outputs");
    if (logits_file) logits_file->commit();
    if (files) files->commit();
    timeline_mark("model: outputs committed");
    return trace;
}

template ModelTrace run_sequence<float>(const ModelSession&, const Sequence&, bool, const ExtraObserver<float>&);
template ModelTrace run_sequence<double>(const ModelSession&, const Sequence&, bool, const ExtraObserver<double>&);
