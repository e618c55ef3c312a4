// The WordPiece model (the library's models/wordpiece): greedy longest match from the left, the
// continuing pieces looked up with their prefix ("##"); a word with no split, or longer than
// max_input_chars_per_word characters, is the unk token.
#include "attntrace/tensor/errors.hpp"
#include "components.hpp"
#include "word_cache.hpp"

namespace attntrace::text {
namespace {

// Which byte strings may begin a vocabulary entry: a bit for the hash of every prefix of every
// entry, and of every continuing entry's part after its prefix. A walk along a word stops where no
// entry can go on; the longest entry lies within what it walked (the bits only ever say "maybe",
// the vocabulary answers), so the greedy search starts there instead of at the word's end.
class PrefixBits {
public:
    static constexpr std::uint64_t kWhole = 0x243F6A8885A308D3ull, kContinuing = 0x13198A2E03707344ull;  // seeds

    PrefixBits() : bits_(std::size_t(1) << (kBits - 6)) {}
    void add(std::string_view s, std::uint64_t seed) {
        for (unsigned char b : s) set(seed = step(seed, b));
    }
    // The end of the longest stretch of TEXT from START (whole characters) that may begin an entry.
    std::size_t reach(std::string_view text, std::size_t start, std::uint64_t seed) const {
        std::size_t end = start;
        for (std::size_t i = start; i < text.size(); ++i) {
            if (!get(seed = step(seed, static_cast<unsigned char>(text[i])))) break;
            if (i + 1 == text.size() || (static_cast<unsigned char>(text[i + 1]) & 0xC0) != 0x80) end = i + 1;
        }
        return end;
    }

private:
    static constexpr unsigned kBits = 21;  // 256 KiB: a few percent of false "maybe" for 30k entries
    static std::uint64_t step(std::uint64_t h, unsigned char b) { return (h + b + 1) * 0x9E3779B97F4A7C15ull; }
    void set(std::uint64_t h) { bits_[h >> (64 - kBits + 6)] |= std::uint64_t(1) << ((h >> (64 - kBits)) & 63); }
    bool get(std::uint64_t h) const { return (bits_[h >> (64 - kBits + 6)] >> ((h >> (64 - kBits)) & 63)) & 1; }
    std::vector<std::uint64_t> bits_;
};

class WordPiece final : public Model {
public:
    WordPiece(Json node, Vocab& vocab) : vocab_(vocab) {
        read_vocab(node, vocab);
        Json unk = node.get("unk_token");
        const std::string_view unk_name = unk.is_null() ? "[UNK]" : unk.str("model.unk_token");
        unk_ = vocab.find(unk_name);
        if (!unk_) throw InputError(node.file() + ": model.unk_token \"" + std::string(unk_name) + "\" is not in the vocabulary");
        Json prefix = node.get("continuing_subword_prefix");
        prefix_ = prefix.is_null() ? "##" : std::string(prefix.str("model.continuing_subword_prefix"));
        Json max = node.get("max_input_chars_per_word");
        max_chars_ = max.is_null() ? 100 : static_cast<std::size_t>(max.integer("model.max_input_chars_per_word"));
        for (std::uint32_t id = 0; id < vocab.size(); ++id) {
            const std::string_view t = vocab.at(id);
            starts_.add(t, PrefixBits::kWhole);
            if (t.size() > prefix_.size() && t.starts_with(prefix_)) starts_.add(t.substr(prefix_.size()), PrefixBits::kContinuing);
        }
    }

