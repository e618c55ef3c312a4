// positions.hpp against PyTorch: tests/fixtures/make_positions_fixtures.py -> positions.json.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/attention/positions.hpp"

using nlohmann::json;

namespace {

const json& fixture() {
    static const json j = [] {
        std::ifstream in(std::string(ATTNTRACE_FIXTURES) + "/positions/positions.json");
        return json::parse(in);
    }();
    return j;
}

std::vector<double> flat(const json& nested) {
    std::vector<double> out;
    if (nested.is_array()) {
        for (const json& x : nested) {
            const auto inner = flat(x);
            out.insert(out.end(), inner.begin(), inner.end());
        }
    } else {
        out.push_back(nested.get<double>());
    }
    return out;
}

// Largest |a - b| / (atol + rtol |b|) over the elements; <= 1 passes.
double worst(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol) {
    REQUIRE(a.size() == b.size());
    double w = 0;
    for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i])));
    return w;
}

}  // namespace

TEST_CASE("ALiBi slopes equal BLOOM's build_alibi_tensor for 1 to 40 heads (non-powers of two included)") {
    for (const auto& [heads, slopes] : fixture()["alibi"].items()) {
        const auto got = attntrace::alibi_slopes(std::stoul(heads));
        CHECK_MESSAGE(worst(got, flat(slopes), 1e-12, 0) <= 1, heads << " heads");
    }
}

TEST_CASE("rope inverse frequencies: default, linear and llama3 scaling") {
    for (const json& c : fixture()["inv_freq"]) {
        attntrace::RopeScaling s;
        const json& sc = c["scaling"];
        s.type = sc["type"];
        s.factor = sc.value("factor", 1.0);
        s.low_freq_factor = sc.value("low_freq_factor", 1.0);
        s.high_freq_factor = sc.value("high_freq_factor", 4.0);
        s.original_max_position = sc.value("original_max_position", 8192.0);
        const auto got = attntrace::rope_inv_freq(c["dims"], c["theta"], s);
        CHECK_MESSAGE(worst(got, flat(c["values"]), 1e-12, 0) <= 1, s.type << " dims " << c["dims"]);
    }
}

TEST_CASE("rotary: rotate-half and interleaved, partial dims, positions from an offset") {
    for (const json& c : fixture()["rotary"]) {
        std::vector<double> x = flat(c["x"]);
        const attntrace::Rotary r{c["style"] == "half" ? attntrace::RotaryStyle::half : attntrace::RotaryStyle::interleaved,
                                  c["dims"], flat(c["inv_freq"])};
        const std::size_t heads = c["heads"], p = c["p"];
        attntrace::apply_rotary(x.data(), 2, 5, heads, p, heads * p, r, c["pos0"]);
        CHECK_MESSAGE(worst(x, flat(c["y"]), 1e-12, 1e-14) <= 1, c["style"] << " dims " << c["dims"]);
        const std::vector<double> x64 = flat(c["x"]);
        std::vector<float> xf(x64.begin(), x64.end());
        attntrace::apply_rotary(xf.data(), 2, 5, heads, p, heads * p, r, c["pos0"]);
        CHECK(worst(std::vector<double>(xf.begin(), xf.end()), flat(c["y"]), 1e-5, 1e-6) <= 1);
    }
}

// Row i of X (heads of P, the first R dims rotated) as the formula gives it, in double: the
// reference for the kept tables and the blocks of positions (the fixture's cases are 5 positions).
std::vector<double> rotated_reference(const std::vector<float>& x, std::size_t l, std::size_t heads, std::size_t p,
                                      const attntrace::Rotary& r, std::size_t pos0) {
    std::vector<double> y(x.begin(), x.end());
    const std::size_t half = r.dims / 2;
    for (std::size_t i = 0; i < l; ++i)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t f = 0; f < half; ++f) {
                const double angle = static_cast<double>(pos0 + i) * r.inv_freq[f];
                double* head = y.data() + (i * heads + h) * p;
                const double x1 = head[f], x2 = head[f + half];
                head[f] = x1 * std::cos(angle) - x2 * std::sin(angle);
                head[f + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
            }
    return y;
}

TEST_CASE("rotary: the tables kept between calls and the positions in blocks and over threads give the formula's values") {
    const std::size_t heads = 2, p = 64;
    std::vector<float> x0;
    for (std::size_t i = 0; i < 9000 * heads * p; ++i) x0.push_back(static_cast<float>(std::sin(0.37 * double(i)) * 2.0));
    // 300 positions: one table, kept; 9000 x 32 frequencies: past what is kept, made in blocks.
    // Each L with one theta, then another (a kept table must not serve it), then the first again.
    for (const std::size_t l : {std::size_t{300}, std::size_t{9000}})
        for (const double theta : {10000.0, 500000.0, 10000.0}) {
            const attntrace::Rotary r{attntrace::RotaryStyle::half, 64, attntrace::rope_inv_freq(64, theta, {})};
            for (const std::size_t pos0 : {std::size_t{0}, std::size_t{7}}) {
                std::vector<float> one(x0.begin(), x0.begin() + static_cast<std::ptrdiff_t>(l * heads * p)), two = one;
                const std::vector<float> in = one;
                attntrace::apply_rotary(one.data(), 1, l, heads, p, heads * p, r, pos0, 1);
                attntrace::apply_rotary(two.data(), 1, l, heads, p, heads * p, r, pos0, 2);
                CHECK_MESSAGE(one == two, "theta " << theta << " L " << l << ": 2 threads differ from 1");
                CHECK_MESSAGE(worst(std::vector<double>(one.begin(), one.end()), rotated_reference(in, l, heads, p, r, pos0), 1e-5, 1e-5) <= 1,
                              "theta " << theta << " L " << l << " from " << pos0);
            }
    }
}

TEST_CASE("LayerNorm and RMSNorm as torch and LlamaRMSNorm compute them") {
    const json& ln = fixture()["layer_norm"];
    std::vector<double> x = flat(ln["x"]);
    const auto w = flat(ln["w"]), b = flat(ln["b"]);
    attntrace::layer_norm(x.data(), 4, 6, w.data(), b.data(), ln["eps"]);
    CHECK(worst(x, flat(ln["y"]), 1e-12, 1e-14) <= 1);
    const json& rms = fixture()["rms_norm"];
    std::vector<double> y = flat(rms["x"]);
    attntrace::rms_norm(y.data(), 4, 6, 6, w.data(), rms["eps"]);
    CHECK(worst(y, flat(rms["y"]), 1e-12, 1e-14) <= 1);
}

TEST_CASE("visible keys: causal upper-left and lower-right, sliding window") {
    for (const json& c : fixture()["visible"]) {
        attntrace::KeyVisibility v;
        v.causal = c["causal"];
        v.lower_right = c["lower_right"];
        if (!c["window"].is_null()) v.window = c["window"].get<std::size_t>();
        const std::size_t lq = c["lq"], lk = c["lk"];
        for (std::size_t i = 0; i < lq; ++i) {
            const auto range = attntrace::visible_keys(v, i, lq, lk);
            for (std::size_t j = 0; j < lk; ++j) {
                const bool got = j >= range.begin && j < range.end;
                CHECK_MESSAGE(got == (c["allowed"][i][j] == 1), "row " << i << " key " << j << " of " << c.dump().substr(0, 80));
            }
        }
    }
}
