// Properties of the attention core that hold whatever the reference: rows of weights sum to 1, an
// empty row is all zeros, the blocked path without weights equals the one with weights, GQA equals
// MHA with repeated kv heads, the fused self-attention GEMM equals three separate ones, and
// weights read in place (a checkpoint's stacked or Conv1D layout) equal the copied ones.
// The values themselves are checked against PyTorch in test_goldens.cpp and the e2e tests.
#include <doctest/doctest.h>

#include <cmath>

#include "attntrace/attention/attention.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/random.hpp"

using namespace attntrace;

namespace {

template <class T>
double max_abs_diff(const Array<T>& a, const Array<T>& b) {
    REQUIRE(a.shape() == b.shape());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
    return m;
}

template <class T>
MhaParams<T> params_for(std::size_t h, std::size_t g, std::size_t e, std::size_t p, std::uint64_t seed, bool bias = true) {
    MhaDims dims{h, g, e, e, e, true};
    HeadSizes sizes{p, p, e};
    auto params = random_mha_params<T>(dims, sizes, bias, seed);
    if (bias) {  // non-zero biases so that they matter
        params.b_q = random_tensor<T>({h * p}, Distribution::normal, seed + 1);
        params.b_k = random_tensor<T>({g * p}, Distribution::normal, seed + 2);
        params.b_v = random_tensor<T>({g * p}, Distribution::normal, seed + 3);
        params.b_o = random_tensor<T>({e}, Distribution::normal, seed + 4);
    }
    return params;
}

}  // namespace

TEST_CASE("softmax weights are rows that sum to 1") {
    auto q = random_tensor<double>({2, 3, 5, 4}, Distribution::normal, 1);
    auto k = random_tensor<double>({2, 3, 7, 4}, Distribution::normal, 2);
    auto v = random_tensor<double>({2, 3, 7, 6}, Distribution::normal, 3);
    AttentionOptions opt;
    opt.need_weights = true;
    auto r = sdpa<double>(q, k, v, {}, opt);
    REQUIRE(r.weights);
    CHECK(r.output.shape() == std::vector<std::size_t>{2, 3, 5, 6});
    for (std::size_t row = 0; row < 2 * 3 * 5; ++row) {
        double sum = 0;
        for (std::size_t j = 0; j < 7; ++j) sum += r.weights->data()[row * 7 + j];
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-12));
    }
    CHECK(r.scale == doctest::Approx(0.5));
}

TEST_CASE("positions the heads cannot take are usage errors naming the parameter") {
    auto q = random_tensor<double>({3, 2, 4}, Distribution::normal, 1);  // H=3 heads, L=2, P=4
    PositionStages<double> pos;
    pos.rotary = Rotary{RotaryStyle::half, 6, rope_inv_freq(6, 10000, RopeScaling{})};
    CHECK_THROWS_WITH_AS(sdpa<double>(q, q, q, {}, {}, nullptr, &pos), "rotary dims: 6 is past the head dim 4",
                         UsageError);
    pos.rotary.reset();
    pos.alibi = alibi_slopes(2);
    CHECK_THROWS_WITH_AS(sdpa<double>(q, q, q, {}, {}, nullptr, &pos), "ALiBi: 2 slopes for 3 heads", UsageError);
}

TEST_CASE("a query row with no allowed key gets zero weights and a zero output") {
    auto q = random_tensor<float>({1, 3, 4}, Distribution::normal, 1);
    auto k = random_tensor<float>({1, 5, 4}, Distribution::normal, 2);
    auto v = random_tensor<float>({1, 5, 2}, Distribution::normal, 3);
    Masks<float> masks;
    masks.attn_mask = Array<float>::from_shape({3, 5});
    masks.attn_mask->fill(0.0f);
    for (std::size_t j = 0; j < 5; ++j) (*masks.attn_mask)(1, j) = 1.0f;  // row 1: nothing allowed
    masks.attn_mask_is_bool = true;
    AttentionOptions opt;
    opt.need_weights = true;
    auto r = sdpa<float>(q, k, v, masks, opt);
    CHECK(r.empty_rows == 1);
    for (std::size_t j = 0; j < 5; ++j) CHECK((*r.weights)(0, 1, j) == 0.0f);
    for (std::size_t j = 0; j < 2; ++j) {
        CHECK(r.output(0, 1, j) == 0.0f);
        CHECK(std::isfinite(r.output(0, 0, j)));
    }
}