    void tokenize(std::string_view text, bool byte_level, std::vector<ModelToken>& out, std::size_t worker) const override {
        if (text.empty()) return;
        (void)byte_level;  // a WordPiece after a ByteLevel pre-tokenizer reads the bytes as they are
        Scratch& w = scratch_[worker];
        const std::uint64_t h = hash_bytes(text);
        std::size_t count = 0;
        const CachedToken* tokens = w.cache.find(text, h, count);
        if (!tokens) {
            w.pieces.clear();
            split_word(text, w.pieces, w.sub);
            w.cache.insert(text, h, w.pieces);
            tokens = w.pieces.data(), count = w.pieces.size();
        }
        std::uint32_t at = 0;
        for (std::size_t i = 0; i < count; at += tokens[i++].len) out.push_back({tokens[i].id, at, at + tokens[i].len});
    }

private:
    // TEXT's pieces, the longest known prefix first, the rest with the prefix; the unk token for
    // the whole word when some part has none or the word is too long.
    void split_word(std::string_view text, std::vector<CachedToken>& out, std::string& sub) const {
        std::size_t chars = 0;
        for (std::size_t i = 0; i < text.size(); i += utf8_length(decode_utf8(text, i).first)) ++chars;
        const auto whole = static_cast<std::uint32_t>(text.size());
        if (chars > max_chars_) return out.push_back({*unk_, whole});
        for (std::size_t start = 0; start < text.size();) {
            std::size_t end = starts_.reach(text, start, start == 0 ? PrefixBits::kWhole : PrefixBits::kContinuing);
            std::optional<std::uint32_t> found;
            while (start < end) {
                if (start == 0) {
                    found = vocab_.find(text.substr(0, end));
                } else {
                    sub.assign(prefix_).append(text.substr(start, end - start));
                    found = vocab_.find(sub);
                }
                if (found) break;
                do --end; while (end > start && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80);
            }
            if (!found) {  // no split: the whole word is unknown
                out.clear();
                return out.push_back({*unk_, whole});
            }
            out.push_back({*found, static_cast<std::uint32_t>(end - start)});
            start = end;
        }
    }

    const Vocab& vocab_;
    std::optional<std::uint32_t> unk_;
    std::string prefix_;
    std::size_t max_chars_ = 100;
    PrefixBits starts_;
    struct Scratch {  // one worker's
        std::string sub;
        WordCache cache;
        std::vector<CachedToken> pieces;
    };
    mutable Scratch scratch_[kWorkers];
};

}  // namespace

std::unique_ptr<Model> make_bpe(Json node, Vocab& vocab, std::size_t threads);

void read_vocab(Json model, Vocab& vocab) {
    Json v = model.get("vocab");
    if (!v.is_object()) throw InputError(model.file() + ": model.vocab: expected an object");
    std::vector<std::string_view> by_id;
    // Ids are dense: the vocabulary's and the added tokens' together number them all.
    const std::size_t limit = v.size() + vocab.added.size();
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::int64_t id = v[i].integer("model.vocab");
        if (id < 0 || static_cast<std::uint64_t>(id) >= limit)
            throw InputError(v.file() + ": model.vocab: id " + std::to_string(id) + " of \"" + std::string(v.key(i)) +
                             "\" is past the " + std::to_string(limit) + " ids of the vocabulary and added tokens");
        if (static_cast<std::size_t>(id) >= by_id.size()) by_id.resize(static_cast<std::size_t>(id) + 1);
        by_id[static_cast<std::size_t>(id)] = v.key(i);
    }
    vocab.assign(std::move(by_id));
}

std::unique_ptr<Model> make_model(Json node, Vocab& vocab, std::size_t threads) {
    if (!node.is_object()) throw InputError(node.file() + ": model: expected an object");
    std::string type = node.has("type") ? std::string(node.get("type").str("model.type")) : std::string();
    if (type.empty()) {  // files from before "type": the library tries BPE, then WordPiece, ...
        if (node.has("merges") && node.has("vocab")) type = "BPE";
        else if (node.get("vocab").is_object()) type = "WordPiece";
        else type = node.get("vocab").is_array() ? "Unigram" : "?";
    }
    if (type == "BPE") return make_bpe(node, vocab, threads);
    if (type == "WordPiece") return std::make_unique<WordPiece>(node, vocab);
    throw InputError(node.file() + ": model: type " + type + " is not supported (supported: BPE, WordPiece)");
}

}  // namespace attntrace::text
