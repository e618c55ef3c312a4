#pragma once
// A vocabulary: id -> string and string -> id (open addressing over the ids), and the added tokens.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attntrace::text {

struct AddedToken {
    std::string content;
    std::uint32_t id = 0;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class Vocab {
public:
    // Sets the strings (index = id; an empty view for an id without a string) and indexes them.
    void assign(std::vector<std::string_view> by_id);
    std::optional<std::uint32_t> find(std::string_view s) const;
    std::size_t size() const { return by_id_.size(); }   // model ids [0, size)
    std::string_view at(std::uint32_t id) const { return by_id_[id]; }

    // Added tokens (tokenizer.json "added_tokens"); their ids may extend past the model's.
    std::vector<AddedToken> added;
    std::size_t total_size() const;                         // every id, model and added
    std::optional<std::string_view> token(std::uint32_t id) const;  // added first, then model
    std::optional<std::uint32_t> token_id(std::string_view s) const; // added first, then model

private:
    std::vector<std::string_view> by_id_;
    std::vector<std::uint32_t> table_;  // ids + 1, 0 = empty
    std::size_t mask_ = 0;
};

std::uint64_t hash_bytes(std::string_view s) noexcept;

}  // namespace attntrace::text