TEST_CASE("causal attention: query i gives key j > i exactly zero weight") {
    auto q = random_tensor<double>({6, 4}, Distribution::normal, 4);
    auto k = random_tensor<double>({6, 4}, Distribution::normal, 5);
    auto v = random_tensor<double>({6, 4}, Distribution::normal, 6);
    Masks<double> masks;
    masks.causal = true;
    AttentionOptions opt;
    opt.need_weights = true;
    auto r = sdpa<double>(q, k, v, masks, opt);
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 6; ++j) {
            if (j > i) CHECK((*r.weights)(i, j) == 0.0);
            else CHECK((*r.weights)(i, j) > 0.0);
        }
    // row 0 sees only key 0: its output is v[0]
    for (std::size_t c = 0; c < 4; ++c) CHECK(r.output(0, c) == doctest::Approx(v(0, c)));
}

TEST_CASE("the tiled path (no weights kept) equals the materialized path within f32 rounding") {
    // Lq = 300 spans several query blocks, Lk = 1100 several key blocks of the online softmax.
    auto q = random_tensor<float>({2, 300, 16}, Distribution::normal, 7);
    auto k = random_tensor<float>({2, 1100, 16}, Distribution::normal, 8);
    auto v = random_tensor<float>({2, 1100, 8}, Distribution::normal, 9);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        Masks<float> masks;
        masks.causal = causal;
        masks.attn_mask = random_tensor<float>({300, 1100}, Distribution::normal, 10);  // added
        AttentionOptions with, without;
        with.need_weights = true;
        with.threads = 1;
        without.threads = 2;
        auto a = sdpa<float>(q, k, v, masks, with);
        auto b = sdpa<float>(q, k, v, masks, without);
        CHECK(max_abs_diff(a.output, b.output) <= 2e-6);
    }
    // Key padding that empties whole rows of a batch, and valid lengths past a key block.
    const std::size_t h = 2, e = 16;
    auto x = random_tensor<double>({2, 700, e}, Distribution::normal, 11);
    auto params = params_for<double>(h, h, e, 8, 12);
    Masks<double> masks;
    masks.valid_lens = Array<double>::from_shape({2});
    (*masks.valid_lens)(0) = 600;
    (*masks.valid_lens)(1) = 0;  // batch 1: no key allowed at all
    AttentionOptions with, without;
    with.need_weights = true;
    auto a = mha<double>(x, x, x, params, {h, h, true}, masks, with);
    auto b = mha<double>(x, x, x, params, {h, h, true}, masks, without);
    CHECK(a.empty_rows == 700 * h);
    CHECK(b.empty_rows == 700 * h);
    CHECK(max_abs_diff(a.output, b.output) <= 1e-12);
}

TEST_CASE("grouped-query attention equals multi-head attention with each kv head repeated") {
    const std::size_t h = 4, g = 2, e = 8, p = 2;
    auto x = random_tensor<double>({2, 5, e}, Distribution::normal, 10);
    auto gqa = params_for<double>(h, g, e, p, 11);
    // Repeat kv head j for query heads j*(H/G) .. (j+1)*(H/G)-1: rows of W_k / W_v and biases.
    MhaParams<double> full = gqa;
    full.w_k = Array<double>::from_shape({h * p, e});
    full.w_v = Array<double>::from_shape({h * p, e});
    full.b_k = Array<double>::from_shape({h * p});
    full.b_v = Array<double>::from_shape({h * p});
    for (std::size_t hi = 0; hi < h; ++hi) {
        const std::size_t kv = hi / (h / g);
        for (std::size_t r = 0; r < p; ++r) {
            for (std::size_t c = 0; c < e; ++c) {
                full.w_k(hi * p + r, c) = gqa.w_k(kv * p + r, c);
                full.w_v(hi * p + r, c) = gqa.w_v(kv * p + r, c);
            }
            (*full.b_k)(hi * p + r) = (*gqa.b_k)(kv * p + r);
            (*full.b_v)(hi * p + r) = (*gqa.b_v)(kv * p + r);
        }
    }
    AttentionOptions opt;
    opt.need_weights = true;
    auto a = mha<double>(x, x, x, gqa, {h, g, true}, {}, opt);
    auto b = mha<double>(x, x, x, full, {h, h, true}, {}, opt);
    CHECK(max_abs_diff(a.output, b.output) <= 1e-12);
    CHECK(max_abs_diff(*a.weights, *b.weights) <= 1e-12);
}

