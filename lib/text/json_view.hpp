#pragma once
// A read-only JSON document over a file's bytes, for tokenizer.json: strings without escapes are
// views into the bytes, numbers are parsed once, nothing else is copied. GPT-2's 2 MB file parses
// in a few milliseconds where nlohmann's DOM takes 54 ms (docs/tokenize.md, Speed).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "buffers.hpp"

namespace attntrace::text {

class JsonDoc;

// One value of a JsonDoc (valid while the document and its bytes live).
class Json {
public:
    enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
    Kind kind() const;
    bool is_null() const { return kind() == Kind::null; }
    bool is_string() const { return kind() == Kind::string; }
    bool is_array() const { return kind() == Kind::array; }
    bool is_object() const { return kind() == Kind::object; }
    // The typed reads throw InputError "FILE: WHERE: expected a string" (WHERE is the JSON path).
    std::string_view str(const char* where) const;
    bool boolean(const char* where) const;
    std::int64_t integer(const char* where) const;
    std::size_t size() const;                    // elements of an array, members of an object
    Json operator[](std::size_t i) const;        // element of an array / value of a member
    std::string_view key(std::size_t i) const;   // name of an object's member I
    // The member NAME of an object; a null value when this is not an object or NAME is absent.
    Json get(std::string_view name) const;
    bool has(std::string_view name) const;
    const std::string& file() const;

private:
    friend class JsonDoc;
    Json(const JsonDoc* doc, std::uint32_t node) : doc_(doc), node_(node) {}
    const JsonDoc* doc_;
    std::uint32_t node_;
};

class JsonDoc {
public:
    // Parses BYTES (kept alive by the caller); throws InputError "FILE: not JSON: ... at byte N".
    JsonDoc(std::string_view bytes, std::string file);
    Json root() const { return Json(this, 0); }
    const std::string& file() const { return file_; }

private:
    friend class Json;
    friend class JsonParser;
    struct Node {  // 16 bytes: a 2 MB vocabulary is 100k nodes
        union {
            const char* text = nullptr;  // a string's bytes (in the file, or in unescaped_)
            std::int64_t number;         // an integer's value
            std::uint32_t first;         // an array's or object's first child in children_
        };
        std::uint32_t size = 0;  // a string's bytes, an array's or object's children
        Json::Kind kind = Json::Kind::null;
        bool flag = false;       // true; an integer (a number)
    };
    Buffer<Node> nodes_;
    Buffer<std::uint32_t> children_;
    Buffer<std::string_view> keys_;  // parallel to children_ (empty for array elements)
    std::deque<std::string> unescaped_;
    std::uint32_t null_ = 0;  // a null node, for absent members
    std::string file_;
};

}  // namespace attntrace::text
