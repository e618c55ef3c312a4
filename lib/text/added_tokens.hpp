#pragma once
// The added tokens matched in the text as the library's AddedVocabulary matches them: leftmost-
// longest, those with normalized=false in the raw text, those with normalized=true (in their
// normalized form) in each normalized stretch; single_word, lstrip and rstrip honoured.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vocab.hpp"

namespace attntrace::text {

struct Normalizer;

class AddedTokens {
public:
    struct Split {
        std::size_t from, to;                  // bytes of the text
        std::optional<std::uint32_t> token;    // the added token's id, or none (text to tokenize)
    };
    AddedTokens() = default;
    AddedTokens(const std::vector<AddedToken>& tokens, const Normalizer* normalizer);
    AddedTokens(AddedTokens&&) = default;  // the patterns point into tokens_: moved, never copied
    AddedTokens& operator=(AddedTokens&&) = default;
    AddedTokens(const AddedTokens&) = delete;
    // S cut at the added tokens of the raw (NORMALIZED false) or the normalized set; covers S.
    std::vector<Split> split(std::string_view s, bool normalized) const;

private:
    struct Pattern {
        std::string text;
        const AddedToken* token;
    };
    struct Set {
        std::array<std::vector<Pattern>, 256> by_first_byte;  // longest first
        std::array<bool, 256> starts{};                       // some pattern starts with this byte
        int first_bytes = 0;                                  // how many bytes start one
        char only_first = 0;                                  // with one: that byte
        bool empty = true;
    };
    // The first byte at or after AT that may start a pattern of SET (S.size() when none).
    static std::size_t next_start(const Set& set, std::string_view s, std::size_t at);
    std::optional<std::pair<std::size_t, const Pattern*>> longest_at(const Set& set, std::string_view s, std::size_t at) const;
    Set raw_, normalized_;
    std::vector<AddedToken> tokens_;
};

}  // namespace attntrace::text