TEST_CASE("the fused self-attention projection equals separate projections") {
    auto x = random_tensor<double>({3, 6, 8}, Distribution::normal, 12);
    Array<double> x2 = x, x3 = x;  // distinct objects: three separate GEMMs
    auto params = params_for<double>(2, 2, 8, 4, 13);
    AttentionOptions opt;
    opt.need_weights = true;
    auto fused = mha<double>(x, x, x, params, {2, 2, true}, {}, opt);
    auto separate = mha<double>(x, x2, x3, params, {2, 2, true}, {}, opt);
    CHECK(max_abs_diff(fused.output, separate.output) <= 1e-12);
}

// [W_q; W_k; W_v] (rows, E) laid out as stored: as rows, or (E, rows) as GPT-2's Conv1D.
template <class T>
std::vector<T> stacked_as_stored(const MhaParams<T>& p, bool conv1d) {
    const std::size_t e = p.w_q.shape()[1], rows = p.w_q.shape()[0] + p.w_k.shape()[0] + p.w_v.shape()[0];
    std::vector<T> out(rows * e);
    std::size_t r = 0;
    for (const Array<T>* w : {&p.w_q, &p.w_k, &p.w_v})
        for (std::size_t i = 0; i < w->shape()[0]; ++i, ++r)
            for (std::size_t c = 0; c < e; ++c) out[conv1d ? c * rows + r : r * e + c] = (*w)(i, c);
    return out;
}

TEST_CASE("weights read in place (a stacked in-projection, W_o as rows or Conv1D) equal the copied ones") {
    for (const bool conv1d : {false, true}) {
        CAPTURE(conv1d);
        auto x = random_tensor<double>({2, 7, 8}, Distribution::normal, 21);
        auto params = params_for<double>(4, 2, 8, 2, 22);  // grouped-query: 8 + 4 + 4 rows
        AttentionOptions opt;
        opt.need_weights = true;
        auto copied = mha<double>(x, x, x, params, {4, 2, true}, {}, opt);
        const std::vector<double> stacked = stacked_as_stored(params, conv1d);
        std::vector<double> w_o(params.w_o->size());
        for (std::size_t i = 0; i < 8; ++i)
            for (std::size_t c = 0; c < 8; ++c) w_o[conv1d ? c * 8 + i : i * 8 + c] = (*params.w_o)(i, c);
        MhaParams<double> in_place = params;
        in_place.w_q = in_place.w_k = in_place.w_v = Array<double>{};
        in_place.w_o.reset();
        in_place.in_proj = StackedInProj<double>{stacked.data(), 8, 4, 4, 8, conv1d};
        in_place.w_o_in_place = WeightInPlace<double>{w_o.data(), 8, 8, conv1d};
        auto read = mha<double>(x, x, x, in_place, {4, 2, true}, {}, opt);
        CHECK(max_abs_diff(copied.output, read.output) <= 1e-12);
        CHECK(max_abs_diff(*copied.weights, *read.weights) <= 1e-12);
        // cross-attention cannot read a stacked weight; shapes that do not fit are named
        Array<double> y = x;
        CHECK_THROWS_WITH_AS(mha<double>(x, y, y, in_place, {4, 2, true}, {}, opt),
                             doctest::Contains("self-attention only"), UsageError);
        CHECK_THROWS_WITH_AS(mha<double>(x, x, x, in_place, {2, 2, true}, {}, opt),
                             doctest::Contains("stacked in-projection of 8 + 4 + 4 rows"), ShapeError);
        in_place.w_o_in_place->in = 6;
        CHECK_THROWS_WITH_AS(mha<double>(x, x, x, in_place, {4, 2, true}, {}, opt),
                             doctest::Contains("output projection of 8 x 6"), ShapeError);
    }
}

TEST_CASE("a 2-D input gives a 2-D output and (H, Lq, Lk) weights") {
    auto x = random_tensor<float>({5, 8}, Distribution::normal, 14);
    auto params = params_for<float>(2, 2, 8, 4, 15);
    AttentionOptions opt;
    opt.need_weights = true;
    auto r = mha<float>(x, x, x, params, {2, 2, true}, {}, opt);
    CHECK(r.output.shape() == std::vector<std::size_t>{5, 8});
    CHECK(r.weights->shape() == std::vector<std::size_t>{2, 5, 5});
    opt.average_heads = true;
    auto avg = mha<float>(x, x, x, params, {2, 2, true}, {}, opt);
    CHECK(avg.weights->shape() == std::vector<std::size_t>{5, 5});
    CHECK((*avg.weights)(1, 2) == doctest::Approx(((*r.weights)(0, 1, 2) + (*r.weights)(1, 1, 2)) / 2));
}

