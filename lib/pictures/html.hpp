#pragma once
// Pieces of the self-contained HTML pages (report.cpp, model_report.cpp).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attntrace {

// J as text for a <script type="application/json"> element ("<" escaped, so "</script>" in a
// token cannot close it early; invalid UTF-8 replaced).
std::string script_json(const nlohmann::json& j);

// BYTES in base64 (RFC 4648, with padding), as the page's atob() reads it.
std::string base64(std::string_view bytes);

}  // namespace attntrace
