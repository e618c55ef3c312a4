// The texts of a JSON Lines file, for `tokenize --jsonl` (many texts through one loaded tokenizer).
#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "json_view.hpp"

namespace attntrace {

std::vector<std::string> json_lines_texts(std::string_view bytes, const std::string& file) {
    std::vector<std::string> texts;
    std::size_t line = 0;
    for (std::size_t at = 0; at < bytes.size();) {
        std::size_t end = bytes.find('\n', at);
        if (end == std::string_view::npos) end = bytes.size();
        const std::string_view row = bytes.substr(at, end - at);
        at = end + 1;
        ++line;
        if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // a blank line
        const std::string where = file + ":" + std::to_string(line);
        const text::JsonDoc doc(row, where);
        text::Json value = doc.root();
        if (value.is_object()) value = value.get("text");
        if (!value.is_string())
            throw InputError(where + ": expected a JSON string or an object with a \"text\" string");
        texts.emplace_back(value.str("text"));
    }
    return texts;
}

}  // namespace attntrace