TEST_CASE("shape errors name both shapes") {
    auto q = random_tensor<float>({2, 3, 8}, Distribution::normal, 1);
    auto k = random_tensor<float>({3, 4, 8}, Distribution::normal, 2);
    auto params = params_for<float>(2, 2, 8, 4, 3);
    CHECK_THROWS_WITH_AS(mha<float>(q, k, k, params, {2, 2, true}, {}, {}),
                         doctest::Contains("(3, 4, 8)"), ShapeError);
    CHECK_THROWS_WITH_AS(mha<float>(q, k, k, params, {2, 2, true}, {}, {}),
                         doctest::Contains("(2, 3, 8)"), ShapeError);
    CHECK_THROWS_AS(mha<float>(q, q, q, params, {0, 0, true}, {}, {}), UsageError);
    CHECK_THROWS_AS(mha<float>(q, q, q, params, {2, 3, true}, {}, {}), UsageError);
    Masks<float> masks;
    masks.attn_mask = random_tensor<float>({4, 3}, Distribution::normal, 4);
    masks.attn_mask_name = "m.npy";
    CHECK_THROWS_WITH_AS(mha<float>(q, q, q, params, {2, 2, true}, masks, {}), doctest::Contains("m.npy"),
                         ShapeError);
}

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

TEST_CASE("the strided-view core equals a whole-tensor xtensor-blas implementation") {
    // Reference: per batch and head, whole-matrix products with xt::linalg::dot on copies,
    // written the way the notebooks write it (project, slice the head, softmax, weights @ V).
    const std::size_t b = 2, l = 5, e = 6, h = 3, p = 2;
    auto x = random_tensor<double>({b, l, e}, Distribution::normal, 21);
    auto params = params_for<double>(h, h, e, p, 22);
    AttentionOptions opt;
    opt.need_weights = true;
    auto r = mha<double>(x, x, x, params, {h, h, true}, {}, opt);
    const double scale = 1.0 / std::sqrt(double(p));
    for (std::size_t bi = 0; bi < b; ++bi) {
        xt::xarray<double> xb = xt::view(x, bi, xt::all(), xt::all());
        xt::xarray<double> q = xt::linalg::dot(xb, xt::transpose(params.w_q)) + *params.b_q;
        xt::xarray<double> k = xt::linalg::dot(xb, xt::transpose(params.w_k)) + *params.b_k;
        xt::xarray<double> v = xt::linalg::dot(xb, xt::transpose(params.w_v)) + *params.b_v;
        xt::xarray<double> merged = xt::zeros<double>({l, h * p});
        for (std::size_t hi = 0; hi < h; ++hi) {
            xt::xarray<double> qh = xt::view(q, xt::all(), xt::range(hi * p, (hi + 1) * p));
            xt::xarray<double> kh = xt::view(k, xt::all(), xt::range(hi * p, (hi + 1) * p));
            xt::xarray<double> vh = xt::view(v, xt::all(), xt::range(hi * p, (hi + 1) * p));
            xt::xarray<double> s = xt::linalg::dot(qh, xt::transpose(kh)) * scale;
            xt::xarray<double> m = xt::amax(s, {1}, xt::keep_dims);
            xt::xarray<double> w = xt::exp(s - m);
            const xt::xarray<double> row_sums = xt::sum(w, {1}, xt::keep_dims);  // evaluated: w /= sum(w) would alias
            w /= row_sums;
            for (std::size_t i = 0; i < l; ++i)
                for (std::size_t j = 0; j < l; ++j)
                    CHECK((*r.weights)(bi, hi, i, j) == doctest::Approx(w(i, j)).epsilon(1e-12));
            xt::view(merged, xt::all(), xt::range(hi * p, (hi + 1) * p)) = xt::linalg::dot(w, vh);
        }
        xt::xarray<double> out = xt::linalg::dot(merged, xt::transpose(*params.w_o)) + *params.b_o;
        for (std::size_t i = 0; i < l; ++i)
            for (std::size_t c = 0; c < e; ++c) CHECK(r.output(bi, i, c) == doctest::Approx(out(i, c)).epsilon(1e-12));
    }
}
