// Pooling, the colour map, the head detectors, attention rollout and token labels against numpy.
// References: tests/fixtures/make_picture_fixtures.py -> cli/pictures.json.
#include <cmath>
#include <string>

#include <doctest/doctest.h>

#include "attntrace/attention/attention.hpp"
#include "attntrace/pictures/colormap.hpp"
#include "attntrace/attention/detectors.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/pictures/heatmap.hpp"
#include "attntrace/pictures/labels.hpp"
#include "attntrace/pictures/plot.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/tensor/random.hpp"
#include "attntrace/pictures/rollout.hpp"
#include "cli_fixtures.hpp"

using attntrace::Array;

namespace {

const nlohmann::json& fixtures() {
    static const nlohmann::json doc = cli_fixtures::load("pictures.json");
    return doc;
}

Array<double> tensor(const nlohmann::json& t) { return cli_fixtures::tensor(t["shape"], t["data"]); }

// The largest |got - want| over two equally long sequences, and where.
template <class A, class B>
void check_max_diff(const A& got, const B& want, std::size_t n, double tolerance, const std::string& what) {
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double d = std::abs(double(got[i]) - double(want[i]));
        if (d > worst || std::isnan(d)) worst = d, at = i;
    }
    INFO(what << ": max |diff| " << worst << " at " << at);
    CHECK(worst <= tolerance);
}

}  // namespace

TEST_CASE("pooled cells are numpy's block means") {
    for (const auto& c : fixtures()["pooling"]) {
        const Array<double> w = tensor(c["weights"]);
        const Array<double> want = tensor(c["pooled"]);
        const auto p = attntrace::pool_weights(w, c["max_cells"].get<std::size_t>());
        CHECK(p.q_block == c["q_block"].get<std::size_t>());
        CHECK(p.k_block == c["k_block"].get<std::size_t>());
        REQUIRE(p.cells.size() == want.size());
        check_max_diff(p.cells, want.data(), want.size(), 1e-6, "pooled " + attntrace::shape_string(w.shape()));
    }
}

TEST_CASE("repooling pooled cells gives the mean of the original weights") {
    const auto& c = fixtures()["pooling"][1];  // (1, 2, 37, 50)
    const Array<double> w = tensor(c["weights"]);
    const auto fine = attntrace::pool_weights(w, 16);
    const auto coarse = attntrace::repool(fine, 5, 5);
    // repool's blocks are whole fine cells: q 3 * ceil(13 / 5) = 9, k 4 * ceil(13 / 5) = 12
    CHECK(coarse.q_block == 9);
    CHECK(coarse.k_block == 12);
    Array<double> ref = Array<double>::from_shape({1, 2, coarse.rows, coarse.cols});
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t r = 0; r < coarse.rows; ++r)
            for (std::size_t col = 0; col < coarse.cols; ++col) {
                double sum = 0;
                for (std::size_t i = r * 9; i < std::min<std::size_t>(37, r * 9 + 9); ++i)
                    for (std::size_t j = col * 12; j < std::min<std::size_t>(50, col * 12 + 12); ++j) sum += w(0, h, i, j);
                ref(0, h, r, col) = sum / double(coarse.rows_in(r) * coarse.cols_in(col));
            }
    check_max_diff(coarse.cells, ref.data(), ref.size(), 1e-6, "repooled");
}

TEST_CASE("pooled sums built row by row equal numpy's block means") {
    for (const auto& c : fixtures()["pooling"]) {
        const Array<double> w = tensor(c["weights"]);
        const Array<double> want = tensor(c["pooled"]);
        const std::size_t rank = w.dimension(), lq = w.shape()[rank - 2], lk = w.shape()[rank - 1];
        attntrace::PooledSums sums(attntrace::Shape(w.shape().begin(), w.shape().end() - 2), lq, lk,
                                   c["max_cells"].get<std::size_t>());
        const std::size_t kb = sums.grid().k_block, cols = sums.grid().cols;
        for (std::size_t n = 0; n < w.size() / (lq * lk); ++n)
            for (std::size_t i = lq; i-- > 0;) {  // any order
                std::vector<double> bins(cols, 0.0);
                for (std::size_t j = 0; j < lk; ++j) bins[j / kb] += w.data()[(n * lq + i) * lk + j];
                sums.add_row(n, i, bins.data());
            }
        const auto p = std::move(sums).finish();
        check_max_diff(p.cells, want.data(), want.size(), 1e-6, "pooled row by row");
    }
}

