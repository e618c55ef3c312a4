// The format sniffer (sniff.hpp).
#include "attntrace/io/sniff.hpp"

namespace attntrace {

namespace {

constexpr std::string_view npy_magic = "\x93NUMPY";
constexpr std::uint64_t safetensors_max_header = 100'000'000;  // the reference's MAX_HEADER_SIZE

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool looks_like_safetensors(std::string_view head, std::optional<std::uint64_t> file_size) {
    if (head.size() < 10 || head[8] != '{') return false;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[i])) << (8 * i);
    return n >= 2 && (file_size ? n <= *file_size - 8 : n <= safetensors_max_header);
}

}  // namespace

Sniffed sniff_format(std::string_view head, std::optional<std::uint64_t> file_size) {
    if (head.empty()) return Sniffed::empty;
    if (head.starts_with(npy_magic) || npy_magic.starts_with(head)) return Sniffed::npy;
    if (looks_like_safetensors(head, file_size)) return Sniffed::safetensors;
    std::size_t first = 0;
    while (first < head.size() && is_json_space(head[first])) ++first;
    if (first == head.size()) return Sniffed::blank;
    const char c = head[first];
    const bool json = c == '[' || c == '{' || c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I';
    return json ? Sniffed::json : Sniffed::unknown;
}

std::string bytes_repr(std::string_view bytes, std::size_t limit) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "b'";
    for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '\'' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    out += '\'';
    if (bytes.size() > limit) out += "...";
    return out;
}

}  // namespace attntrace
