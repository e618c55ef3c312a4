#pragma once
// The tokenizer's parts (tokenizer.hpp's Tokenizer::Impl), for the text subsystem's own files:
// tokenizer.cpp builds and runs them, token_display.cpp reads the vocabulary and its style.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/text/token_display.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "added_tokens.hpp"
#include "components.hpp"
#include "gguf_tokenizer.hpp"

namespace attntrace {

struct Tokenizer::Impl {
    std::string file;
    std::optional<FileBytes> bytes;  // the file's bytes (the vocabulary's views point into them) ...
    std::string owned;               // ... or the JSON text given to from_json
    text::JsonDoc doc;
    text::Vocab vocab;
    std::unique_ptr<text::Normalizer> normalizer;
    std::unique_ptr<text::PreTokenizer> pre_tokenizer;
    std::unique_ptr<text::Model> model;
    std::unique_ptr<text::PostProcessor> post_processor;
    std::unique_ptr<text::Decoder> decoder;
    std::unique_ptr<text::GgufTokenizer> gguf;  // a GGUF file's tokenizer instead of the pipeline
    text::AddedTokens added;
    bool clean_up_spaces = false;
    TokenStyle style;  // how the vocabulary spells text (token_display.hpp)
    std::size_t threads = 0;  // the model's workers at most (thread_count: 0 is every core), of Model::kWorkers

    Impl(std::string f, FileBytes b) : file(std::move(f)), bytes(std::move(b)), doc(bytes->bytes(), file) {}
    Impl(std::string name, std::string json) : file(std::move(name)), owned(std::move(json)), doc(owned, file) {}
    void build();  // the components from doc
    // The tokens of TEXT (encode's, before they become an Encoding).
    text::Tokens encode_tokens(std::string_view text, bool add_special_tokens, const std::string& source) const;
    void encode_pipeline(std::string_view text, bool add_special_tokens, text::Tokens& out) const;
    void encode_segment(text::NormStr segment, text::Tokens& out) const;
    void run_model(text::Pieces& pieces, text::Tokens& out) const;
    void model_range(const text::Pieces& pieces, std::size_t from, std::size_t to, std::size_t worker, text::Tokens& out) const;
};

namespace text {

// The style the decoder node DECODER implies (token_display.hpp's token_style).
TokenStyle read_token_style(Json decoder);

}  // namespace text

}  // namespace attntrace
