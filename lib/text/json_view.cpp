#include "json_view.hpp"

#include <charconv>
#include <cmath>

#include "attntrace/tensor/errors.hpp"
#include "unicode.hpp"

namespace attntrace::text {

class JsonParser {
public:
    JsonParser(JsonDoc& doc, std::string_view s) : doc_(doc), s_(s) {}

    void parse() {
        doc_.nodes_.push_back({});
        value(0, 0);
        skip_space();
        if (at_ != s_.size()) fail("unexpected text after the document");
    }

private:
    static constexpr int kMaxDepth = 256;

    [[noreturn]] void fail(const std::string& what) const {
        throw InputError(doc_.file_ + ": not JSON: " + what + " at byte " + std::to_string(at_));
    }
    void skip_space() {
        while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\r' || s_[at_] == '\t')) ++at_;
    }
    char peek() {
        skip_space();
        if (at_ >= s_.size()) fail("unexpected end");
        return s_[at_];
    }
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++at_;
    }
    void literal(std::string_view word) {
        if (s_.substr(at_, word.size()) != word) fail("unknown literal");
        at_ += word.size();
    }

    // Parses one value into node NODE (already allocated).
    void value(std::uint32_t node, int depth) {
        if (depth > kMaxDepth) fail("nested too deep");
        const char c = peek();
        JsonDoc::Node& n = doc_.nodes_[node];
        switch (c) {
            case '{': return container(node, depth, true);
            case '[': return container(node, depth, false);
            case '"': {
                const std::string_view text = string();
                JsonDoc::Node& str = doc_.nodes_[node];
                str.kind = Json::Kind::string, str.text = text.data(), str.size = static_cast<std::uint32_t>(text.size());
                return;
            }
            case 't': n.kind = Json::Kind::boolean; n.flag = true; return literal("true");
            case 'f': n.kind = Json::Kind::boolean; return literal("false");
            case 'n': n.kind = Json::Kind::null; return literal("null");
            default: return number(node);
        }
    }

    void number(std::uint32_t node) {
        const std::size_t start = at_;
        while (at_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[at_])) || s_[at_] == '-' ||
                                   s_[at_] == '+' || s_[at_] == '.' || s_[at_] == 'e' || s_[at_] == 'E'))
            ++at_;
        if (start == at_) fail("unexpected character");
        double d = 0;
        const auto r = std::from_chars(s_.data() + start, s_.data() + at_, d);
        if (r.ec != std::errc() || r.ptr != s_.data() + at_ || !std::isfinite(d)) fail("bad number");
        JsonDoc::Node& n = doc_.nodes_[node];
        n.kind = Json::Kind::number;
        n.flag = d == std::floor(d) && std::fabs(d) < 9.0e15;  // an integer
        n.number = n.flag ? static_cast<std::int64_t>(d) : 0;
    }

    // The children of the containers being read are gathered on two stacks shared by every
    // level, then moved to the document's arrays when their container closes: no allocation
    // per container (a merges list of pairs is 150k arrays).
    void container(std::uint32_t node, int depth, bool object) {
        ++at_;
        const std::size_t base = kids_.size();
        if (peek() != (object ? '}' : ']')) {
            for (;;) {
                if (object) {
                    if (peek() != '"') fail("expected a member name");
                    names_.push_back(string());
                    expect(':');
                } else {
                    names_.emplace_back();
                }
                const auto kid = static_cast<std::uint32_t>(doc_.nodes_.size());
                kids_.push_back(kid);
                doc_.nodes_.push_back({});
                value(kid, depth + 1);
                if (peek() == ',') {
                    ++at_;
                    continue;
                }
                break;
            }
        }
        expect(object ? '}' : ']');
        JsonDoc::Node& n = doc_.nodes_[node];
        n.kind = object ? Json::Kind::object : Json::Kind::array;
        n.first = static_cast<std::uint32_t>(doc_.children_.size());
        n.size = static_cast<std::uint32_t>(kids_.size() - base);
        doc_.children_.insert(doc_.children_.end(), kids_.begin() + static_cast<std::ptrdiff_t>(base), kids_.end());
        doc_.keys_.insert(doc_.keys_.end(), names_.begin() + static_cast<std::ptrdiff_t>(base), names_.end());
        kids_.resize(base);
        names_.resize(base);
    }

    unsigned hex4() {
        if (at_ + 4 > s_.size()) fail("short \\u escape");
        unsigned v = 0;
        const auto r = std::from_chars(s_.data() + at_, s_.data() + at_ + 4, v, 16);
        if (r.ptr != s_.data() + at_ + 4) fail("bad \\u escape");
        at_ += 4;
        return v;
    }

    char32_t escaped_code_point() {
        char32_t c = hex4();
        if (c >= 0xD800 && c <= 0xDBFF) {
            if (s_.substr(at_, 2) != "\\u") fail("lone surrogate in \\u escape");
            at_ += 2;
            const char32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("bad surrogate pair in \\u escape");
            c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
        } else if (c >= 0xDC00 && c <= 0xDFFF) {
            fail("lone surrogate in \\u escape");
        }
        return c;
    }

    std::string_view string() {
        ++at_;  // the opening quote
        const std::size_t start = at_;
        while (at_ < s_.size() && s_[at_] != '"' && s_[at_] != '\\') {
            if (static_cast<unsigned char>(s_[at_]) < 0x20) fail("control character in a string");
            ++at_;
        }
        if (at_ >= s_.size()) fail("unterminated string");
        if (s_[at_] == '"') return s_.substr(start, at_++ - start);
        std::string& out = doc_.unescaped_.emplace_back(s_.substr(start, at_ - start));
        while (at_ < s_.size() && s_[at_] != '"') {
            const char c = s_[at_++];
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (at_ >= s_.size()) break;
            switch (s_[at_++]) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': append_utf8(out, escaped_code_point()); break;
                default: fail("bad escape");
            }
        }
        if (at_ >= s_.size()) fail("unterminated string");
        ++at_;
        return out;
    }

    JsonDoc& doc_;
    std::string_view s_;
    std::size_t at_ = 0;
    std::vector<std::uint32_t> kids_;     // children of the open containers, innermost last
    std::vector<std::string_view> names_;  // their member names (empty in arrays)
};

