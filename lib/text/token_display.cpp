// Tokens as a reader sees them (token_display.hpp).
#include "attntrace/text/token_display.hpp"

#include <cstdio>

#include "components.hpp"
#include "tokenizer_impl.hpp"

namespace attntrace {

using namespace text;

namespace {

// "<0xE4>" -> 0xE4; -1 for any other piece.
int fallback_byte(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
    int v = 0;
    for (const char c : piece.substr(3, 2)) {
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

std::string hex_byte(const char* format, unsigned value) {
    char buf[16];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

// The length of the valid UTF-8 character starting at S[I]; 0 when none starts there.
std::size_t valid_char_at(std::string_view s, std::size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    return first_invalid_utf8(s.substr(i, n)) ? 0 : n;
}

// The display of the code point C (spelt by BYTES).
void append_visible(std::string& out, char32_t c, std::string_view bytes) {
    if (c == ' ') out += kSpaceMark;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) out += hex_byte("\\x%02X", unsigned(c));
    else if (c >= 0x80 && c < 0xA0) out += hex_byte("\\u%04X", unsigned(c));
    else out += bytes;
}

// The decoder node's style into STYLE (a Sequence's parts in order).
void read_style(Json node, TokenStyle& style) {
    if (!node.is_object() || !node.get("type").is_string()) return;
    const std::string_view type = node.get("type").str("decoder.type");
    if (type == "ByteLevel") {
        style.scheme = TokenScheme::byte_level;
    } else if (type == "Metaspace") {
        style.scheme = TokenScheme::metaspace;
        if (Json r = node.get("replacement"); r.is_string()) style.replacement = std::string(r.str("decoder.replacement"));
    } else if (type == "Replace") {  // the older Llama form: Replace "▁" -> " "
        Json p = node.get("pattern"), c = node.get("content");
        if (p.has("String") && c.is_string() && c.str("decoder.content") == " ") {
            style.scheme = TokenScheme::metaspace;
            style.replacement = std::string(p.get("String").str("decoder.pattern.String"));
        }
    } else if (type == "WordPiece") {
        style.scheme = TokenScheme::wordpiece;
    } else if (type == "ByteFallback") {
        style.byte_fallback = true;
    } else if (type == "Sequence") {
        Json list = node.get("decoders");
        for (std::size_t i = 0; i < list.size(); ++i) read_style(list[i], style);
    }
}

}  // namespace

namespace text {

TokenStyle read_token_style(Json decoder) {
    TokenStyle style;
    read_style(decoder, style);
    return style;
}

}  // namespace text

std::string visible_text(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = valid_char_at(text, i);
        if (n == 0) {
            out += hex_byte("<0x%02X>", static_cast<unsigned char>(text[i]));
            ++i;
            continue;
        }
        append_visible(out, decode_utf8(text, i).first, text.substr(i, n));
        i += n;
    }
    return out;
}

std::string display_token(std::string_view piece, const TokenStyle& style) {
    if (style.scheme == TokenScheme::byte_level) {
        std::string bytes;
        for (std::size_t i = 0; i < piece.size();) {
            const std::size_t n = valid_char_at(piece, i);
            const int b = n ? byte_level_byte(decode_utf8(piece, i).first) : -1;
            if (b < 0) return visible_text(piece);  // not a byte-level string (an added token)
            bytes += static_cast<char>(b);
            i += n;
        }
        return visible_text(bytes);
    }
    if (style.byte_fallback)
        if (const int b = fallback_byte(piece); b >= 0)
            return b < 0x80 ? visible_text(std::string(1, static_cast<char>(b))) : std::string(piece);
    if (style.scheme == TokenScheme::metaspace && !style.replacement.empty()) {
        std::string text;
        for (std::size_t at = 0;;) {
            const std::size_t hit = piece.find(style.replacement, at);
            text.append(piece.substr(at, hit - at));
            if (hit == std::string_view::npos) break;
            text += ' ';
            at = hit + style.replacement.size();
        }
        return visible_text(text);
    }
    return visible_text(piece);
}

TokenStyle token_style(const Tokenizer& tokenizer) { return tokenizer.impl().style; }

std::vector<std::string> display_tokens(const Tokenizer& tokenizer, std::span<const std::uint32_t> ids) {
    const Tokenizer::Impl& impl = tokenizer.impl();
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (const std::uint32_t id : ids) {
        bool added = false;
        for (const AddedToken& a : impl.vocab.added) added |= a.id == id;
        const auto piece = impl.vocab.token(id);
        if (!piece) out.push_back(std::to_string(id).insert(0, 1, '#'));
        else out.push_back(added ? visible_text(*piece) : display_token(*piece, impl.style));
    }
    return out;
}

}  // namespace attntrace
