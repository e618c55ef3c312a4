// Post-processors (the library's processors/): TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel (trim_offsets), Sequence. Special tokens they add span (0, 0).
#include "attntrace/tensor/errors.hpp"
#include "components.hpp"

namespace attntrace::text {
namespace {

constexpr const char* kSupported = "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence";

// ID (read from NODE at WHERE) when the vocabulary has it.
std::uint32_t checked_id(Json node, std::int64_t id, const Vocab& vocab, const char* where) {
    if (id < 0 || static_cast<std::uint64_t>(id) >= vocab.total_size())
        throw InputError(node.file() + ": " + where + ": id " + std::to_string(id) + " is not in the vocabulary (ids 0 to " +
                         std::to_string(vocab.total_size() - 1) + ")");
    return static_cast<std::uint32_t>(id);
}

std::uint32_t id_of_pair(Json pair, const Vocab& vocab, const char* where) {
    if (!pair.is_array() || pair.size() != 2) throw InputError(pair.file() + ": " + where + ": expected [\"token\", id]");
    return checked_id(pair, pair[1].integer(where), vocab, where);
}

struct Template final : PostProcessor {
    // The single-sequence template: special tokens' ids, and where the sequence goes (an empty list).
    std::vector<std::vector<std::uint32_t>> parts;
    Template(Json n, const Vocab& vocab) {
        Json single = n.get("single"), specials = n.get("special_tokens");
        for (std::size_t i = 0; i < single.size(); ++i) {
            Json piece = single[i];
            if (piece.has("Sequence")) {
                parts.emplace_back();
                continue;
            }
            Json special = piece.get("SpecialToken");
            const std::string_view name = special.get("id").str("post_processor.single.SpecialToken.id");
            Json entry = specials.get(name);
            if (entry.is_null())
                throw InputError(n.file() + ": post_processor: special token " + std::string(name) + " is not in special_tokens");
            std::vector<std::uint32_t> ids;
            Json list = entry.get("ids");
            constexpr const char* where = "post_processor.special_tokens.ids";
            for (std::size_t k = 0; k < list.size(); ++k) ids.push_back(checked_id(n, list[k].integer(where), vocab, where));
            if (ids.empty()) throw InputError(n.file() + ": post_processor: special token " + std::string(name) + " has no ids");
            parts.push_back(std::move(ids));
        }
    }
    void process(Tokens& tokens, bool add_special, const Vocab&) const override {
        if (!add_special) return;
        // the special tokens before the first sequence in front, the rest after: in place when
        // the sequence comes once (always, for one text), not a copy of a million tokens
        std::vector<Token> before, after;
        bool seen = false;
        for (const auto& part : parts) {
            if (part.empty() && seen) after.insert(after.end(), tokens.begin(), tokens.end());
            seen = seen || part.empty();
            for (std::uint32_t id : part) (seen ? after : before).push_back({id, {0, 0}, 0, 0});
        }
        if (!seen) tokens.clear();  // a template without the sequence
        tokens.insert(tokens.begin(), before.begin(), before.end());
        tokens.insert(tokens.end(), after.begin(), after.end());
    }
};

// BertProcessing and RobertaProcessing: [cls] + tokens + [sep], RoBERTa's trimming its offsets first.
struct ClsSep final : PostProcessor {
    std::uint32_t cls, sep;
    bool trim = false, add_prefix_space = false;
    ClsSep(Json n, const Vocab& vocab, bool roberta)
        : cls(id_of_pair(n.get("cls"), vocab, "post_processor.cls")), sep(id_of_pair(n.get("sep"), vocab, "post_processor.sep")) {
        if (!roberta) return;
        Json t = n.get("trim_offsets"), a = n.get("add_prefix_space");
        trim = t.is_null() || t.boolean("trim_offsets");
        add_prefix_space = a.is_null() || a.boolean("add_prefix_space");
    }
    void process(Tokens& tokens, bool add_special, const Vocab& vocab) const override {
        if (trim) trim_offsets(tokens, add_prefix_space, vocab);
        if (!add_special) return;
        tokens.insert(tokens.begin(), Token{cls, {0, 0}, 0, 0});
        tokens.push_back({sep, {0, 0}, 0, 0});
    }
};

struct ByteLevel final : PostProcessor {
    bool trim, add_prefix_space;
    explicit ByteLevel(Json n) {
        Json t = n.get("trim_offsets"), a = n.get("add_prefix_space");
        trim = t.is_null() || t.boolean("trim_offsets");
        add_prefix_space = a.is_null() || a.boolean("add_prefix_space");
    }
    void process(Tokens& tokens, bool, const Vocab& vocab) const override {
        if (trim) trim_offsets(tokens, add_prefix_space, vocab);
    }
};

struct Sequence final : PostProcessor {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    Sequence(Json n, const Vocab& vocab) {
        Json list = n.get("processors");
        for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_post_processor(list[i], vocab));
    }
    void process(Tokens& tokens, bool add_special, const Vocab& vocab) const override {
        for (const auto& p : parts)
            if (p) p->process(tokens, add_special, vocab);
    }
};

}  // namespace

std::pair<int, int> space_ends(std::string_view s) {
    auto is_space = [](char32_t c) { return c == 0x120 || is_whitespace(c); };  // 'Ġ' is the byte ' '
    std::vector<char32_t> chars;
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, len] = decode_utf8(s, i);
        chars.push_back(c);
        i += len;
    }
    int lead = 0, trail = 0;
    while (lead < static_cast<int>(chars.size()) && is_space(chars[static_cast<std::size_t>(lead)])) ++lead;
    while (trail < static_cast<int>(chars.size()) && is_space(chars[chars.size() - 1 - static_cast<std::size_t>(trail)])) ++trail;
    return {lead, trail};
}

void trim_offsets(Tokens& tokens, bool add_prefix_space, const Vocab& vocab) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        Token& t = tokens[i];
        if (t.lead < 0) {
            const auto [lead, trail] = space_ends(vocab.token(t.id).value_or(""));
            t.lead = lead, t.trail = trail;
        }
        std::uint32_t lead = static_cast<std::uint32_t>(t.lead);
        const auto trail = static_cast<std::uint32_t>(t.trail);
        if (lead > 0) {
            const bool is_first = i == 0 || t.offsets.begin == 0;
            if (is_first && add_prefix_space && lead == 1) lead = 0;
            t.offsets.begin = std::min(t.offsets.begin + lead, t.offsets.end);
        }
        if (trail > 0 && t.offsets.end >= trail) t.offsets.end = std::max(t.offsets.end - trail, t.offsets.begin);
    }
}

std::unique_ptr<PostProcessor> make_post_processor(Json n, const Vocab& vocab) {
    if (n.is_null()) return nullptr;
    const std::string type = type_of(n, "post_processor");
    if (type == "TemplateProcessing") return std::make_unique<Template>(n, vocab);
    if (type == "BertProcessing") return std::make_unique<ClsSep>(n, vocab, false);
    if (type == "RobertaProcessing") return std::make_unique<ClsSep>(n, vocab, true);
    if (type == "ByteLevel") return std::make_unique<ByteLevel>(n);
    if (type == "Sequence") return std::make_unique<Sequence>(n, vocab);
    unsupported(n, "post_processor", kSupported);
}

}  // namespace attntrace::text
