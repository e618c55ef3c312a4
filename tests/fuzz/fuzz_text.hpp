#pragma once
// What the text fuzz targets (fuzz_tokenizer_text, fuzz_tokenizer_gguf) share: their tokenizers'
// loading, and the UTF-8 check they hold encode's verdict to.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/text/tokenizer.hpp"

// The tokenizers FOLDER/NAME + SUFFIX for each of NAMES, FOLDER from the environment variable ENV
// (run_fuzz.sh sets it); TARGET exits 2 naming ENV when it is unset.
template <std::size_t N>
std::vector<attntrace::Tokenizer>* load_tokenizers(const char* target, const char* env, const char* const (&names)[N], const char* suffix) {
    const char* dir = std::getenv(env);
    if (!dir) {
        std::fprintf(stderr, "%s: set %s to the folder of its tokenizers (run_fuzz.sh does)\n", target, env);
        std::exit(2);
    }
    auto* out = new std::vector<attntrace::Tokenizer>;
    for (const char* name : names) out->push_back(attntrace::Tokenizer::load(std::string(dir) + "/" + name + suffix));
    return out;
}

// Whether S is UTF-8: the standard's table (Unicode 3.9, D92), independent of lib/text's validator.
inline bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    while (i < s.size()) {
        const unsigned char b = at(i);
        std::size_t n = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
        if (n > 1 && (at(i + 1) < lo || at(i + 1) > hi)) return false;
        for (std::size_t k = 2; k < n; ++k)
            if (at(i + k) < 0x80 || at(i + k) > 0xBF) return false;
        i += n;
    }
    return true;
}
