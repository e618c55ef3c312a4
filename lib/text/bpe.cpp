// The BPE model (the library's models/bpe): merges by rank with a priority queue, byte fallback
// (<0xNN> tokens), unk fusing, ignore_merges, continuing_subword_prefix / end_of_word_suffix, and a
// cache of the words already seen.
#include <array>
#include <cstdio>
#include <exception>
#include <queue>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "components.hpp"
#include "merge_table.hpp"
#include "word_cache.hpp"

namespace attntrace::text {
namespace {

// A symbol of a word being merged, for long words (the library's heap-based merge_all).
struct Symbol {
    std::uint32_t id, len;  // len: bytes of the piece it covers
    std::int32_t prev, next;
};

struct Merge {
    std::uint32_t pos, rank, id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // min-heap
};

class Bpe final : public Model {
public:
    Bpe(Json node, Vocab& vocab, std::size_t threads) : vocab_(vocab) {
        read_vocab(node, vocab);
        read_options(node);
        read_merges(node.get("merges"), threads);
        for (int b = 0; b < 256; ++b) byte_char_ids_[b] = vocab_.find(byte_level_char(static_cast<unsigned char>(b)));
    }

    // TEXT's tokens: from the cache (keyed by TEXT's own bytes), else merged and remembered.
    void tokenize(std::string_view text, bool byte_level, std::vector<ModelToken>& out, std::size_t worker) const override {
        if (text.empty()) return;
        Scratch& w = scratch_[worker];
        WordCache& cache = w.cache[byte_level];
        const std::uint64_t h = hash_bytes(text);
        std::size_t count = 0;
        if (const CachedToken* hit = cache.find(text, h, count)) return emit(hit, count, out);
        std::vector<CachedToken>& tokens = w.tokens;
        tokens.clear();
        tokenize_word(text, byte_level, tokens, w);
        emit(tokens.data(), tokens.size(), out);
        cache.insert(text, h, tokens);
    }

private:
    static constexpr std::uint32_t kNoMerge = ~std::uint32_t(0);
    static constexpr std::size_t kLinearMerge = 96;  // longer words merge with a heap
    struct Scratch {  // one worker's
        WordCache cache[2];  // by byte_level
        std::vector<CachedToken> tokens;
        std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
        std::string mapped, piece;
    };

    void read_options(Json node);
    void read_merges(Json merges, std::size_t threads);
    void merge_ids(Json merges, std::size_t from, std::size_t to, std::vector<std::array<std::uint32_t, 3>>& ids) const;

    static void emit(const CachedToken* tokens, std::size_t count, std::vector<ModelToken>& out) {
        std::uint32_t at = 0;
        for (std::size_t i = 0; i < count; ++i) {
            out.push_back({tokens[i].id, at, at + tokens[i].len});
            at += tokens[i].len;
        }
    }

    void tokenize_word(std::string_view text, bool byte_level, std::vector<CachedToken>& tokens, Scratch& w) const {
        if (byte_level && !ignore_merges_ && symbols_from_bytes(text, tokens)) {  // no need of the mapped word
            if (tokens.size() > kLinearMerge) return merge_long(tokens);
            return merge_short(tokens, w.pairs);
        }
        std::string_view word = text;  // the word as the vocabulary spells it
        if (byte_level) {
            w.mapped.clear();
            for (unsigned char b : text) w.mapped += byte_level_char(b);
            word = w.mapped;
        }
        if (ignore_merges_)
            if (const auto id = vocab_.find(word)) return tokens.push_back({*id, static_cast<std::uint32_t>(text.size())});
        tokens.clear();
        if (!(byte_level && symbols_from_bytes(text, tokens))) initial_symbols(word, byte_level, tokens, w.piece);
        if (tokens.size() > kLinearMerge) merge_long(tokens);
        else merge_short(tokens, w.pairs);
    }

    // Byte-level symbols straight from the bytes (no prefix or suffix, every byte's character in
    // the vocabulary); false when that does not apply.
    bool symbols_from_bytes(std::string_view text, std::vector<CachedToken>& symbols) const {
        if (!prefix_.empty() || !suffix_.empty()) return false;
        for (unsigned char b : text) {
            if (!byte_char_ids_[b]) return symbols.clear(), false;
            symbols.push_back({*byte_char_ids_[b], 1});
        }
        return true;
    }

    // The initial symbols of WORD: one per character (or its bytes' <0xNN> tokens, or unk).
    void initial_symbols(std::string_view word, bool byte_level, std::vector<CachedToken>& symbols, std::string& s) const;

