#include "added_tokens.hpp"

#include <algorithm>
#include <cstring>

#include "components.hpp"

namespace attntrace::text {
namespace {

// The previous / next character of S around byte AT (S valid UTF-8).
char32_t char_before(std::string_view s, std::size_t at) {
    std::size_t k = at - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    return decode_utf8(s, k).first;
}

}  // namespace

AddedTokens::AddedTokens(const std::vector<AddedToken>& tokens, const Normalizer* normalizer) : tokens_(tokens) {
    for (const AddedToken& t : tokens_) {
        std::string text = t.content;
        if (t.normalized && normalizer) {
            NormStr s = NormStr::original(text, 0, text.size());
            normalizer->normalize(s);
            text = s.text;
        }
        if (text.empty()) continue;
        Set& set = t.normalized ? normalized_ : raw_;
        set.by_first_byte[static_cast<unsigned char>(text[0])].push_back({text, &t});
        if (!set.starts[static_cast<unsigned char>(text[0])]) ++set.first_bytes, set.only_first = text[0];
        set.starts[static_cast<unsigned char>(text[0])] = true;
        set.empty = false;
    }
    for (Set* set : {&raw_, &normalized_})
        for (auto& list : set->by_first_byte)
            std::stable_sort(list.begin(), list.end(), [](const Pattern& a, const Pattern& b) { return a.text.size() > b.text.size(); });
}

std::size_t AddedTokens::next_start(const Set& set, std::string_view s, std::size_t at) {
    if (set.first_bytes == 1) {  // BERT's [CLS], [SEP] ...: memchr's word-wide search
        const void* hit = std::memchr(s.data() + at, set.only_first, s.size() - at);
        return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - s.data()) : s.size();
    }
    while (at < s.size() && !set.starts[static_cast<unsigned char>(s[at])]) ++at;
    return at;
}

std::optional<std::pair<std::size_t, const AddedTokens::Pattern*>> AddedTokens::longest_at(const Set& set, std::string_view s,
                                                                                          std::size_t at) const {
    for (const Pattern& p : set.by_first_byte[static_cast<unsigned char>(s[at])])
        if (s.compare(at, p.text.size(), p.text) == 0) return std::make_pair(at + p.text.size(), &p);
    return std::nullopt;
}

std::vector<AddedTokens::Split> AddedTokens::split(std::string_view s, bool normalized) const {
    const Set& set = normalized ? normalized_ : raw_;
    if (s.empty()) return {};
    if (set.empty) return {{0, s.size(), std::nullopt}};
    std::vector<Split> out;
    std::size_t done = 0;  // the end of the last split
    for (std::size_t at = next_start(set, s, 0); at < s.size(); at = next_start(set, s, at)) {
        const auto hit = longest_at(set, s, at);
        if (!hit) {
            ++at;
            continue;
        }
        std::size_t start = at, stop = hit->first;
        const AddedToken& t = *hit->second->token;
        if (t.single_word) {
            const bool start_ok = start == 0 || !is_word_char(char_before(s, start));
            const bool stop_ok = stop == s.size() || !is_word_char(decode_utf8(s, stop).first);
            if (!start_ok || !stop_ok) {
                at = stop;  // the library's search goes on after the discarded match
                continue;
            }
        }
        if (t.lstrip)
            while (start > done && is_whitespace(char_before(s, start))) start -= utf8_length(char_before(s, start));
        if (t.rstrip)
            while (stop < s.size() && is_whitespace(decode_utf8(s, stop).first)) stop += utf8_length(decode_utf8(s, stop).first);
        if (done < start) out.push_back({done, start, std::nullopt});
        out.push_back({start, stop, t.id});
        done = at = stop;
    }
    if (done < s.size()) out.push_back({done, s.size(), std::nullopt});
    return out;
}

}  // namespace attntrace::text
