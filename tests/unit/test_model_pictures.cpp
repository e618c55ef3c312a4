// Pictures of a whole model (model_pictures.hpp) on crafted weights: head h of kept layer k puts
// query i's weight on key TARGET(k, h, i), so the brightest cell of each row is known; and the
// rollout built block by block against attention_rollout.
#include <algorithm>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "attntrace/pictures/model_pictures.hpp"
#include "attntrace/pictures/rollout.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/random.hpp"

namespace {

using attntrace::ModelPictures;

constexpr std::size_t kLength = 6, kHeads = 3;

std::size_t target(std::size_t k, std::size_t h, std::size_t i) { return (i * (k + 1) + h) % kLength; }

ModelPictures crafted(attntrace::ColourScale scale = attntrace::ColourScale::row) {
    ModelPictures m;
    m.title = "crafted: 2 layers, 3 heads, 6 tokens";
    m.text = "the cat 你好 sat 😀";
    m.tokens = {"<s>", "the", "\u2423cat", "\u4f60\u597d", "sat", "\U0001F600"};
    m.ids = {0, 1, 2, 3, 4, 5};
    m.layers = {0, 2};
    for (std::size_t k = 0; k < 2; ++k) {
        attntrace::PooledWeights w = attntrace::pooled_grid({kHeads}, kLength, kLength, 1024);
        for (std::size_t h = 0; h < kHeads; ++h)
            for (std::size_t i = 0; i < kLength; ++i) {
                float* row = w.plane(h) + i * kLength;
                std::fill(row, row + kLength, 0.02f);
                row[target(k, h, i)] = 0.9f;
            }
        m.weights.push_back(w);
        for (std::size_t h = 0; h < kHeads; ++h) m.heads.push_back({m.layers[k], h, h == 1 ? "sink" : "", {{"mean_entropy", 0.5}}});
    }
    m.scale = scale;
    return m;
}

// Terminal columns a line takes: escapes take none, East Asian wide characters and emoji two.
std::size_t columns_of(std::string line) {
    for (std::size_t e; (e = line.find('\x1b')) != std::string::npos;) line.erase(e, line.find('m', e) - e + 1);
    std::size_t n = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const auto b = static_cast<unsigned char>(line[i]);
        if ((b & 0xC0) == 0x80) continue;
        n += b >= 0xE4 && b <= 0xE9 ? 2 : b >= 0xF0 ? 2 : 1;  // CJK (U+4E00..U+9FFF) and 4-byte emoji
    }
    return n;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        out.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

}  // namespace

TEST_CASE("a whole model's heatmaps: every head, its role, the brightest key where the weights put it") {
    const ModelPictures m = crafted();
    const std::string text = attntrace::model_heatmaps(m, false, 80);
    const auto lines = lines_of(text);
    for (std::size_t k = 0; k < 2; ++k)
        for (std::size_t h = 0; h < kHeads; ++h) {
            const std::string title = "layer " + std::to_string(m.layers[k]) + " head " + std::to_string(h) + (h == 1 ? " (sink)" : "");
            const auto at = std::find(lines.begin(), lines.end(), title);
            REQUIRE_MESSAGE(at != lines.end(), title);
            // the column labels (ASCII: "_cat", "??" for CJK), then the rows: "i label cells"
            auto row = std::find_if(at, lines.end(), [](const std::string& l) { return l.rfind("0 ", 0) == 0; });
            for (std::size_t i = 0; i < kLength; ++i, ++row) {
                REQUIRE(row != lines.end());
                const std::string cells = row->substr(7);  // after "i " and the labels (4 wide) and a space
                INFO(*row);
                CHECK(cells.find("@@") == 2 * target(k, h, i));
            }
        }
    CHECK(text.find("_cat") != std::string::npos);  // the space mark in ASCII
    for (const auto& l : lines)
        for (unsigned char c : l) CHECK_MESSAGE(c < 0x80, l);  // ASCII off a terminal
}

TEST_CASE("every line of a whole model's heatmaps fits its width, in ASCII and in colour") {
    const ModelPictures m = crafted();
    for (const bool truecolor : {false, true})
        for (std::size_t width = 12; width <= 100; width += 4)
            for (const auto& line : lines_of(attntrace::model_heatmaps(m, truecolor, width))) {
                INFO("width " << width << (truecolor ? " (colour): " : " (ASCII): ") << line);
                CHECK(columns_of(line) <= width);
            }
}

