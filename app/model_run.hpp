#pragma once
// One `attntrace model` run from its flags: the token ids (--ids, or the checkpoint's tokenizer on
// --text / --text-file / each line of --each-line), the .npy outputs streamed as the forward
// computes them, the predictions, the induction run and the trace.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attention_flags.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/model/model_trace.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/text/tokenizer.hpp"

struct ModelFlags {
    std::string model;                 // the checkpoint folder
    std::optional<std::string> text;   // --text S
    std::string text_file, ids, each_line;
    bool no_special = false;           // --no-special-tokens
    std::string layers;                // --layers SPEC
    std::string hidden_states, attentions, logits;
    std::string experts, expert_weights;  // a MoE model's routing: (kept MoE layers, L, K) ids / weights
    std::optional<std::size_t> top;    // --top K (default 5 for a decoder, 0 for a masked LM)
    std::optional<std::size_t> induction;
    std::string seed = "0";
    Precision dtype = Precision::f32;
    TraceFormat format = TraceFormat::text;
    std::size_t threads = 0;
    std::string max_memory;
    // issue 28's pictures, refused for now
    bool heatmap = false;
    std::string plot, report, rollout, scale;
};

// The ids of one sequence and the tokens the trace shows.
struct Sequence {
    std::vector<std::uint32_t> ids;
    std::vector<attntrace::TraceToken> tokens;
    std::string source;  // "--ids", "--text", "--text-file notes.txt", "line 3 of corpus.txt"
    std::string text;    // the text tokenized ("" for ids)
};

// The bytes of FILE ("-": stdin); InputError naming it.
std::string read_all(const std::string& file);

// --ids VALUE: a comma list "15496,995" (UsageError when malformed) or a 1-D integer .npy
// (InputError when it is not one).
std::vector<std::uint32_t> read_ids(const std::string& value);

// The sequence of IDS, its tokens shown through TOKENIZER when there is one.
Sequence sequence_from_ids(std::vector<std::uint32_t> ids, const attntrace::Tokenizer* tokenizer, std::string source);

// TEXT tokenized (InputError "SOURCE: empty text", or invalid UTF-8).
Sequence sequence_from_text(const attntrace::Tokenizer& tokenizer, std::string_view text, bool special_tokens,
                            std::string source);

// The mask token's id: config.json's mask_token_id, else TOKENIZER's [MASK] / <mask>; nullopt when
// neither names one.
std::optional<std::uint32_t> mask_token_id(const attntrace::Model& model, const attntrace::Tokenizer* tokenizer);

// The tokenizer of MODEL: a checkpoint folder's tokenizer.json, or a GGUF file's metadata (as
// llama.cpp tokenizes), read when there is one, and required when NEEDED_BY names the flag that
// needs it ("" when none does; then a GGUF tokenizer attntrace cannot read is left out).
std::optional<attntrace::Tokenizer> model_tokenizer(const std::string& model, const std::string& needed_by);

// Everything a run needs besides its sequence: the model, the tokenizer (when the folder has
// one), the layers kept, and what the flags ask for.
struct ModelSession {
    const ModelFlags& flags;
    attntrace::Model model;
    std::optional<attntrace::Tokenizer> tokenizer;
    // A GGUF file's tokenizer when only the labels need it (--ids, no --induction, a causal model
    // or --top 0): read on a side thread while the forward runs; finish_tokenizer() puts it in
    // TOKENIZER. Null otherwise (TOKENIZER read before the run).
    std::unique_ptr<attntrace::Alongside<std::optional<attntrace::Tokenizer>>> tokenizer_reading;
    std::vector<bool> kept;  // (N) --layers
    std::size_t top = 0;     // predictions per position
};

// Opens MODEL, its tokenizer (required with TEXT_NEEDED), and checks the flags against it
// (UsageError: --layers, --top or --logits on a model without a head).
ModelSession open_session(const ModelFlags& flags, bool text_needed);

// Waits for the tokenizer read alongside the run (ModelSession::tokenizer_reading), if any, and
// puts it in session.tokenizer. Returns whether there was one to wait for (its labels not yet given).
bool finish_tokenizer(ModelSession& session);

// The tokens' labels (token, text) and the candidates' texts, through TOKENIZER (ids past its
// vocabulary left as they are).
void label_tokens(std::vector<attntrace::TraceToken>& tokens, const attntrace::Tokenizer& tokenizer);
void label_predictions(std::vector<attntrace::Prediction>& predictions, const attntrace::Tokenizer& tokenizer);

// One more observer of the forward (the pictures'), the cells per axis it wants each kept layer's
// weights pooled to, and the bytes it holds (counted against --max-memory).
template <class T>
struct ExtraObserver {
    attntrace::ModelObserver<T>* observer = nullptr;
    std::size_t pooled_cells = 0;
    std::uint64_t bytes = 0;
};

// Runs SESSION on SEQUENCE: the forward (and the induction run) with the outputs streamed when
// WRITE_OUTPUTS, then the outputs put in place. Returns the trace.
template <class T>
attntrace::ModelTrace run_sequence(const ModelSession& session, const Sequence& sequence, bool write_outputs,
                                   const ExtraObserver<T>& extra = {});
