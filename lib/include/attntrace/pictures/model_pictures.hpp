#pragma once
// Pictures of a whole model: every head of every kept layer, on the sentence that was run.
//   model_heatmaps:    each head as a terminal heatmap, the tokens as row and column labels;
//   model_plot_png/svg: one image, layers x heads thumbnails with layer and head numbers, the
//                       tokens on both axes of every thumbnail when they can be read, a colour bar;
//   model_report_html: one self-contained page: the text and its tokens, the layer x head grid (a
//                       click opens a head large, its weights loaded from data embedded in the
//                       page), the detector table, rollout across the kept layers, the predictions.
// All three draw the weights pooled as the forward left them (PooledWeights, at most
// kModelPictureCells cells per axis) under one colour scale (scale.hpp).
//
// Legend: L sequence length, K kept layers, H heads, C cells per axis (C = L up to the bound).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/scale.hpp"

namespace attntrace {

// The most cells per axis the report keeps of a head (its full resolution up to this length).
inline constexpr std::size_t kModelPictureCells = 1024;

// One head of a kept layer, as the detector table shows it.
struct ModelHead {
    std::size_t layer = 0, head = 0;
    std::string role;                                 // "previous-token", "sink", "induction" ...; "" none
    nlohmann::json scores = nlohmann::json::object(); // {"mean_entropy", "previous_token", ...}: the trace's fields
};

struct ModelPictures {
    std::string title;                      // "full_gpt2: gpt2, 3 layers, 4 heads, 12 tokens"
    std::string text;                       // the text that was run ("" for ids)
    std::vector<std::string> tokens;        // (L) as a reader sees them (token_display.hpp)
    std::vector<std::uint32_t> ids;         // (L)
    std::vector<std::size_t> layers;        // (K) the kept layers' numbers
    std::vector<PooledWeights> weights;     // (K) each of lead (H): (H, C, C)
    std::vector<ModelHead> heads;           // (K * H) layer by layer
    nlohmann::json predictions = nlohmann::json::array();  // [{"position", "top": [{"text", "probability"}]}]
    std::optional<PooledWeights> rollout;   // lead (1): (1, C, C), rollout across the kept layers
    ColourScale scale = kDefaultColourScale;

    std::size_t head_count() const;  // H
    // The role of head H of the K-th kept layer ("" none).
    const std::string& role(std::size_t k, std::size_t h) const;
};

// Every head of every kept layer as a terminal heatmap (heatmap.hpp's colours and ramp), one
// query row per line and two columns per key, the tokens at the left of the rows and written
// down the columns above them; pooled to fit WIDTH columns, every line within WIDTH. TRUECOLOR:
// 24-bit colour cells and the tokens as they are; otherwise the ASCII ramp and ASCII tokens
// (a space mark as '_', any other non-ASCII character as '?').
std::string model_heatmaps(const ModelPictures& pictures, bool truecolor, std::size_t width);

// The layers x heads grid as a PNG (a tEXt chunk "attntrace:panels" holds each thumbnail's place:
// [{"layer", "head", "x", "y", "cell", "rows", "cols"}]) or an SVG (<g class="panel" data-layer
// data-head data-rows data-cols>). OutputError when cairo and pango cannot be loaded.
std::string model_plot_png(const ModelPictures& pictures);
std::string model_plot_svg(const ModelPictures& pictures);

// The bytes the report embeds for the weights are about this many per cell: a head's weights are
// 8 bits per cell, each row scaled to its own maximum, deflated (zlib) and base64-encoded.
// OutputError when zlib cannot be loaded.
std::string model_report_html(const ModelPictures& pictures);

// At most how many bytes the plot of LAYERS x HEADS heads of LENGTH tokens takes (its image), for
// the memory budget before the run.
std::size_t model_plot_bytes(std::size_t layers, std::size_t heads, std::size_t length);

}  // namespace attntrace
