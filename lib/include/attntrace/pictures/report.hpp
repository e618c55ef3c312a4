#pragma once
// --report FILE.html: one self-contained page (no network, no external script, style or font)
// with every head's heatmap (drawn by the page's own script on <canvas class="heatmap">), the
// head statistics table, the text trace, and the query tokens: hovering a token or a heatmap row
// shows that query's top keys and their weights.
// The page sets data-heatmaps="N" on <body> once it has drawn N heatmaps, and data-errors on any
// script error; opened as FILE.html#selftest it also hovers query 0 of the first head and puts
// the tip's text in data-selftest (the browser test reads these from the dumped DOM).
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/scale.hpp"

namespace attntrace {

struct ReportData {
    std::string title;                      // "mha: 2 heads ..." (the trace's header)
    std::string trace_text;                 // the text trace, without colour
    nlohmann::json head_stats;              // the JSON trace's "head_stats" array
    std::vector<std::string> query_labels;  // (Lq); empty: indices
    std::vector<std::string> key_labels;    // (Lk); empty: indices
    std::size_t batch = 0;                  // which batch row the heatmaps show
    ColourScale scale = kDefaultColourScale;
};

// WEIGHTS are shown pooled to at most 128 x 128 cells per head.
std::string html_report(const PooledWeights& weights, const ReportData& data);

}  // namespace attntrace
