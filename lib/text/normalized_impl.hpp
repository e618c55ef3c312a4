#pragma once
// map_chars, the template of normalized.hpp.
#include "unicode.hpp"

namespace attntrace::text {

template <class F>
bool map_same_length(NormStr& s, F&& f) {
    const std::string& in = s.text;
    std::string out(in.size(), '\0');
    for (std::size_t i = 0; i < in.size();) {
        const auto b = static_cast<unsigned char>(in[i]);
        if (b < 0x80) {  // ASCII, the common case, without decoding
            const char32_t m = f(char32_t(b));
            if (m >= 0x80) return false;
            out[i++] = static_cast<char>(m);
            continue;
        }
        const auto [c, len] = decode_utf8(in, i);
        const char32_t m = f(c);
        if (m > 0x10FFFF || utf8_length(m) != len) return false;
        encode_utf8(m, out.data() + i);
        i += len;
    }
    s.text.swap(out);
    return true;
}

template <class F>
void map_chars(NormStr& s, F&& f) {
    Rewrite r(s);
    std::u32string out;
    std::vector<Change> changes;
    for (std::size_t i = 0; i < s.text.size();) {
        const auto [c, len] = decode_utf8(s.text, i);
        out.clear();
        f(c, out);
        if (!(out.size() == 1 && out[0] == c)) {
            changes.clear();
            for (std::size_t k = 0; k < out.size(); ++k) changes.push_back({out[k], k == 0 ? 0 : 1});
            r.edit(i, i + len, changes.data(), changes.size(), out.empty() ? 1 : 0);
        }
        i += len;
    }
    r.finish();
}

}  // namespace attntrace::text