TEST_CASE("the colour scale is named once, and row is the default") {
    CHECK(attntrace::model_heatmaps(crafted(), false, 80).find("scale: row (each row from 0 to its own maximum)") !=
          std::string::npos);
    CHECK(attntrace::model_heatmaps(crafted(attntrace::ColourScale::log), false, 80).find("scale: log from ") !=
          std::string::npos);
}

TEST_CASE("the whole-model SVG has one thumbnail per head with the tokens on both axes") {
    const std::string svg = attntrace::model_plot_svg(crafted());
    std::size_t panels = 0;
    for (std::size_t at = 0; (at = svg.find("<g class=\"panel\"", at)) != std::string::npos; ++at) ++panels;
    CHECK(panels == 2 * kHeads);
    CHECK(svg.find("data-layer=\"2\" data-head=\"1\"") != std::string::npos);
    std::size_t klabels = 0;
    for (std::size_t at = 0; (at = svg.find("class=\"klabel\"", at)) != std::string::npos; ++at) ++klabels;
    CHECK(klabels == 2 * kHeads * kLength);  // every thumbnail's key axis labelled
    CHECK(svg.find(">\u4f60\u597d</text>") != std::string::npos);
    CHECK(svg.find(">row scale</text>") != std::string::npos);
    CHECK(svg.find(">layer 2</text>") != std::string::npos);
}

TEST_CASE("the whole-model PNG holds every thumbnail's place") {
    const std::string png = attntrace::model_plot_png(crafted());
    REQUIRE(png.substr(1, 3) == "PNG");
    CHECK(png.find("attntrace:panels") != std::string::npos);
    CHECK(png.find("\"layer\":2") != std::string::npos);
}

TEST_CASE("the report is one page that loads nothing from outside") {
    const std::string html = attntrace::model_report_html(crafted());
    CHECK(html.find(" src=") == std::string::npos);
    CHECK(html.find(" href=") == std::string::npos);
    CHECK(html.find("http") == std::string::npos);
    CHECK(html.find("\\u003c") != std::string::npos);  // "<s>" escaped inside the script
    CHECK(html.find("DecompressionStream") != std::string::npos);
}

TEST_CASE("nothing to draw is a usage error") {
    ModelPictures empty;
    CHECK_THROWS_AS(attntrace::model_plot_svg(empty), attntrace::UsageError);
    CHECK_THROWS_AS(attntrace::model_report_html(empty), attntrace::UsageError);
}

TEST_CASE("rollout built from blocks in any order equals rollout of the whole layers") {
    const std::size_t layers = 3, heads = 2, l = 9;
    std::vector<attntrace::Array<double>> weights;
    std::vector<std::string> names;
    for (std::size_t k = 0; k < layers; ++k) {
        auto w = attntrace::random_tensor<double>({heads, l, l}, attntrace::Distribution::uniform, 11 + k);
        for (std::size_t r = 0; r < heads * l; ++r) {  // softmax-like rows: positive, summing to 1
            double sum = 0;
            for (std::size_t j = 0; j < l; ++j) sum += (w.data()[r * l + j] = std::abs(w.data()[r * l + j]));
            for (std::size_t j = 0; j < l; ++j) w.data()[r * l + j] /= sum;
        }
        weights.push_back(w);
        names.push_back("w" + std::to_string(k));
    }
    const auto want = attntrace::attention_rollout(weights, names);
    attntrace::RolloutBuilder<double> built(heads, l);
    std::mt19937 rng(3);
    for (const auto& w : weights) {
        std::vector<std::size_t> blocks;  // blocks of 4 weights, shuffled
        for (std::size_t at = 0; at < w.size(); at += 4) blocks.push_back(at);
        std::shuffle(blocks.begin(), blocks.end(), rng);
        for (std::size_t at : blocks) built.add(at, w.data() + at, std::min<std::size_t>(4, w.size() - at));
        built.finish_layer();
    }
    REQUIRE(built.layers() == layers);
    double worst = 0;
    for (std::size_t i = 0; i < l * l; ++i) worst = std::max(worst, std::abs(built.rollout().data()[i] - want.data()[i]));
    INFO("max |diff| " << worst);
    CHECK(worst < 1e-12);
}