TEST_CASE("a pooled grid never exceeds its cell bound") {
    const auto p = attntrace::pooled_grid({2, 4}, 32768, 32768, 1024);
    CHECK(p.rows == 1024);
    CHECK(p.cols == 1024);
    CHECK(p.q_block == 32);
    CHECK(attntrace::pooled_grid({1}, 1025, 3, 1024).rows == 513);  // block 2
    CHECK_THROWS_AS(attntrace::pool_block(5, 0), attntrace::UsageError);
}

TEST_CASE("a batch row or head past the weights is a usage error naming the picture's parameter") {
    const auto p = attntrace::pool_weights(Array<double>::from_shape({2, 3, 4, 4}), 4);  // B=2, H=3
    CHECK(attntrace::chosen_heads(p, 1, {}) == std::vector<std::size_t>{0, 1, 2});
    CHECK(attntrace::chosen_heads(p, 0, {2, 0}) == std::vector<std::size_t>{2, 0});
    CHECK_THROWS_WITH_AS(attntrace::chosen_heads(p, 2, {}), "batch: 2 is out of range (the weights have 2 batch rows)",
                         attntrace::UsageError);
    CHECK_THROWS_WITH_AS(attntrace::chosen_heads(p, 0, {0, 3}), "shown heads: head 3 is out of range (there are 3 heads)",
                         attntrace::UsageError);
}

TEST_CASE("viridis gives matplotlib's colour for each value") {
    for (const auto& c : fixtures()["colours"]) {
        const double t = cli_fixtures::number(c["t"]);
        const attntrace::Rgb got = attntrace::viridis(t);
        INFO("t = " << t);
        CHECK(int(got.r) == c["rgb"][0].get<int>());
        CHECK(int(got.g) == c["rgb"][1].get<int>());
        CHECK(int(got.b) == c["rgb"][2].get<int>());
    }
    CHECK(attntrace::viridis(std::nan("")) == attntrace::viridis(0.0));
    CHECK(attntrace::hex_colour(attntrace::viridis(0.0)) == "#440154");
}

TEST_CASE("the ASCII ramp goes from space to @") {
    CHECK(attntrace::ramp_char(0.0, 1.0) == ' ');
    CHECK(attntrace::ramp_char(1.0, 1.0) == '@');
    CHECK(attntrace::ramp_char(0.5, 0.5) == '@');
    CHECK(attntrace::ramp_char(0.01, 1.0) == ' ');
    CHECK(attntrace::ramp_char(0.5, 1.0) == '+');  // level round(0.5 * 9) = 5 of " .:-=+*#%@"
    CHECK(attntrace::ramp_char(0.3, 0.0) == ' ');  // an all-zero picture
}

TEST_CASE("head detectors match numpy, NaN where a head has no such key") {
    for (const auto& c : fixtures()["detectors"]) {
        const Array<double> w = tensor(c["weights"]);
        const auto got = attntrace::detect_heads(w);
        REQUIRE(got.size() == c["heads"].size());
        for (std::size_t h = 0; h < got.size(); ++h) {
            const auto& want = c["heads"][h];
            const double g[] = {got[h].previous_token, got[h].diagonal, got[h].first_token, got[h].max_weight};
            const char* names[] = {"previous_token", "diagonal", "first_token", "max_weight"};
            for (int k = 0; k < 4; ++k) {
                const double e = cli_fixtures::number(want[names[k]]);
                INFO("head " << h << " " << names[k] << ": got " << g[k] << ", numpy " << e);
                if (std::isnan(e)) CHECK(std::isnan(g[k]));
                else CHECK(std::abs(g[k] - e) <= 1e-12);
            }
        }
    }
}

