#pragma once
// The components of a tokenizer.json pipeline, each a small type built from its JSON node and
// named as in the file (the `tokenizers` library's names). An unknown `type` is an InputError
// naming it and the supported ones.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json_view.hpp"
#include "normalized.hpp"
#include "unicode.hpp"
#include "vocab.hpp"

namespace attntrace::text {

// ---- normalizers: rewrite a NormStr in place ------------------------------------------------------
struct Normalizer {
    virtual ~Normalizer() = default;
    virtual void normalize(NormStr& s) const = 0;
};
std::unique_ptr<Normalizer> make_normalizer(Json node);  // nullptr for null

// ---- pre-tokenizers: split the text into pieces --------------------------------------------------
// A piece is bytes [begin, end) of strs[str]; after a ByteLevel pre-tokenizer, byte_level is set:
// the model sees each byte as its byte-level character (GPT-2's bytes_to_unicode).
struct Piece {
    std::uint32_t str, begin, end;
};
struct Pieces {
    std::vector<NormStr> strs;
    Buffer<Piece> pieces;
    bool byte_level = false;
    std::string_view text(const Piece& p) const { return std::string_view(strs[p.str].text).substr(p.begin, p.end - p.begin); }
    // Makes P a string of its own (for a transformation) and returns it.
    NormStr& own(Piece& p);
};
struct PreTokenizer {
    virtual ~PreTokenizer() = default;
    virtual void pre_tokenize(Pieces& p) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(Json node);
// How a Split keeps what its pattern matched (the library's SplitDelimiterBehavior).
enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
// The library's split: MATCHES (ranges of [0, n) that matched, in order) turned into the kept ranges.
std::vector<std::pair<std::size_t, std::size_t>> split_ranges(
    std::size_t n, const std::vector<std::pair<std::size_t, std::size_t>>& matches, Behavior b, bool invert);
// The same, appended to OUT.
void split_ranges(std::size_t n, const std::vector<std::pair<std::size_t, std::size_t>>& matches, Behavior b, bool invert,
                  std::vector<std::pair<std::size_t, std::size_t>>& out);
// GPT-2's byte-to-character table: the character each byte stands for in a byte-level vocabulary.
const std::string& byte_level_char(unsigned char b);
// The byte a byte-level character stands for; -1 when C is none.
int byte_level_byte(char32_t c);

// ---- models: a piece's text -> tokens ------------------------------------------------------------
struct ModelToken {
    std::uint32_t id, begin, end;  // [begin, end): bytes of the piece
};
struct Model {
    // Callers that may tokenize at once, each under its own WORKER index (each keeps its own cache
    // of the words it has seen and its own scratch).
    static constexpr std::size_t kWorkers = 2;
    virtual ~Model() = default;
    // Appends the tokens of TEXT (byte-level characters when BYTE_LEVEL) to OUT. WORKER < kWorkers;
    // two calls at once must give two different ones.
    virtual void tokenize(std::string_view text, bool byte_level, std::vector<ModelToken>& out, std::size_t worker) const = 0;
};
// The model and its vocabulary (filled in VOCAB); THREADS (thread_count's: 0 is every core) for
// reading it.
std::unique_ptr<Model> make_model(Json node, Vocab& vocab, std::size_t threads);
// VOCAB := the model's "vocab" object {token: id} (vocab.added already read: ids must be below
// the count of both).
void read_vocab(Json model, Vocab& vocab);

// ---- post-processors ------------------------------------------------------------------------------
struct Token {
    std::uint32_t id;
    Span offsets;
    std::int32_t lead = -1, trail = -1;  // spaces at the ends of the token's text; -1: its vocab string's
};
using Tokens = Buffer<Token>;
struct PostProcessor {
    virtual ~PostProcessor() = default;
    virtual void process(Tokens& tokens, bool add_special, const Vocab& vocab) const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(Json node, const Vocab& vocab);
// The library's byte_level::process_offsets (trim_offsets): spaces at a token's ends leave its span.
void trim_offsets(Tokens& tokens, bool add_prefix_space, const Vocab& vocab);
// Leading and trailing spaces (byte-level 'Ġ' or whitespace) of S, in characters.
std::pair<int, int> space_ends(std::string_view s);

// ---- decoders ------------------------------------------------------------------------------------
struct Decoder {
    virtual ~Decoder() = default;
    virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> make_decoder(Json node);
// transformers' clean_up_tokenization (with DO_NOT, the WordPiece decoder's cleanup: " do not" -> " don't").
std::string clean_up_tokenization(std::string s, bool do_not);

// The supported types, for messages: "supported: ByteLevel, Split, ...".
[[noreturn]] void unsupported(Json node, const char* what, const char* supported);
std::string type_of(Json node, const char* what);

}  // namespace attntrace::text
