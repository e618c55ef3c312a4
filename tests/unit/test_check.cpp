// attntrace check's comparison rules: the dtype's default tolerance, the layouts and conventions a
// stage file may use and still match, the stage files of a directory, and a diagnosis end to end on
// a small sdpa. The fixtures of tests/fixtures/check (made by tests/goldens/make_check_fixtures.py
// from other people's code) are checked by tests/e2e/check.sh.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "attntrace/check/check.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

using attntrace::Array;
using attntrace::DType;
using attntrace::StageFile;
using attntrace::StageStatus;
using attntrace::StageValues;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();

Array<double> iota(const attntrace::Shape& shape) {
    Array<double> a = Array<double>::from_shape(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = 0.25 * static_cast<double>(i) - 1;
    return a;
}

StageFile file(const std::string& stage, Array<double> values, DType dtype = DType::f8) {
    return {stage, stage + ".npy", dtype, std::move(values)};
}

}  // namespace

TEST_CASE("the default tolerance follows the stage file's dtype, and --rtol/--atol replace it") {
    const Array<double> ref = {{-2.0, 0.5}, {-inf, 1.0}};
    const auto f8 = attntrace::default_tolerance(DType::f8, ref, {});
    CHECK(f8.rtol == 1e-5);
    CHECK(f8.atol == 1e-8);
    const auto f4 = attntrace::default_tolerance(DType::f4, ref, {});
    CHECK(f4.rtol == 1e-4);
    CHECK(f4.atol == doctest::Approx(2e-5));  // 1e-5 * max |finite ref|
    const auto f2 = attntrace::default_tolerance(DType::f2, ref, {});
    CHECK(f2.rtol == 1e-2);
    CHECK(f2.atol == doctest::Approx(2e-3));
    CHECK(attntrace::default_tolerance(DType::f4, Array<double>{0.0, 0.0}, {}).atol == 1e-8);
    const auto over = attntrace::default_tolerance(DType::f4, ref, {0.5, std::nullopt});
    CHECK(over.rtol == 0.5);
    CHECK(over.atol == doctest::Approx(2e-5));
}

TEST_CASE("a large negative fill where the reference masked a score reads as -inf") {
    const StageValues run = {{"masked_scores", Array<double>{{{{1.0, -inf}, {2.0, -inf}}}}}};
    auto c = attntrace::check_stage(file("masked_scores", {{{{1.0, -1e6}, {2.0, -1e6}}}}), run, {});
    CHECK(c.status == StageStatus::match);
    REQUIRE(c.conventions.size() == 1);
    CHECK(c.conventions[0] == "masked scores as a -1e+06 fill (read as -inf)");
    c = attntrace::check_stage(file("masked_scores", {{{{1.0, -3.4e38}, {2.0, -1e9}}}}), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.conventions.at(0).find("large negative fills") != std::string::npos);
    c = attntrace::check_stage(file("masked_scores", {{{{1.0, -100.0}, {2.0, -inf}}}}), run, {});
    CHECK(c.status == StageStatus::differs);  // -100 is a score, not a fill
    c = attntrace::check_stage(file("masked_scores", {{{{-1e6, -inf}, {2.0, -inf}}}}), run, {});
    CHECK(c.status == StageStatus::differs);  // a fill where the reference allowed the key
}

TEST_CASE("NaN in a query row with no allowed key matches the reference's zeros, and only there") {
    StageValues run = {{"weights", Array<double>{{{0.0, 0.0, 0.0}, {0.5, 0.5, 0.0}}}}};
    auto c = attntrace::check_stage(file("weights", {{{nan_, nan_, nan_}, {0.5, 0.5, 0.0}}}), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.conventions.size() == 1);
    c = attntrace::check_stage(file("weights", {{{0.0, 0.0, 0.0}, {0.5, nan_, 0.0}}}), run, {});
    CHECK(c.status == StageStatus::differs);
    CHECK(c.result.nan_pairs == 1);
    // mha's (B, Lq, X) stages: a row is NaN when any head's row is empty (head 1, query 0 here).
    run = {{"weights", Array<double>{{{{1.0, 0.0}, {0.5, 0.5}}, {{0.0, 0.0}, {0.5, 0.5}}}}},
           {"merged", Array<double>{{{1.0, 2.0, 0.0, 0.0}, {3.0, 4.0, 5.0, 6.0}}}}};
    c = attntrace::check_stage(file("merged", {{{nan_, nan_, nan_, nan_}, {3.0, 4.0, 5.0, 6.0}}}), run, {});
    CHECK(c.status == StageStatus::match);
    c = attntrace::check_stage(file("merged", {{{1.0, 2.0, 0.0, 0.0}, {nan_, 4.0, 5.0, 6.0}}}), run, {});
    CHECK(c.status == StageStatus::differs);
}

