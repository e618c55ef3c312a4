#pragma once
// map_chars, the template of normalized.hpp.
#include "unicode.hpp"

namespace attntrace::text {

template <class F>
void map_chars(NormStr& s, F&& f) {
    std::vector<Change> changes;
    changes.reserve(s.text.size());
    std::u32string out;
    std::size_t removed_first = 0;   // characters removed before the first kept one
    int pending_removed = 0;         // removed since the last kept character
    bool kept_any = false;
    for (std::size_t i = 0; i < s.text.size();) {
        const auto [c, len] = decode_utf8(s.text, i);
        i += len;
        out.clear();
        f(c, out);
        if (out.empty()) {
            if (kept_any) --changes.back().change, ++pending_removed;
            else ++removed_first;
            continue;
        }
        pending_removed = 0;
        kept_any = true;
        changes.push_back({out[0], 0});
        for (std::size_t k = 1; k < out.size(); ++k) changes.push_back({out[k], 1});
    }
    (void)pending_removed;
    transform(s, 0, s.text.size(), changes, removed_first);
}

}  // namespace attntrace::text
