// The trace renderers (text and JSON) on a real run of the core: sdpa on Q = 0, so that every
// allowed key of a row gets the same weight and the expected statistics follow from the masks
// alone: a row with n allowed keys has entropy ln n and top weight 1/n (its first key), a row
// with none is empty, and a NaN query row is NaN, not empty. The layout expected is the one the
// README documents ("The trace", "--format json").
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/trace.hpp"

using namespace attntrace;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

// sdpa on Q (1, 3, 2) = 0 with row 2 NaN, K (1, 4, 2), V (1, 4, 2), causal, key 0 masked for
// queries 0 and 1: query 0 sees no key (empty), query 1 sees key 1 only (entropy 0, weight 1),
// query 2 is NaN.
struct Run {
    StageRecorder<double> recorder{{}, true};
    AttentionResult<double> result;
    TraceContext context;

    Run() {
        Array<double> q = Array<double>::from_shape({1, 3, 2});
        q.fill(0.0);
        q(0, 2, 0) = std::numeric_limits<double>::quiet_NaN();
        Array<double> k = Array<double>::from_shape({1, 4, 2}), v = Array<double>::from_shape({1, 4, 2});
        for (std::size_t i = 0; i < k.size(); ++i) k.data()[i] = double(i), v.data()[i] = double(i) / 8;
        Masks<double> masks;
        masks.causal = true;
        Array<double> mask = Array<double>::from_shape({3, 4});
        mask.fill(0.0);
        mask(0, 0) = mask(1, 0) = 1;  // queries 0 and 1 may not see key 0
        masks.attn_mask = mask, masks.attn_mask_is_bool = true, masks.attn_mask_name = "m.npy";
        AttentionOptions options;
        options.row_stats = true, options.need_weights = true;
        options.query_name = "q.npy", options.key_name = "k.npy", options.value_name = "v.npy";
        result = sdpa(q, k, v, masks, options, &recorder);
        context.header = "sdpa: header line";
        context.command = "sdpa";
        context.outputs = {{"output", "out.npy"}, {"attn_weights", "-"}, {"dumps", nlohmann::json::array()}};
    }
};

}  // namespace

TEST_CASE("the text trace: header, one aligned line per stage, what was written, head statistics") {
    Run run;
    REQUIRE(run.result.empty_rows == 1);
    const auto lines = lines_of(render_text_trace(run.context, run.recorder.stages(), run.result.row_stats, TextStyle{}));
    REQUIRE(lines.size() == 1 + 7 + 1 + 2 + 2);
    CHECK(lines[0] == "sdpa: header line");
    // names padded to the longest ("masked_scores"), shapes to the longest, then the note
    CHECK(lines[1] == "query          (1, 3, 2)  q.npy");
    CHECK(lines[4] == "scores         (1, 3, 4)  Q @ K^T * 0.7071067811865475");
    CHECK(lines[5] == "masked_scores  (1, 3, 4)  causal & m.npy, 1 row with no allowed key");
    CHECK(lines[6] == "weights        (1, 3, 4)  softmax over keys");
    CHECK(lines[7] == "output         (1, 3, 2)  weights @ V");
    CHECK(lines[8] == "wrote output out.npy, attn_weights stdout");
    // row statistics (1, 3): Q's one leading dim is the head axis, no batch axis
    CHECK(lines[9] == "head statistics: mean entropy of the weight rows (nats); per query, the key with the most weight");
    // query 0: empty ("none", counted); query 1: key 1 with weight 1.00; query 2: NaN (not empty)
    CHECK(lines[10] == "head 0  entropy nan  empty rows 1  q0->none q1->k1 1.00 q2->nan");
    // then the head detectors (test_pictures.cpp checks their values against numpy)
    CHECK(lines[11].starts_with("head detectors: means over batch and query rows of w[i, i-1], w[i, i], w[i, 0]"));
    CHECK(lines[12].starts_with("head 0  previous_token "));
}

