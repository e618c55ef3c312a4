// The BPE model (the library's models/bpe): merges by rank with a priority queue, byte fallback
// (<0xNN> tokens), unk fusing, ignore_merges, continuing_subword_prefix / end_of_word_suffix, and a
// cache of the words already seen.
#include <cstdio>
#include <queue>
#include <unordered_map>

#include "attntrace/tensor/errors.hpp"
#include "components.hpp"

namespace attntrace::text {
namespace {

// (left id, right id) -> (rank, merged id), open addressing.
class MergeTable {
public:
    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap < n * 2) cap *= 2;
        keys_.assign(cap, kEmpty);
        values_.resize(cap);
        mask_ = cap - 1;
    }
    // A pair listed twice keeps its last listing, as the library's HashMap does.
    void insert(std::uint32_t a, std::uint32_t b, std::uint32_t rank, std::uint32_t id) {
        const std::uint64_t key = (std::uint64_t(a) << 32) | b;
        std::size_t slot = hash(key);
        while (keys_[slot] != kEmpty && keys_[slot] != key) slot = (slot + 1) & mask_;
        keys_[slot] = key;
        values_[slot] = {rank, id};
    }
    const std::pair<std::uint32_t, std::uint32_t>* find(std::uint32_t a, std::uint32_t b) const {
        const std::uint64_t key = (std::uint64_t(a) << 32) | b;
        for (std::size_t slot = hash(key);; slot = (slot + 1) & mask_) {
            if (keys_[slot] == key) return &values_[slot];
            if (keys_[slot] == kEmpty) return nullptr;
        }
    }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
    std::size_t hash(std::uint64_t k) const { return ((k * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
    std::vector<std::uint64_t> keys_;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> values_;
    std::size_t mask_ = 0;
};

struct Symbol {
    std::uint32_t id, len;  // len: bytes of the piece it covers
    std::int32_t prev, next;
};

struct Merge {
    std::uint32_t pos, rank, id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // min-heap
};

struct Cached {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> tokens;  // (id, bytes of the piece)
};

class Bpe final : public Model {
public:
    Bpe(Json node, Vocab& vocab) : vocab_(vocab) {
        read_vocab(node, vocab);
        read_options(node);
        read_merges(node.get("merges"));
    }

    void tokenize(std::string_view text, bool byte_level, std::vector<ModelToken>& out) const override {
        if (text.empty()) return;
        std::string& word = word_;
        word.clear();
        if (byte_level) {
            for (unsigned char b : text) word += byte_level_char(b);
        } else {
            word.assign(text);
        }
        if (ignore_merges_)
            if (const auto id = vocab_.find(word)) return out.push_back({*id, 0, static_cast<std::uint32_t>(text.size())});
        const bool cacheable = word.size() < 256;
        if (cacheable)
            if (auto hit = cache_.find(word); hit != cache_.end()) return emit(hit->second, out);
        Cached c;
        merge_word(word, byte_level, c);
        emit(c, out);
        if (cacheable && cache_.size() < kCacheSize) cache_.emplace(word, std::move(c));
    }

private:
    static constexpr std::size_t kCacheSize = 1 << 17;

    void read_options(Json node) {
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

    void read_merges(Json merges) {
        if (!merges.is_array()) throw InputError(merges.file() + ": model.merges: expected an array");
        table_.reserve(merges.size());
        std::string merged;
        for (std::size_t rank = 0; rank < merges.size(); ++rank) {
            std::string_view a, b;
            Json m = merges[rank];
            if (m.is_string()) {
                const std::string_view s = m.str("model.merges");
                const std::size_t space = s.find(' ');
                if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: \"" + std::string(s) + "\" is not two tokens");
                a = s.substr(0, space), b = s.substr(space + 1);
            } else if (m.is_array() && m.size() == 2) {
                a = m[0].str("model.merges"), b = m[1].str("model.merges");
            } else {
                throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: expected \"a b\" or [\"a\", \"b\"]");
            }
            merged.assign(a);
            merged.append(b.substr(std::min(prefix_.size(), b.size()) * (b.substr(0, prefix_.size()) == prefix_)));
            const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(merged);
            if (!ia || !ib || !im)
                throw InputError(m.file() + ": model.merges[" + std::to_string(rank) + "]: \"" + std::string(!ia ? a : !ib ? b : std::string_view(merged)) + "\" is not in the vocabulary");
            table_.insert(*ia, *ib, static_cast<std::uint32_t>(rank), *im);
        }
    }

    void emit(const Cached& c, std::vector<ModelToken>& out) const {
        std::uint32_t at = 0;
        for (const auto& [id, len] : c.tokens) {
            out.push_back({id, at, at + len});
            at += len;
        }
    }

    // The initial symbols of WORD: one per character (or its bytes' <0xNN> tokens, or unk).
    void initial_symbols(std::string_view word, bool byte_level, std::vector<Symbol>& symbols) const;
    void merge_all(std::vector<Symbol>& symbols) const;

    void merge_word(std::string_view word, bool byte_level, Cached& c) const {
        std::vector<Symbol>& symbols = symbols_;
        symbols.clear();
        initial_symbols(word, byte_level, symbols);
        merge_all(symbols);
        for (const Symbol& s : symbols)
            if (s.len != 0) c.tokens.emplace_back(s.id, s.len);
    }

    const Vocab& vocab_;
    MergeTable table_;
    std::string prefix_, suffix_;
    bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
    std::optional<std::uint32_t> unk_;
    std::optional<std::uint32_t> byte_ids_[256];
    mutable std::unordered_map<std::string, Cached> cache_;
    mutable std::string word_, piece_;
    mutable std::vector<Symbol> symbols_;
};

void Bpe::initial_symbols(std::string_view word, bool byte_level, std::vector<Symbol>& symbols) const {
    auto add = [&](std::uint32_t id, std::uint32_t len) {
        const auto n = static_cast<std::int32_t>(symbols.size());
        if (n > 0) symbols.back().next = n;
        symbols.push_back({id, len, n - 1, -1});
    };
    bool unk_waits = false;  // an unk token (unk_id, unk_len) waiting to be added
    std::uint32_t unk_id = 0, unk_len = 0;
    std::string& s = piece_;
    for (std::size_t i = 0; i < word.size();) {
        const std::size_t clen = utf8_length(decode_utf8(word, i).first);
        const auto src_len = static_cast<std::uint32_t>(byte_level ? 1 : clen);
        s.clear();
        if (i > 0) s += prefix_;
        s.append(word.substr(i, clen));
        if (i + clen == word.size()) s += suffix_;
        i += clen;
        if (const auto id = vocab_.find(s)) {
            if (unk_waits) add(unk_id, unk_len), unk_waits = false;
            add(*id, src_len);
            continue;
        }
        if (byte_fallback_) {
            bool all = true;
            for (unsigned char b : s) all = all && byte_ids_[b].has_value();
            if (all) {  // as the library: a waiting unk is not flushed here
                for (unsigned char b : s) add(*byte_ids_[b], 1);
                continue;
            }
        }
        if (!unk_) continue;
        if (unk_waits && fuse_unk_) {
            unk_len += src_len;
        } else {
            if (unk_waits) add(unk_id, unk_len);
            unk_waits = true, unk_id = *unk_, unk_len = src_len;
        }
    }
    if (unk_waits) add(unk_id, unk_len);
}

void Bpe::merge_all(std::vector<Symbol>& symbols) const {
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
}

}  // namespace

std::unique_ptr<Model> make_bpe(Json node, Vocab& vocab) { return std::make_unique<Bpe>(node, vocab); }

}  // namespace attntrace::text
