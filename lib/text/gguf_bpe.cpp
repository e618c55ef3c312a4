// llama.cpp's BPE of one word (src/llama-vocab.cpp at 80fb11ac: llm_tokenizer_bpe_session::tokenize,
// add_new_bigram; the ranks of llama_vocab::impl::load): the word's bytes as GPT-2's byte-level
// characters, merged pair by pair, the pair of the lowest rank first and the leftmost of equals;
// a pair's rank is its first listing in tokenizer.ggml.merges ("left right", split at the first
// space after the first byte). Pairs and symbols are strings there; here each string has a number,
// which gives the same merges. A final symbol that is no token (a merge whose result the vocabulary
// lacks) becomes the tokens of its single bytes that the vocabulary has, the others dropped, as
// llama.cpp does.
#include <queue>

#include "gguf_tokenizer.hpp"

namespace attntrace::text {
namespace {

struct Symbol {
    std::uint32_t id, len;  // len: bytes of the word
    std::int32_t prev, next;
};

struct Bigram {
    std::int32_t left, right;
    std::uint32_t rank, merged, left_id, right_id;
    // llm_bigram_bpe::comparator: the top is the lowest rank, then the leftmost
    bool operator<(const Bigram& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
};

}  // namespace

GgufBpe::GgufBpe(const std::vector<std::string>& merges, const Vocab& vocab, bool ignore_merges)
    : vocab_(vocab), ignore_merges_(ignore_merges) {
    table_.reserve(merges.size());
    std::string joined;  // left + right, reused: a string is allocated only for one the vocabulary lacks
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const std::string_view m = merges[rank];
        const std::size_t space = m.find(' ', 1);
        if (space == std::string_view::npos) continue;  // llama.cpp ranks the pair ("", ""), which no symbol is
        const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
        joined.assign(left).append(right);
        const std::uint32_t a = intern(left), b = intern(right), merged = intern(joined);
        table_.insert(a, b, static_cast<std::uint32_t>(rank), merged, true);
    }
    for (int b = 0; b < 256; ++b) byte_symbol_[static_cast<std::size_t>(b)] = lookup(byte_level_char(static_cast<unsigned char>(b)));
}

std::uint32_t GgufBpe::lookup(std::string_view s) const {
    if (const auto id = vocab_.find(s)) return *id;
    const auto it = extra_.find(std::string(s));
    return it == extra_.end() ? kNone : it->second;
}

std::uint32_t GgufBpe::intern(std::string_view s) {
    if (const auto id = vocab_.find(s)) return *id;
    const auto it = extra_.try_emplace(std::string(s), static_cast<std::uint32_t>(vocab_.size() + extra_.size())).first;
    return it->second;
}

// Merges SYMBOLS (one per byte, in: ids; out: the merged symbols) as the session's work queue does.
void GgufBpe::merge(std::vector<CachedToken>& tokens) const {
    std::vector<Symbol> s;
    s.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i)
        s.push_back({tokens[i].id, tokens[i].len, static_cast<std::int32_t>(i) - 1, i + 1 < tokens.size() ? static_cast<std::int32_t>(i + 1) : -1});
    std::priority_queue<Bigram> queue;
    auto add_bigram = [&](std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const std::uint32_t a = s[static_cast<std::size_t>(left)].id, b = s[static_cast<std::size_t>(right)].id;
        if (a == kNone || b == kNone) return;
        if (const auto* m = table_.find(a, b)) queue.push({left, right, m->first, m->second, a, b});
    };
    for (std::size_t i = 1; i < s.size(); ++i) add_bigram(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(i));
    while (!queue.empty()) {
        const Bigram top = queue.top();
        queue.pop();
        Symbol& left = s[static_cast<std::size_t>(top.left)];
        Symbol& right = s[static_cast<std::size_t>(top.right)];
        // an outdated bigram: one side merged away or grown since (llama.cpp compares the texts)
        if (left.len == 0 || right.len == 0 || left.id != top.left_id || right.id != top.right_id) continue;
        left.id = top.merged;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (right.next >= 0) s[static_cast<std::size_t>(right.next)].prev = top.left;
        add_bigram(left.prev, top.left);
        add_bigram(top.left, left.next);
    }
    tokens.clear();
    for (const Symbol& sym : s)
        if (sym.len != 0) tokens.push_back({sym.id, sym.len});
}

// Appends the tokens of symbol S (bytes [AT, AT + S.len) of WORD); false when it is no token and
// went to single bytes.
bool GgufBpe::emit_symbol(std::string_view word, std::uint32_t at, const CachedToken& s, std::vector<ModelToken>& out) const {
    if (s.id < vocab_.size()) {
        out.push_back({s.id, at, at + s.len});
        return true;
    }
    for (std::uint32_t k = at; k < at + s.len; ++k)
        for (const char c : byte_level_char(static_cast<unsigned char>(word[k])))
            if (const auto id = vocab_.find(std::string_view(&c, 1))) out.push_back({*id, k, k + 1});
    return false;
}

void GgufBpe::tokenize(std::string_view word, std::vector<ModelToken>& out) const {
    if (word.empty()) return;
    const std::uint64_t h = hash_bytes(word);
    std::size_t count = 0;
    if (const CachedToken* hit = cache_.find(word, h, count)) {
        for (std::uint32_t i = 0, at = 0; i < count; at += hit[i].len, ++i) out.push_back({hit[i].id, at, at + hit[i].len});
        return;
    }
    std::vector<CachedToken> symbols;
    if (ignore_merges_) {
        mapped_.clear();
        for (const char b : word) mapped_ += byte_level_char(static_cast<unsigned char>(b));
        if (const auto id = vocab_.find(mapped_)) symbols.push_back({*id, static_cast<std::uint32_t>(word.size())});
    }
    if (symbols.empty()) {
        symbols.reserve(word.size());
        for (const char b : word) symbols.push_back({byte_symbol_[static_cast<unsigned char>(b)], 1});
        merge(symbols);
    }
    bool cacheable = true;
    std::uint32_t at = 0;
    for (const CachedToken& s : symbols) {
        cacheable = emit_symbol(word, at, s, out) && cacheable;
        at += s.len;
    }
    if (cacheable) cache_.insert(word, h, symbols);
}

}  // namespace attntrace::text
