#pragma once
// A checkpoint's own tokenizer, read from its tokenizer.json: the Hugging Face `tokenizers`
// pipeline normalizer -> pre-tokenizer -> model -> post-processor, and a decoder, giving the ids
// AutoTokenizer gives (docs/tokenize.md lists the components supported and the conformance
// figures). Unicode comes from utf8proc and PCRE2, loaded on first use.
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attntrace/tensor/buffer.hpp"

namespace attntrace {

struct GgufVocabulary;  // gguf_vocabulary.hpp

// The tokens of one text. L = number of tokens (a quarter of a million for 1 MB of English: the
// arrays take the project's allocator, tensor/buffer.hpp, populated at once instead of page by page).
struct Encoding {
    template <class T>
    using List = std::vector<T, BufferAllocator<T>>;
    List<std::uint32_t> ids;        // (L)
    List<std::string_view> tokens;  // (L) each id's vocabulary string (in the Tokenizer, valid while it lives)
    List<std::pair<std::size_t, std::size_t>> offsets;  // (L) byte span of the input, [b0, b1)
};

class Tokenizer {
public:
    // PATH is a checkpoint folder holding tokenizer.json, or the tokenizer.json itself; the
    // folder's tokenizer_config.json (if any) gives clean_up_tokenization_spaces. Or a GGUF file
    // (io/gguf.hpp is_gguf_path; a split model's first file): the tokenizer of its metadata
    // (from_gguf). Throws InputError naming the file and the problem (missing, not JSON, an
    // unsupported component with the supported ones).
    // THREADS: as set_threads (a BPE's merges are read in two halves at once where there are many).
    static Tokenizer load(const std::string& path, std::size_t threads = 0);
    // The tokenizer whose tokenizer.json text is JSON; NAME stands for the file in messages. No
    // tokenizer_config.json is read (clean_up_tokenization_spaces is off).
    static Tokenizer from_json(std::string json, const std::string& name);
    // The tokenizer a GGUF file's metadata describes (gguf_vocabulary.hpp), VOCABULARY moved in,
    // FILE naming it in messages: encode is llama.cpp's llama_tokenize with parse_special false
    // (add_special_tokens its add_special), each token's offsets the bytes of the text it stands
    // for; decode is llama_detokenize(remove_special false, unparse_special true). Throws
    // InputError "FILE: ..." for a vocabulary llama.cpp refuses or attntrace does not support
    // (another tokenizer.ggml.model, a pre-tokenizer name llama.cpp does not know or whose regexes
    // attntrace lacks, arrays shorter than the token list, duplicate tokens).
    static Tokenizer from_gguf(GgufVocabulary vocabulary, const std::string& file);

    // The tokens of TEXT as tokenizer(text) gives them (add_special_tokens as the fast tokenizer's
    // post-processor adds them). Throws InputError "SOURCE: invalid UTF-8 at byte N". Not for two
    // threads at once on one Tokenizer: it keeps a cache of the words it has seen.
    Encoding encode(std::string_view text, bool add_special_tokens, const std::string& source) const;
    // encode(TEXT, ...) written to OUT as write_encoding_json / write_encoding_text write it, straight
    // from the tokenizer's tokens: without the Encoding's three arrays in between (36 bytes a token,
    // 22 MB for 1 MB of mixed scripts in GPT-2's tokens, every page of it faulted in and zeroed).
    void encode_json(std::string_view text, bool add_special_tokens, const std::string& source, std::ostream& out) const;
    void encode_text(std::string_view text, bool add_special_tokens, const std::string& source, std::ostream& out) const;

    // What transformers' tokenizer.decode(IDS) returns. Throws InputError "decode: id N is not in
    // FILE (ids 0 to M)" for an id out of range.
    std::string decode(std::span<const std::uint32_t> ids) const;

    std::size_t vocab_size() const;        // model vocabulary and added tokens: ids [0, vocab_size)
    // The vocabulary string of ID ("Ġcat", "[MASK]"); nullopt for an id without one.
    std::optional<std::string> id_to_token(std::uint32_t id) const;
    // The id of the vocabulary or added token TOKEN; nullopt when there is none.
    std::optional<std::uint32_t> token_to_id(std::string_view token) const;
    // The ids of the added tokens marked "special" (<|endoftext|>, [CLS], <mask> ...).
    std::vector<std::uint32_t> special_ids() const;
    const std::string& file() const;       // the tokenizer.json read
    // The threads encode may use (0, the default: every core this process may use): a text of
    // 64 KB and more is tokenized by the model in two halves at once (at most 2 threads).
    void set_threads(std::size_t threads);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    struct Impl;
    const Impl& impl() const { return *impl_; }  // for the text subsystem's own files

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The texts of a JSON Lines file (its BYTES, named FILE): one JSON string a line, or an object
// whose "text" member is one; blank lines are skipped. Throws InputError "FILE:LINE: ..." naming
// the first line that is neither.
std::vector<std::string> json_lines_texts(std::string_view bytes, const std::string& file);

// The pieces GPT-2's regex (the ByteLevel pre-tokenizer's) cuts TEXT (valid UTF-8) into, as byte
// ranges: by an ASCII fast path where ASCII bytes alone decide a piece, by PCRE2 elsewhere; with
// FAST false by PCRE2 alone, the reference the fast path is tested against.
std::vector<std::pair<std::size_t, std::size_t>> gpt2_regex_splits(std::string_view text, bool fast);

// The text format: one token a line, "index\tid\ttoken\tcovered text" (both with C-style escapes),
// then "N tokens". INPUT is the text encoded.
std::string encoding_text(const Encoding& e, std::string_view input);
// {"ids": [...], "tokens": [...], "offsets": [[b0, b1], ...]} and a newline.
std::string encoding_json(const Encoding& e);
// The same two forms written to OUT as they are made, a few hundred KiB at a time.
void write_encoding_text(const Encoding& e, std::string_view input, std::ostream& out);
void write_encoding_json(const Encoding& e, std::ostream& out);
// Escapes \t \n \r \\ and other control bytes (\xNN); everything else as it is.
std::string c_escape(std::string_view s);

}  // namespace attntrace