TEST_CASE("the text trace on a terminal: Unicode notes and arrows, bold and dim, values under stages") {
    Run run;
    TextStyle style;
    style.unicode = style.color = style.values = true;
    const std::string text = render_text_trace(run.context, run.recorder.stages(), run.result.row_stats, style);
    CHECK(text.find("Q · Kᵀ × 0.7071067811865475") != std::string::npos);
    CHECK(text.find("q1→k1 1.00") != std::string::npos);
    CHECK(text.rfind("\x1b[1msdpa: header line\x1b[0m\n", 0) == 0);
    CHECK(text.find("tensor([[[") != std::string::npos);  // --trace values: torch's str() of each stage
    TextStyle plain;
    plain.top_queries = 1;
    const std::string short_text = render_text_trace(run.context, run.recorder.stages(), run.result.row_stats, plain);
    CHECK(short_text.find("\x1b[") == std::string::npos);
    CHECK(short_text.find(" q0->none\n") != std::string::npos);  // only the first query
}

TEST_CASE("the JSON trace: stages with finite stats, head statistics, empty rows, no NaN in the text") {
    Run run;
    const nlohmann::json doc = trace_json(run.context, run.recorder.stages(), run.result.row_stats, run.result.empty_rows, true);
    CHECK(doc["command"] == "sdpa");
    REQUIRE(doc["stages"].size() == 7);
    const auto& weights = doc["stages"][5];
    CHECK(weights["name"] == "weights");
    CHECK(weights["shape"] == nlohmann::json::array({1, 3, 4}));
    // weights: row 0 zeros, row 1 (0, 1, 0, 0), row 2 NaN: min 0, max 1, mean 1/8 of the 8 finite
    CHECK(weights["stats"]["nan"] == 4);
    CHECK(weights["stats"]["inf"] == 0);
    CHECK(weights["stats"]["min"].get<double>() == 0.0);
    CHECK(weights["stats"]["max"].get<double>() == 1.0);
    CHECK(weights["stats"]["mean"].get<double>() == doctest::Approx(1.0 / 8));
    CHECK(weights["data"][0][1] == nlohmann::json::array({0.0, 1.0, 0.0, 0.0}));
    CHECK(std::isnan(weights["data"][0][2][0].get<double>()));  // dump() writes NaN as null
    const auto& masked = doc["stages"][4];
    CHECK(masked["attributes"]["masks"] == "causal & m.npy");
    CHECK(masked["attributes"]["empty_rows"] == 1);
    CHECK(masked["stats"]["inf"] == 4 + 3 + 1);  // the -inf of the masked keys, per row
    CHECK(masked["stats"]["nan"] == 3);          // row 2's allowed keys
    REQUIRE(doc["head_stats"].size() == 1);
    const auto& head = doc["head_stats"][0];
    CHECK(head["empty_rows"] == 1);
    CHECK(std::isnan(head["mean_entropy"].get<double>()));  // the NaN row's entropy is NaN
    CHECK(head["top"][0]["key"].is_null());
    CHECK(head["top"][1]["key"] == 1);
    CHECK(head["top"][1]["weight"].get<double>() == 1.0);
    CHECK(head["top"][1]["entropy"].get<double>() == 0.0);
    CHECK(doc["empty_rows"] == 1);
    CHECK(doc["outputs"]["attn_weights"] == "-");
    const std::string text = doc.dump();
    CHECK(text.find("\"mean_entropy\":null") != std::string::npos);
    CHECK(text.find("NaN") == std::string::npos);
    CHECK(text.find("Infinity") == std::string::npos);
}

TEST_CASE("head statistics average the entropy over the non-empty rows of every batch") {
    // two batches, one head, two queries: entropies ln 2, (empty), ln 4, 0
    RowStats stats{{2, 1, 2}, {std::log(2.0), 0.0, std::log(4.0), 0.0}, {0, -1, 3, 1}, {0.5, 0.0, 0.25, 1.0}};
    const auto heads = summarize_heads(stats, 8);
    REQUIRE(heads.size() == 1);
    CHECK(heads[0].empty_rows == 1);
    CHECK(heads[0].mean_entropy == doctest::Approx((std::log(2.0) + std::log(4.0) + 0.0) / 3));
    REQUIRE(heads[0].top.size() == 2);  // batch 0's queries
    CHECK(heads[0].top[0].key == 0);
    CHECK(heads[0].top[1].key == -1);
}
