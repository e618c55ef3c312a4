#pragma once
// The picture flags mha, sdpa and rollout share: --heatmap (terminal), --plot FILE.png|.svg,
// --labels / --key-labels, --show-heads, --batch, the colour scale, and (mha, sdpa) --report
// FILE.html. The colour scale's flag is --scale for rollout (and model), --picture-scale for sdpa
// and mha, whose --scale is the softmax's.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/scale.hpp"
#include "flag_parsing.hpp"

struct PictureFlags {
    bool heatmap = false;
    std::string plot;        // FILE.png or FILE.svg
    std::string report;      // FILE.html
    std::string labels;      // query tokens: text (one per line) or a JSON array
    std::string key_labels;  // key tokens; default: --labels when Lq == Lk
    std::string show_heads;  // "0,3"
    std::size_t batch = 0;
    std::string scale;       // linear, row or log ("": the default)
    const char* scale_flag = "--scale";  // the flag that sets it, for messages

    bool any() const { return heatmap || !plot.empty() || !report.empty(); }
    // The pictures' files, for the output checks.
    std::vector<std::string> outputs() const { return {plot, report}; }
};

// The pictures' parameters (plot.hpp's chosen_heads) and the flags that set them.
inline const FlagNames kPictureFlagNames = {{"batch", "--batch"}, {"shown heads", "--show-heads"}};

// Cells per axis of the pooled weights kept for pictures (the bound: 1024 x 1024 per head).
inline constexpr std::size_t kPictureCells = 1024;

// SCALE_FLAG: the colour scale's flag, "--scale" or (where --scale is the softmax's) "--picture-scale".
void add_picture_flags(CLI::App& cmd, PictureFlags& flags, bool with_report, const char* scale_flag);

// The colour scale the flags choose (UsageError naming its flag for another word).
attntrace::ColourScale colour_scale(const PictureFlags& flags);
// Adds the colour scale's flag to CMD, binding TARGET; the help names the default and why.
void add_scale_flag(CLI::App& cmd, std::string& target, const char* flag);

// Checks the flag values that need no data (--plot's extension, --show-heads' syntax).
void check_picture_flags(const PictureFlags& flags);

// The heads --show-heads names (empty: every head).
std::vector<std::size_t> shown_heads(const PictureFlags& flags);

// Token labels for the query and key axes; checks their counts against LQ and LK.
struct AxisLabels {
    std::vector<std::string> query, key;
};
AxisLabels load_axis_labels(const PictureFlags& flags, std::size_t lq, std::size_t lk);

// Writes --plot and returns the --heatmap text ("" without --heatmap), coloured when the text goes
// to a colour terminal (STREAM). NAMES: per head, a role for the heatmap header (may be empty).
std::string draw_pictures(const PictureFlags& flags, const attntrace::PooledWeights& weights, const std::string& title,
                          const AxisLabels& labels, FILE* stream, const std::vector<std::string>& names);

// Colour and Unicode on a terminal only, and never when NO_COLOR is set to anything non-empty.
bool terminal_style(FILE* stream);