TEST_CASE("heads are named by the first score past the threshold") {
    const auto& c = fixtures()["detectors"][0];  // head 1: previous-token, head 2: a sink on token 0
    const auto got = attntrace::detect_heads(tensor(c["weights"]));
    CHECK(attntrace::head_role(got[0]) == "");
    CHECK(attntrace::head_role(got[1]) == "previous-token");
    CHECK(attntrace::head_role(got[2]) == "sink");
    attntrace::HeadScores diagonal;
    diagonal.diagonal = 0.9;
    CHECK(attntrace::head_role(diagonal) == "diagonal");
}

TEST_CASE("rollout matches numpy's product of residual-averaged layers") {
    for (const auto& c : fixtures()["rollout"]) {
        std::vector<Array<double>> layers;
        std::vector<std::string> names;
        for (const auto& l : c["layers"]) {
            layers.push_back(tensor(l));
            names.push_back("w" + std::to_string(names.size()) + ".npy");
        }
        const Array<double> want = tensor(c["rollout"]);
        const Array<double> got = attntrace::attention_rollout(layers, names);
        REQUIRE(attntrace::shape_string(got.shape()) == attntrace::shape_string(want.shape()));
        check_max_diff(got.data(), want.data(), want.size(), 1e-12, "rollout");
    }
}

TEST_CASE("rollout refuses layers that do not line up") {
    const auto a = Array<double>::from_shape({2, 3, 4, 4});
    auto b = Array<double>::from_shape({2, 3, 5, 5});
    std::fill(b.begin(), b.end(), 0.2);
    Array<double> a1 = a;
    std::fill(a1.begin(), a1.end(), 0.25);
    CHECK_THROWS_WITH_AS(attntrace::attention_rollout<double>({a1, b}, {"w0.npy", "w1.npy"}),
                         "w1.npy: shape (2, 3, 5, 5) does not match w0.npy's (2, 3, 4, 4) (the same batch and length are needed)",
                         attntrace::ShapeError);
    auto bad = a1;
    bad(0, 0, 0, 0) = -1;
    CHECK_THROWS_AS(attntrace::attention_rollout<double>({bad}, {"w0.npy"}), attntrace::InputError);
    CHECK_THROWS_AS(attntrace::attention_rollout<double>({Array<double>::from_shape({3, 4})}, {"w.npy"}),
                    attntrace::ShapeError);
}

TEST_CASE("labels are lines of text or a JSON array of strings") {
    using attntrace::parse_labels;
    CHECK(parse_labels("the\ncat\r\nsat\n", "t.txt") == std::vector<std::string>{"the", "cat", "sat"});
    CHECK(parse_labels("a\n\nb", "t.txt") == std::vector<std::string>{"a", "", "b"});
    CHECK(parse_labels(" [\"<s>\", \"x\"]", "t.json") == std::vector<std::string>{"<s>", "x"});
    CHECK_THROWS_WITH_AS(parse_labels("[\"a\", 3]", "t.json"), "t.json: label 1 is 3, expected a string",
                         attntrace::InputError);
    CHECK_THROWS_AS(parse_labels("[\"a\"", "t.json"), attntrace::InputError);
}

