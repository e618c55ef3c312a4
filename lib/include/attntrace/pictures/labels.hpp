#pragma once
// Token labels for the axes of pictures (--labels, --key-labels): a text file with one token per
// line, or a JSON array of strings (a file whose first non-blank byte is '[').
#include <string>
#include <string_view>
#include <vector>

namespace attntrace {

// The labels in PATH; throws InputError naming PATH when it cannot be read or parsed.
std::vector<std::string> load_labels(const std::string& path);
// The same from BYTES already read; NAME is used in messages.
std::vector<std::string> parse_labels(std::string_view bytes, const std::string& name);

}  // namespace attntrace
