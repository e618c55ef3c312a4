#pragma once
// Text for a terminal, shared by the heatmaps of one layer (heatmap.cpp) and of a whole model
// (model_heatmap.cpp).
#include <string>
#include <vector>

#include "attntrace/pictures/colormap.hpp"

namespace attntrace {

// The 24-bit colour escape for C as the foreground or the background.
std::string colour_escape(Rgb c, bool foreground);

// WORDS in lines of at most WIDTH characters, one space between words (a word longer than WIDTH is
// cut), each line ended by a newline.
std::string wrapped(const std::vector<std::string>& words, std::size_t width);

// TEXT's space-separated words.
std::vector<std::string> words_of(const std::string& text);

// "1 query", "4 queries"
std::string cell_text(std::size_t n, const char* one, const char* many);

}  // namespace attntrace