    // The rank and result of merging A and B: {kNoMerge, 0} when no merge joins them.
    std::pair<std::uint32_t, std::uint32_t> merge_of(std::uint32_t a, std::uint32_t b) const {
        const auto* m = table_.find(a, b);
        return m ? *m : std::pair<std::uint32_t, std::uint32_t>{kNoMerge, 0};
    }
    // The lowest-ranked adjacent pair first, the leftmost among equals, until none merges: what
    // the library's heap gives, by a scan of the pairs' ranks (short words). PAIRS: scratch.
    void merge_short(std::vector<CachedToken>& symbols, std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) const;
    void merge_long(std::vector<CachedToken>& symbols) const;

    const Vocab& vocab_;
    MergeTable table_;
    std::string prefix_, suffix_;
    bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
    std::optional<std::uint32_t> unk_;
    std::optional<std::uint32_t> byte_ids_[256];       // <0xNN> tokens, for byte_fallback
    std::optional<std::uint32_t> byte_char_ids_[256];  // each byte's byte-level character
    mutable Scratch scratch_[kWorkers];
};

void Bpe::read_options(Json node) {
    auto opt_str = [&](const char* name) -> std::string {
        Json j = node.get(name);
        return j.is_null() ? std::string() : std::string(j.str(name));
    };
    auto opt_bool = [&](const char* name) { Json j = node.get(name); return !j.is_null() && j.boolean(name); };
    prefix_ = opt_str("continuing_subword_prefix");
    suffix_ = opt_str("end_of_word_suffix");
    byte_fallback_ = opt_bool("byte_fallback");
    fuse_unk_ = opt_bool("fuse_unk");
    ignore_merges_ = opt_bool("ignore_merges");
    Json dropout = node.get("dropout");
    if (!dropout.is_null() && dropout.kind() == Json::Kind::number && dropout.integer("model.dropout") != 0)
        throw InputError(node.file() + ": model.dropout: BPE dropout is random; only null or 0 is supported");
    if (Json unk = node.get("unk_token"); !unk.is_null()) {
        unk_ = vocab_.find(unk.str("model.unk_token"));
        if (!unk_) throw InputError(node.file() + ": model.unk_token \"" + std::string(unk.str("")) + "\" is not in the vocabulary");
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[b] = vocab_.find(name);
    }
}

// The ids (left, right, merged) of merges [FROM, TO) into IDS, by rank; throws InputError for the
// first one that is not "a b" of two vocabulary tokens whose join is one too.
void Bpe::merge_ids(Json merges, std::size_t from, std::size_t to, std::vector<std::array<std::uint32_t, 3>>& ids) const {
    std::string merged;
    std::uint32_t next_id = 0;  // the id after the last merge's result: likely this one's
    for (std::size_t rank = from; rank < to; ++rank) {
        std::string_view a, b;
        Json m = merges[rank];
        if (m.is_string()) {
            const std::string_view s = m.str("model.merges");
            const std::size_t space = s.find(' ');
            if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos)
                throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: \"" + std::string(s) + "\" is not two tokens");
            a = s.substr(0, space), b = s.substr(space + 1);
        } else if (m.is_array() && m.size() == 2) {
            a = m[0].str("model.merges"), b = m[1].str("model.merges");
        } else {
            throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: expected \"a b\" or [\"a\", \"b\"]");
        }
        merged.assign(a);
        merged.append(b.substr(std::min(prefix_.size(), b.size()) * (b.substr(0, prefix_.size()) == prefix_)));
        const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(merged, next_id);
        if (!ia || !ib || !im)
            throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: \"" +
                             std::string(!ia ? a : !ib ? b : std::string_view(merged)) + "\" is not in the vocabulary");
        ids[rank] = {*ia, *ib, *im};
        next_id = *im + 1;
    }
}

// The look-ups (most of the reading: GPT-2's 50k merges, three each) in two halves at once where
// there are many, the table then filled in rank order; the error of the lowest rank is the one told.
void Bpe::read_merges(Json merges, std::size_t threads) {
    if (!merges.is_array()) throw InputError(merges.file() + ": model.merges: expected an array");
    const std::size_t n = merges.size(), halves = n >= 16384 && thread_count(threads) >= 2 ? 2 : 1;
    std::vector<std::array<std::uint32_t, 3>> ids(n);  // (left, right, merged) by rank
    std::exception_ptr errors[2];
    parallel_for(halves, halves, [&](std::size_t h, std::size_t) {
        try {
            merge_ids(merges, h * n / halves, (h + 1) * n / halves, ids);
        } catch (...) {
            errors[h] = std::current_exception();
        }
    });
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    table_.reserve(n);
    for (std::size_t rank = 0; rank < n; ++rank) table_.insert(ids[rank][0], ids[rank][1], static_cast<std::uint32_t>(rank), ids[rank][2]);
}