TEST_CASE("pooled weights and head detectors are the same on the tiled and the weights-kept paths") {
    using namespace attntrace;
    // Lq = 600 spans several query blocks and cells that straddle them (block 10), Lk = 2500 three
    // key blocks of the online softmax, so the re-basing of the bins is exercised.
    const std::size_t lq = 600, lk = 2500;
    auto q = random_tensor<double>({2, 3, lq, 8}, Distribution::normal, 21);
    auto k = random_tensor<double>({2, 3, lk, 8}, Distribution::normal, 22);
    auto v = random_tensor<double>({2, 3, lk, 4}, Distribution::normal, 23);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        Masks<double> masks;
        masks.causal = causal;
        AttentionOptions kept, tiled;
        kept.need_weights = kept.row_stats = tiled.row_stats = true;
        kept.pooled_cells = tiled.pooled_cells = 64;
        tiled.threads = 2;
        const auto a = sdpa<double>(q, k, v, masks, kept);
        const auto b = sdpa<double>(q, k, v, masks, tiled);
        REQUIRE(a.pooled);
        REQUIRE(b.pooled);
        REQUIRE(!b.weights);
        // the weights-kept path against pool_weights (numpy-checked above) on its own weights
        const auto ref = pool_weights(*a.weights, 64);
        CHECK(a.pooled->q_block == ref.q_block);
        check_max_diff(a.pooled->cells, ref.cells, ref.cells.size(), 1e-6, "kept path vs pool_weights");
        check_max_diff(b.pooled->cells, ref.cells, ref.cells.size(), 1e-6, "tiled path vs pool_weights");
        // the detectors, row by row, against the weights
        const auto& rs = *b.row_stats;
        for (std::size_t row = 0; row < rs.first_token.size(); row += 7) {
            const std::size_t i = row % lq;
            const RowScores want = row_scores(a.weights->data() + row * lk, i, lk, false);
            CHECK(std::isnan(rs.diagonal[row]));  // Lq != Lk
            CHECK(std::abs(rs.first_token[row] - want.first_token) <= 1e-12);
            if (i == 0) CHECK(std::isnan(rs.previous_token[row]));
            else CHECK(std::abs(rs.previous_token[row] - want.previous_token) <= 1e-12);
            CHECK(std::abs(a.row_stats->first_token[row] - want.first_token) <= 1e-15);
        }
    }
}

TEST_CASE("the diagonal detector on both paths for self-attention") {
    using namespace attntrace;
    auto x = random_tensor<double>({1, 2, 1100, 4}, Distribution::normal, 31);
    Masks<double> masks;
    masks.causal = true;
    AttentionOptions kept, tiled;
    kept.need_weights = kept.row_stats = tiled.row_stats = true;
    const auto a = sdpa<double>(x, x, x, masks, kept);
    const auto b = sdpa<double>(x, x, x, masks, tiled);
    const auto want = detect_heads(*a.weights);
    for (const auto* rs : {&*a.row_stats, &*b.row_stats})
        for (std::size_t row = 0; row < rs->diagonal.size(); row += 13) {
            const std::size_t i = row % 1100;
            CHECK(std::abs(rs->diagonal[row] - double(a.weights->data()[row * 1100 + i])) <= 1e-12);
        }
    CHECK(want[0].diagonal > 0);
}

TEST_CASE("every line of a heatmap fits its width, header, scale and head names included") {
    const Array<double> w = attntrace::random_tensor<double>({2, 3, 40, 40}, attntrace::Distribution::uniform, 7);
    const auto pooled = attntrace::pool_weights(w, 1024);
    for (const bool truecolor : {false, true})
        for (std::size_t width = 8; width <= 100; ++width) {
            attntrace::HeatmapStyle style;
            style.truecolor = truecolor;
            style.width = width;
            style.names = {"previous-token", "", "sink"};
            const std::string text = attntrace::render_heatmaps(pooled, style);
            std::size_t start = 0, lines = 0;
            while (start < text.size()) {
                const std::size_t end = text.find('\n', start);
                std::string line = text.substr(start, end - start);
                start = end + 1, ++lines;
                for (std::size_t e; (e = line.find('\x1b')) != std::string::npos;) line.erase(e, line.find('m', e) - e + 1);
                std::size_t columns = 0;  // characters, a UTF-8 half-block counting one
                for (const unsigned char c : line) columns += (c & 0xC0) != 0x80;
                INFO("width " << width << (truecolor ? std::string(" (colour): ") : std::string(" (ramp): ")) << line);
                CHECK(columns <= std::max<std::size_t>(width, 3));  // a row is at least "i " and one cell
            }
            CHECK(lines > 4);
        }
}