JsonDoc::JsonDoc(std::string_view bytes, std::string file) : file_(std::move(file)) {
    if (const auto bad = first_invalid_utf8(bytes))
        throw InputError(file_ + ": not JSON: invalid UTF-8 at byte " + std::to_string(*bad));
    nodes_.reserve(bytes.size() / 8 + 16);  // reserved, not touched: a vocabulary has a node per ~20 bytes
    children_.reserve(bytes.size() / 8 + 16);
    keys_.reserve(bytes.size() / 8 + 16);
    JsonParser(*this, bytes).parse();
    null_ = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(Node{});
}

Json::Kind Json::kind() const { return doc_->nodes_[node_].kind; }
const std::string& Json::file() const { return doc_->file_; }

static const char* kind_name(Json::Kind k) {
    switch (k) {
        case Json::Kind::null: return "null";
        case Json::Kind::boolean: return "a boolean";
        case Json::Kind::number: return "a number";
        case Json::Kind::string: return "a string";
        case Json::Kind::array: return "an array";
        default: return "an object";
    }
}

static InputError wrong(const Json& j, const char* where, const char* expected) {
    return InputError(j.file() + ": " + where + ": expected " + expected + ", found " + kind_name(j.kind()));
}

std::string_view Json::str(const char* where) const {
    if (!is_string()) throw wrong(*this, where, "a string");
    const auto& n = doc_->nodes_[node_];
    return {n.text, n.size};
}

bool Json::boolean(const char* where) const {
    if (kind() != Kind::boolean) throw wrong(*this, where, "true or false");
    return doc_->nodes_[node_].flag;
}

std::int64_t Json::integer(const char* where) const {
    const auto& n = doc_->nodes_[node_];
    if (n.kind != Kind::number || !n.flag) throw wrong(*this, where, "an integer");
    return n.number;
}

std::size_t Json::size() const {
    const auto& n = doc_->nodes_[node_];
    return (n.kind == Kind::array || n.kind == Kind::object) ? n.size : 0;
}

Json Json::operator[](std::size_t i) const { return Json(doc_, doc_->children_[doc_->nodes_[node_].first + i]); }

std::string_view Json::key(std::size_t i) const { return doc_->keys_[doc_->nodes_[node_].first + i]; }

Json Json::get(std::string_view name) const {
    if (is_object())
        for (std::size_t i = 0; i < size(); ++i)
            if (key(i) == name) return (*this)[i];
    return Json(doc_, doc_->null_);
}

bool Json::has(std::string_view name) const {
    if (is_object())
        for (std::size_t i = 0; i < size(); ++i)
            if (key(i) == name) return true;
    return false;
}

}  // namespace attntrace::text
