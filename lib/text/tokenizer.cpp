// The tokenizer: tokenizer.json read into its components, and the library's encode pipeline:
// added tokens split out of the raw text -> normalizer -> added tokens split out of the normalized
// text -> pre-tokenizer -> model -> post-processor.
#include "attntrace/text/tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/text/gguf_vocabulary.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "components.hpp"
#include "added_tokens.hpp"
#include "tokenizer_impl.hpp"

namespace attntrace {
namespace fs = std::filesystem;
using namespace text;


namespace text {

std::string type_of(Json node, const char* what) {
    if (!node.is_object() || !node.get("type").is_string())
        throw InputError(node.file() + ": " + what + ": expected an object with a \"type\"");
    return std::string(node.get("type").str("type"));
}

void unsupported(Json node, const char* what, const char* supported) {
    throw InputError(node.file() + ": " + what + " " + type_of(node, what) + " is not supported (supported: " + supported + ")");
}

}  // namespace text

namespace {

// tokenizer_config.json's clean_up_tokenization_spaces (false when absent).
bool read_clean_up(const fs::path& dir) {
    const fs::path config = dir / "tokenizer_config.json";
    std::error_code ec;
    if (!fs::is_regular_file(config, ec)) return false;
    const FileBytes bytes = FileBytes::open(config.string());
    const JsonDoc doc(bytes.bytes(), config.string());
    const Json flag = doc.root().get("clean_up_tokenization_spaces");
    return flag.kind() == Json::Kind::boolean && flag.boolean("clean_up_tokenization_spaces");
}

std::vector<AddedToken> read_added(Json list) {
    std::vector<AddedToken> out;
    for (std::size_t i = 0; i < list.size(); ++i) {
        Json t = list[i];
        auto flag = [&](const char* name, bool dflt) { Json j = t.get(name); return j.is_null() ? dflt : j.boolean(name); };
        AddedToken a;
        const std::int64_t id = t.get("id").integer("added_tokens[].id");
        if (id < 0 || id > 0x7FFFFFFF) throw InputError(t.file() + ": added_tokens[].id: id " + std::to_string(id) + " out of range");
        a.id = static_cast<std::uint32_t>(id);
        a.content = std::string(t.get("content").str("added_tokens[].content"));
        a.single_word = flag("single_word", false);
        a.lstrip = flag("lstrip", false);
        a.rstrip = flag("rstrip", false);
        a.normalized = flag("normalized", true);
        a.special = flag("special", false);
        if (!a.content.empty()) out.push_back(std::move(a));
    }
    return out;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path, std::size_t threads) {
    if (is_gguf_path(path)) return from_gguf(read_gguf_vocabulary(*GgufFiles::open(path)), path);
    std::error_code ec;
    const bool folder = fs::is_directory(path, ec);
    const std::string file = folder ? (fs::path(path) / "tokenizer.json").string() : path;
    if (folder && !fs::exists(file, ec)) throw InputError(path + ": no tokenizer.json in this folder");
    auto impl = std::make_unique<Impl>(file, FileBytes::open(file));
    impl->threads = threads;
    impl->build();
    impl->clean_up_spaces = read_clean_up(fs::path(file).parent_path());
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(std::string json, const std::string& name) {
    auto impl = std::make_unique<Impl>(name, std::move(json));
    impl->build();
    return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::build() {
    const Json root = doc.root();
    if (!root.is_object()) throw InputError(file + ": expected a JSON object (a tokenizer.json)");
    if (!root.has("model")) throw InputError(file + ": no \"model\" (is it a tokenizer.json?)");
    vocab.added = read_added(root.get("added_tokens"));
    model = make_model(root.get("model"), vocab, threads);
    vocab.index_all(file);
    normalizer = make_normalizer(root.get("normalizer"));
    pre_tokenizer = make_pre_tokenizer(root.get("pre_tokenizer"));
    post_processor = make_post_processor(root.get("post_processor"), vocab);
    decoder = make_decoder(root.get("decoder"));
    style = read_token_style(root.get("decoder"));
    added = AddedTokens(vocab.added, normalizer.get());
}

// The model over pieces [FROM, TO) of PIECES, appended to OUT, as WORKER (Model::tokenize).
void Tokenizer::Impl::model_range(const Pieces& pieces, std::size_t from, std::size_t to, std::size_t worker, Tokens& out) const {
    std::vector<ModelToken> tokens;
    std::vector<std::size_t> hints(pieces.strs.size(), 0);  // this worker's, for original_span
    for (std::size_t i = from; i < to; ++i) {
        const Piece& piece = pieces.pieces[i];
        tokens.clear();
        model->tokenize(pieces.text(piece), pieces.byte_level, tokens, worker);
        const NormStr& s = pieces.strs[piece.str];
        for (const ModelToken& t : tokens)
            out.push_back({t.id, s.original_span(piece.begin + t.begin, piece.begin + t.end, hints[piece.str])});
    }
}

// Many pieces (a text of 64 KB and more) are cut in two halves, the second one tokenized by a
// second worker (each with its own cache of words) into a block of its own, appended after.
void Tokenizer::Impl::run_model(Pieces& pieces, Tokens& out) const {
    constexpr std::size_t kPiecesPerWorker = 8192;
    const std::size_t n = pieces.pieces.size();
    const std::size_t workers = std::min({Model::kWorkers, thread_count(threads), n / kPiecesPerWorker});
    if (workers < 2) return model_range(pieces, 0, n, 0, out);
    const std::size_t half = n / 2;
    Tokens rest;
    rest.reserve(out.capacity() - out.size());  // a block of 4 MiB and more is faulted in as it is used
    parallel_for(2, 2, [&](std::size_t task, std::size_t) {
        if (task == 0) model_range(pieces, 0, half, 0, out);
        else model_range(pieces, half, n, 1, rest);
    });
    out.insert(out.end(), rest.begin(), rest.end());
}

// One stretch of the text between the added tokens matched in the raw text.
void Tokenizer::Impl::encode_segment(NormStr segment, Tokens& out) const {
    if (normalizer) {
        normalizer->normalize(segment);
        Rewrite::release_spares();
    }
    for (const AddedTokens::Split& split : added.split(segment.text, true)) {
        if (split.token) {
            const auto [lead, trail] = space_ends(std::string_view(segment.text).substr(split.from, split.to - split.from));
            out.push_back({*split.token, segment.original_span(split.from, split.to), lead, trail});
            continue;
        }
        Pieces pieces;
        const bool whole = split.from == 0 && split.to == segment.text.size();
        pieces.strs.push_back(whole ? std::move(segment) : segment.slice(split.from, split.to));
        if (!pieces.strs[0].text.empty()) pieces.pieces.push_back({0, 0, static_cast<std::uint32_t>(pieces.strs[0].text.size())});
        if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
        run_model(pieces, out);
    }
}

// The tokenizers library's encode: added tokens in the raw text, each stretch between them
// normalized and pre-tokenized, then the post-processor.
void Tokenizer::Impl::encode_pipeline(std::string_view text, bool add_special_tokens, text::Tokens& tokens) const {
    for (const AddedTokens::Split& split : added.split(text, false)) {
        if (split.token) {
            const auto [lead, trail] = space_ends(text.substr(split.from, split.to - split.from));
            tokens.push_back({*split.token, {static_cast<std::uint32_t>(split.from), static_cast<std::uint32_t>(split.to)}, lead, trail});
        } else {
            encode_segment(NormStr::original(text, split.from, split.to), tokens);
        }
    }
    if (post_processor) post_processor->process(tokens, add_special_tokens, vocab);
}

Tokens Tokenizer::Impl::encode_tokens(std::string_view text, bool add_special_tokens, const std::string& source) const {
    if (const auto bad = first_invalid_utf8(text))
        throw InputError(source + ": invalid UTF-8 at byte " + std::to_string(*bad));
    Tokens tokens;
    // A token covers a byte or more (but the few the post-processor adds): room for one a byte where
    // that is a block of 4 MiB or more (a 200 KB text), whose pages are faulted in only as they are
    // used (tensor/buffer.hpp), so that the tokens are never copied to a larger block (GPT-2 makes
    // 620k of them from 1 MB of mixed scripts). Below, room for one every 2 bytes (English runs at
    // ~4 bytes a token, CJK at 1-2): a smaller block is populated whole at once.
    constexpr std::size_t kLazyBlock = std::size_t{4} << 20;
    tokens.reserve((text.size() * sizeof(Token) >= kLazyBlock ? text.size() : text.size() / 2) + 16);
    if (gguf) gguf->encode(text, add_special_tokens, tokens);
    else encode_pipeline(text, add_special_tokens, tokens);
    return tokens;
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens, const std::string& source) const {
    const Tokens tokens = impl_->encode_tokens(text, add_special_tokens, source);
    Encoding e;
    e.ids.reserve(tokens.size());
    e.tokens.reserve(tokens.size());
    e.offsets.reserve(tokens.size());
    for (const Token& t : tokens) {
        e.ids.push_back(t.id);
        e.tokens.push_back(impl_->vocab.token(t.id).value_or(std::string_view()));
        e.offsets.emplace_back(t.offsets.begin, t.offsets.end);
    }
    return e;
}

std::string Tokenizer::decode(std::span<const std::uint32_t> ids) const {
    std::vector<std::string> tokens;
    for (std::uint32_t id : ids) {
        const auto t = impl_->vocab.token(id);
        if (!t) throw InputError("decode: id " + std::to_string(id) + " is not in " + impl_->file + " (ids 0 to " +
                                 std::to_string(vocab_size() - 1) + ")");
        tokens.emplace_back(*t);
    }
    if (impl_->gguf) return impl_->gguf->decode(ids);
    std::string out;
    if (impl_->decoder) {
        impl_->decoder->decode_chain(tokens);
        for (const std::string& t : tokens) out += t;
    } else {
        for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    }
    return impl_->clean_up_spaces ? clean_up_tokenization(std::move(out), false) : out;
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocab.total_size(); }

std::optional<std::string> Tokenizer::id_to_token(std::uint32_t id) const {
    const auto t = impl_->vocab.token(id);
    return t ? std::optional<std::string>(*t) : std::nullopt;
}

std::optional<std::uint32_t> Tokenizer::token_to_id(std::string_view token) const {
    for (const AddedToken& a : impl_->vocab.added)  // added first, then the model's
        if (a.content == token) return a.id;
    return impl_->vocab.find(token);
}

std::vector<std::uint32_t> Tokenizer::special_ids() const {
    std::vector<std::uint32_t> out;
    for (const AddedToken& a : impl_->vocab.added)
        if (a.special) out.push_back(a.id);
    return out;
}
const std::string& Tokenizer::file() const { return impl_->file; }
void Tokenizer::set_threads(std::size_t threads) { impl_->threads = threads; }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

}  // namespace attntrace