TEST_CASE("layouts: the batch axis left out, heads as (B, Lq, H, P), batch and heads merged, heads averaged") {
    const Array<double> qh = iota({1, 2, 3, 4});  // (B, H, Lq, P)
    const StageValues run = {{"q_heads", qh}, {"scores", iota({2, 2, 3, 3})}};
    auto c = attntrace::check_stage(file("q_heads", Array<double>(xt::view(qh, 0))), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.layout == "no batch axis");
    c = attntrace::check_stage(file("q_heads", Array<double>(xt::transpose(qh, {0, 2, 1, 3}))), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.layout == "(B, Lq, H, P)");
    Array<double> lhp = xt::transpose(qh, {0, 2, 1, 3});
    lhp.reshape({3, 2, 4});
    c = attntrace::check_stage(file("q_heads", lhp), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.layout == "(Lq, H, P), no batch axis");
    Array<double> merged = run.at("scores");
    merged.reshape({4, 3, 3});
    c = attntrace::check_stage(file("scores", merged), run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.layout.rfind("(B*H, ...)", 0) == 0);
    c = attntrace::check_stage(file("scores", iota({3, 3})), run, {});
    CHECK(c.status == StageStatus::shape_mismatch);
    // mha's weights averaged over the heads (PyTorch's default)
    const StageValues mha_run = {{"q_heads", qh}, {"weights", Array<double>{{{{1.0, 0.0}, {0.5, 0.5}}, {{0.0, 1.0}, {0.5, 0.5}}}}}};
    c = attntrace::check_stage(file("weights", {{{0.5, 0.5}, {0.5, 0.5}}}), mha_run, {});
    CHECK(c.status == StageStatus::match);
    CHECK(c.layout.rfind("averaged over the heads", 0) == 0);
    c = attntrace::check_stage(file("weights", {{{1.0, 0.0}, {0.5, 0.5}}}), mha_run, {});
    CHECK(c.status == StageStatus::differs);
    // a layout is only taken when its values match: a wrong (B, Lq, H, P) tensor reads as the trace's
    c = attntrace::check_stage(file("q_heads", iota({1, 2, 3, 4}) * 2.0), run, {});
    CHECK(c.status == StageStatus::differs);
    CHECK(c.layout.empty());
}

TEST_CASE("a directory's stage files in forward order; other names ignored; two files for a stage refused") {
    attntrace::testing::TempDir dir;
    attntrace::save_tensor(dir / "weights.json", Array<double>{{1.0, 0.0}});
    attntrace::save_tensor(dir / "q.npy", Array<float>{{1.0f, 2.0f}});
    attntrace::testing::write_file(dir / "notes.txt", "mine");
    std::vector<std::string> ignored;
    const auto files = attntrace::load_stage_files(dir.path.string(), attntrace::mha_stage_names(), ignored);
    REQUIRE(files.size() == 2);
    CHECK(files[0].stage == "q");
    CHECK(files[0].dtype == DType::f4);
    CHECK(files[1].stage == "weights");
    CHECK(ignored == std::vector<std::string>{"notes.txt"});
    attntrace::save_tensor(dir / "q.json", Array<double>{{1.0, 2.0}});
    CHECK_THROWS_AS(attntrace::load_stage_files(dir.path.string(), attntrace::mha_stage_names(), ignored),
                    attntrace::InputError);
}

namespace {

// An sdpa problem: Q (2, 3, 4), K (2, 5, 4), V (2, 5, 2), the default scale 1/sqrt(4).
attntrace::CheckProblem small_sdpa() {
    attntrace::CheckProblem p;
    p.is_mha = false;
    p.query = iota({2, 3, 4});
    p.key = iota({2, 5, 4}) * 0.5;
    p.value = iota({2, 5, 2});
    return p;
}

}  // namespace

TEST_CASE("check_implementation: the reference's own stages match; unscaled scores are missing_scale") {
    attntrace::CheckProblem p = small_sdpa();
    const StageValues ref = attntrace::run_stages(p);
    attntrace::testing::TempDir dir;
    for (const char* s : {"scores", "weights", "output"}) attntrace::save_tensor(dir / (std::string(s) + ".npy"), ref.at(s));
    auto report = attntrace::check_implementation(p, dir.path.string(), {});
    CHECK_FALSE(report.first_divergence);
    CHECK(report.stages.size() == 7);
    CHECK(report.stages[0].status == StageStatus::missing);
    attntrace::save_tensor(dir / "scores.npy", Array<double>(ref.at("scores") * 2.0));  // 1/sqrt(4) left out
    report = attntrace::check_implementation(p, dir.path.string(), {});
    REQUIRE(report.first_divergence);
    CHECK(*report.first_divergence == "scores");
    REQUIRE(report.diagnosis);
    CHECK(report.diagnosis->code == "missing_scale");
    const auto json = attntrace::check_json(report);
    CHECK(json["first_divergence"] == "scores");
    CHECK(json["stages"][3]["status"] == "differs");
    CHECK(json["stages"][3]["where"].size() == 3);
    CHECK(json["stages"][0]["max_abs"].is_null());
}

TEST_CASE("a scale given in the options is named as the given scale in the diagnosis") {
    attntrace::CheckProblem p = small_sdpa();
    p.options.scale = 0.2;
    const StageValues ref = attntrace::run_stages(p);
    attntrace::testing::TempDir dir;
    attntrace::save_tensor(dir / "scores.npy", Array<double>(ref.at("scores") * 5.0));  // the 0.2 left out
    const auto report = attntrace::check_implementation(p, dir.path.string(), {});
    REQUIRE(report.diagnosis);
    CHECK(report.diagnosis->code == "missing_scale");
    CHECK(report.diagnosis->detail == "scores not multiplied by the scale 0.2 = the given scale");
}