void Bpe::initial_symbols(std::string_view word, bool byte_level, std::vector<CachedToken>& symbols, std::string& s) const {
    bool unk_waits = false;  // an unk token (unk_id, unk_len) waiting to be added
    std::uint32_t unk_id = 0, unk_len = 0;
    for (std::size_t i = 0; i < word.size();) {
        const std::size_t clen = utf8_length(decode_utf8(word, i).first);
        const auto src_len = static_cast<std::uint32_t>(byte_level ? 1 : clen);
        s.clear();
        if (i > 0) s += prefix_;
        s.append(word.substr(i, clen));
        if (i + clen == word.size()) s += suffix_;
        i += clen;
        if (const auto id = vocab_.find(s)) {
            if (unk_waits) symbols.push_back({unk_id, unk_len}), unk_waits = false;
            symbols.push_back({*id, src_len});
            continue;
        }
        if (byte_fallback_) {
            bool all = true;
            for (unsigned char b : s) all = all && byte_ids_[b].has_value();
            if (all) {  // as the library: a waiting unk is not flushed here
                for (unsigned char b : s) symbols.push_back({*byte_ids_[b], 1});
                continue;
            }
        }
        if (!unk_) continue;
        if (unk_waits && fuse_unk_) {
            unk_len += src_len;
        } else {
            if (unk_waits) symbols.push_back({unk_id, unk_len});
            unk_waits = true, unk_id = *unk_, unk_len = src_len;
        }
    }
    if (unk_waits) symbols.push_back({unk_id, unk_len});
}

void Bpe::merge_short(std::vector<CachedToken>& symbols, std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) const {
    // pairs[i]: (rank, merged id) of symbols i and i + 1
    pairs.clear();
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs.push_back(merge_of(symbols[i].id, symbols[i + 1].id));
    for (;;) {
        std::size_t at = pairs.size();
        std::uint32_t best = kNoMerge;
        for (std::size_t i = 0; i < pairs.size(); ++i)
            if (pairs[i].first < best) best = pairs[i].first, at = i;
        if (at == pairs.size()) return;
        symbols[at] = {pairs[at].second, symbols[at].len + symbols[at + 1].len};
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(at));
        if (at < pairs.size()) pairs[at] = merge_of(symbols[at].id, symbols[at + 1].id);
        if (at > 0) pairs[at - 1] = merge_of(symbols[at - 1].id, symbols[at].id);
    }
}

void Bpe::merge_long(std::vector<CachedToken>& tokens) const {
    std::vector<Symbol> symbols;
    symbols.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i)
        symbols.push_back({tokens[i].id, tokens[i].len, static_cast<std::int32_t>(i) - 1,
                           i + 1 < tokens.size() ? static_cast<std::int32_t>(i + 1) : -1});
    std::priority_queue<Merge> queue;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
        if (const auto* m = table_.find(symbols[i].id, symbols[i + 1].id))
            queue.push({static_cast<std::uint32_t>(i), m->first, m->second});
    while (!queue.empty()) {
        const Merge top = queue.top();
        queue.pop();
        Symbol& cur = symbols[top.pos];
        if (cur.len == 0 || cur.next < 0) continue;
        const auto next_pos = static_cast<std::size_t>(cur.next);
        const Symbol right = symbols[next_pos];
        const auto* m = table_.find(cur.id, right.id);
        if (!m || m->second != top.id) continue;  // an expired entry
        cur.id = top.id;
        cur.len += right.len;
        cur.next = right.next;
        symbols[next_pos].len = 0;
        if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::int32_t>(top.pos);
        if (cur.prev >= 0)
            if (const auto* p = table_.find(symbols[static_cast<std::size_t>(cur.prev)].id, cur.id))
                queue.push({static_cast<std::uint32_t>(cur.prev), p->first, p->second});
        if (cur.next >= 0)
            if (const auto* n = table_.find(cur.id, symbols[static_cast<std::size_t>(cur.next)].id))
                queue.push({top.pos, n->first, n->second});
    }
    tokens.clear();
    for (const Symbol& s : symbols)
        if (s.len != 0) tokens.push_back({s.id, s.len});
}

}  // namespace

std::unique_ptr<Model> make_bpe(Json node, Vocab& vocab, std::size_t threads) { return std::make_unique<Bpe>(node, vocab, threads); }

}  // namespace attntrace::text
