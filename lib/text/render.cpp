// The text and JSON forms of an Encoding (app/cmd_tokenize.cpp chooses one).
#include <charconv>
#include <cstdio>

#include "attntrace/text/tokenizer.hpp"

namespace attntrace {

std::string c_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '\t') out += "\\t";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\\') out += "\\\\";
        else if (b < 0x20 || b == 0x7F) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", b);
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

std::string encoding_text(const Encoding& e, std::string_view input) {
    std::string out;
    for (std::size_t i = 0; i < e.ids.size(); ++i) {
        const auto [from, to] = e.offsets[i];
        out += std::to_string(i) + '\t' + std::to_string(e.ids[i]) + '\t' + c_escape(e.tokens[i]) + '\t' +
               c_escape(input.substr(std::min(from, input.size()), to > from ? to - from : 0)) + '\n';
    }
    out += std::to_string(e.ids.size()) + (e.ids.size() == 1 ? " token\n" : " tokens\n");
    return out;
}

namespace {

void json_string(std::string& out, std::string_view s) {
    out += '"';
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (b < 0x20 || b == 0x7F) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\u%04X", b);
            out += hex;
        } else {
            out += c;
        }
    }
    out += '"';
}

}  // namespace

namespace {

void append_number(std::string& out, std::size_t v) {
    char buf[24];
    out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}

}  // namespace

std::string encoding_json(const Encoding& e) {
    std::string out = "{\"ids\": [";
    out.reserve(e.ids.size() * 40);
    for (std::size_t i = 0; i < e.ids.size(); ++i) {
        if (i) out += ", ";
        append_number(out, e.ids[i]);
    }
    out += "], \"tokens\": [";
    for (std::size_t i = 0; i < e.tokens.size(); ++i) {
        if (i) out += ", ";
        json_string(out, e.tokens[i]);
    }
    out += "], \"offsets\": [";
    for (std::size_t i = 0; i < e.offsets.size(); ++i) {
        out += i ? ", [" : "[";
        append_number(out, e.offsets[i].first);
        out += ", ";
        append_number(out, e.offsets[i].second);
        out += ']';
    }
    out += "]}\n";
    return out;
}

}  // namespace attntrace
