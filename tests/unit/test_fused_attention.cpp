// The fused attention kernel (AVX-512: scores, masks, online softmax and context in one pass)
// against the tiled path's OpenBLAS products, run by run through the public mha / sdpa: outputs,
// empty rows, row statistics and detector values, over shapes that are not multiples of its 16-row
// panels, 16-key tiles or 256-key blocks, every mask it serves, grouped-query heads, and NaN.
// Skipped (with a message) on a CPU without AVX-512F, where runs never take the fused kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/random.hpp"

using namespace attntrace;

namespace {

// Runs FN with the attention kernels set to KERNEL, then back to the best.
template <class Fn>
auto with_kernel(AttentionKernel kernel, Fn&& fn) {
    set_attention_kernel(kernel);
    struct Restore {
        ~Restore() { set_attention_kernel(AttentionKernel::best); }
    } restore;
    return fn();
}

bool fused_available() {
    try {
        set_attention_kernel(AttentionKernel::avx512);
        set_attention_kernel(AttentionKernel::best);
        return true;
    } catch (const UsageError&) {
        MESSAGE("this CPU has no AVX-512F: the fused kernel is not used, nothing to compare");
        return false;
    }
}

// |a - b| <= atol + rtol |b| everywhere, NaN exactly where b has NaN; reports the worst element.
void check_close(const Array<float>& a, const Array<float>& b, double rtol, double atol, const std::string& what) {
    REQUIRE(a.shape() == b.shape());
    double worst = 0;
    std::size_t at = 0, nan_mismatch = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double x = a.data()[i], y = b.data()[i];
        if (std::isnan(x) || std::isnan(y)) {
            nan_mismatch += std::isnan(x) != std::isnan(y);
            continue;
        }
        const double excess = std::abs(x - y) - (atol + rtol * std::abs(y));
        if (excess > worst) worst = excess, at = i;
    }
    INFO(what << ": worst excess over the tolerance " << worst << " at element " << at << "; NaN mismatches "
              << nan_mismatch);
    CHECK(worst == 0);
    CHECK(nan_mismatch == 0);
}

void check_stats(const RowStats& a, const RowStats& b, const std::string& what) {
    INFO(what);
    REQUIRE(a.entropy.size() == b.entropy.size());
    for (std::size_t r = 0; r < a.entropy.size(); ++r) {
        auto same = [](double x, double y, double tol) {
            return (std::isnan(x) && std::isnan(y)) || std::abs(x - y) <= tol * (1 + std::abs(y));
        };
        INFO("row " << r);
        CHECK(same(a.entropy[r], b.entropy[r], 1e-4));
        CHECK(same(a.max_weight[r], b.max_weight[r], 1e-5));
        CHECK(same(a.previous_token[r], b.previous_token[r], 1e-5));
        CHECK(same(a.diagonal[r], b.diagonal[r], 1e-5));
        CHECK(same(a.first_token[r], b.first_token[r], 1e-5));
        // The most-attended key: the same, unless two keys' weights tie within rounding.
        if (a.argmax[r] != b.argmax[r] && a.argmax[r] >= 0 && b.argmax[r] >= 0) continue;
        CHECK(a.argmax[r] == b.argmax[r]);
    }
}

struct Case {
    std::string name;
    std::size_t b, lq, lk, h, g, p, pv;
    Masks<float> masks;
    PositionStages<float> positions;
    bool use_positions = false;
    bool self = false;        // one input for query, key and value (lk = lq): the stacked in-projection
    std::size_t threads = 2;
};

// mha on random inputs with CASE's shapes and masks, fused and BLAS, compared.
void compare_mha(const Case& c, std::uint64_t seed) {
    const std::size_t e = 24;
    auto q = random_tensor<float>({c.b, c.lq, e}, Distribution::normal, seed);
    auto kv = c.self ? q : random_tensor<float>({c.b, c.lk, e}, Distribution::normal, seed + 1);
    MhaDims dims{c.h, c.g, e, e, e, true};
    auto params = random_mha_params<float>(dims, HeadSizes{c.p, c.pv, e}, true, seed + 2);
    params.b_q = random_tensor<float>({c.h * c.p}, Distribution::normal, seed + 3);
    AttentionOptions options;
    options.row_stats = true;
    options.threads = c.threads;
    const MhaConfig config{c.h, c.g, true, false};
    const PositionStages<float>* pos = c.use_positions ? &c.positions : nullptr;
    auto run = [&] {
        return c.self ? mha<float>(q, q, q, params, config, c.masks, options, nullptr, pos)
                      : mha<float>(q, kv, kv, params, config, c.masks, options, nullptr, pos);
    };
    const auto fused = with_kernel(AttentionKernel::avx512, run);
    const auto blas = with_kernel(AttentionKernel::blas, run);
    CAPTURE(c.name);
    CHECK(fused.empty_rows == blas.empty_rows);
    check_close(fused.output, blas.output, 2e-4, 2e-5, c.name + " output");
    REQUIRE(fused.row_stats);
    check_stats(*fused.row_stats, *blas.row_stats, c.name + " row statistics");
}

}  // namespace

TEST_CASE("the fused kernel equals the BLAS path: shapes off its panels, tiles and blocks, and every mask it serves") {
    if (!fused_available()) return;
    std::vector<Case> cases;
    auto add = [&](std::string name, std::size_t b, std::size_t lq, std::size_t lk, std::size_t h, std::size_t g,
                   std::size_t p, std::size_t pv) -> Case& {
        cases.push_back({std::move(name), b, lq, lk, h, g, p, pv, {}, {}, false, false, 2});
        return cases.back();
    };
    add("no mask, one key block", 2, 37, 53, 2, 2, 8, 8);
    add("no mask, blocks and a partial panel", 1, 301, 700, 2, 1, 12, 20);
    add("head dim 1, value dim 3", 1, 17, 33, 3, 3, 1, 3);
    add("head dim 40, value dim 17", 2, 64, 257, 2, 2, 40, 17).masks.causal = true;
    add("causal, Lq = Lk across blocks", 1, 530, 530, 4, 2, 16, 16).masks.causal = true;
    add("head dim 128, Llama's, grouped", 1, 90, 300, 4, 2, 128, 128).masks.causal = true;
    add("head dim 80, value dim 256 and past", 1, 33, 70, 2, 1, 80, 264);
    add("causal, Lq < Lk", 2, 20, 300, 2, 2, 8, 8).masks.causal = true;
    {
        Case& c = add("lower-right causal with Lq > Lk: empty rows", 1, 40, 20, 2, 2, 8, 8);
        c.positions.visibility = {true, true, std::nullopt};
        c.use_positions = true;
    }
    {
        Case& c = add("sliding window of 50, causal", 1, 400, 400, 2, 2, 8, 8);
        c.positions.visibility = {true, false, 50};
        c.use_positions = true;
    }
    {
        Case& c = add("ALiBi, causal", 2, 70, 70, 4, 4, 8, 8);
        c.positions.alibi = alibi_slopes(4);
        c.positions.visibility.causal = true;
        c.use_positions = true;
    }
    {
        Case& c = add("key padding, one batch row fully padded", 2, 30, 290, 2, 2, 8, 8);
        Array<float> pad = Array<float>::from_shape({2, 290});
        for (std::size_t j = 0; j < 290; ++j) pad(0, j) = j % 7 == 3 ? 1.0f : 0.0f, pad(1, j) = 1.0f;
        c.masks.key_padding_mask = pad;
    }
    {
        Case& c = add("valid lengths per batch, one zero", 3, 25, 400, 2, 2, 8, 8);
        Array<float> lens = Array<float>::from_shape({3});
        lens(0) = 270, lens(1) = 0, lens(2) = 1;
        c.masks.valid_lens = lens;
    }
    {
        Case& c = add("valid lengths per query", 2, 19, 40, 2, 2, 8, 8);
        Array<float> lens = Array<float>::from_shape({2, 19});
        for (std::size_t i = 0; i < 19; ++i) lens(0, i) = float(i % 5), lens(1, i) = float(40 - i);
        c.masks.valid_lens = lens;
    }
    std::uint64_t seed = 100;
    for (const Case& c : cases) compare_mha(c, seed += 10);
}

// Self-attention with P = Pv: mha projects q into the merged context's buffer and the fused
// kernel writes each head's context over its own q (mha.cpp, context_over_q); the BLAS path keeps
// them apart. Shapes off the 16-row panels and the 256-row tasks, batches, grouped heads, rotary q
// rewritten in that buffer, causal and ALiBi, one thread and two.
TEST_CASE("self-attention's context written over q equals the BLAS path") {
    if (!fused_available()) return;
    std::vector<Case> cases;
    auto add = [&](std::string name, std::size_t b, std::size_t l, std::size_t h, std::size_t g, std::size_t p,
                   std::size_t threads) -> Case& {
        cases.push_back({std::move(name), b, l, l, h, g, p, p, {}, {}, false, true, threads});
        return cases.back();
    };
    add("no mask, 2 batches, partial panel", 2, 37, 2, 2, 12, 2);
    add("tasks of 256 rows and a partial one, one thread", 1, 300, 3, 3, 8, 1);
    add("grouped heads, causal, across tasks", 2, 530, 4, 2, 6, 2).masks.causal = true;
    {
        Case& c = add("rotary q and k, causal", 1, 70, 4, 2, 6, 2);
        c.positions.rotary = Rotary{RotaryStyle::half, 6, rope_inv_freq(6, 10000.0, {})};
        c.positions.visibility.causal = true;
        c.use_positions = true;
    }
    {
        Case& c = add("ALiBi, causal", 2, 70, 4, 4, 6, 2);
        c.positions.alibi = alibi_slopes(4);
        c.positions.visibility.causal = true;
        c.use_positions = true;
    }
    std::uint64_t seed = 500;
    for (const Case& c : cases) compare_mha(c, seed += 10);
}

TEST_CASE("the fused kernel keeps NaN as PyTorch does: a NaN score makes its row NaN, the other rows stay") {
    if (!fused_available()) return;
    auto q = random_tensor<float>({2, 3, 40, 16}, Distribution::normal, 5);
    auto k = random_tensor<float>({2, 3, 300, 16}, Distribution::normal, 6);
    auto v = random_tensor<float>({2, 3, 300, 8}, Distribution::normal, 7);
    q(0, 1, 5, 2) = std::numeric_limits<float>::quiet_NaN();  // row 5 of head (0, 1)
    k(1, 2, 280, 0) = std::numeric_limits<float>::quiet_NaN();  // key 280 of head (1, 2): every row NaN
    for (const bool causal : {false, true}) {
        Masks<float> masks;
        masks.causal = causal;
        AttentionOptions options;
        options.row_stats = true;
        auto run = [&] { return sdpa<float>(q, k, v, masks, options); };
        const auto fused = with_kernel(AttentionKernel::avx512, run);
        const auto blas = with_kernel(AttentionKernel::blas, run);
        CAPTURE(causal);
        check_close(fused.output, blas.output, 2e-4, 2e-5, "sdpa output");
        CHECK(std::isnan(fused.output(0, 1, 5, 0)));
        CHECK(!std::isnan(fused.output(0, 1, 4, 0)));
        // causal: rows before key 280 never see it
        CHECK(std::isnan(fused.output(1, 2, 39, 0)) == !causal);
        check_stats(*fused.row_stats, *blas.row_stats, "sdpa row statistics");
    }
}

TEST_CASE("the fused kernel's empty rows are zero even where V holds NaN and Inf") {
    if (!fused_available()) return;
    auto q = random_tensor<float>({1, 2, 30, 8}, Distribution::normal, 9);
    auto k = random_tensor<float>({1, 2, 20, 8}, Distribution::normal, 10);
    auto v = random_tensor<float>({1, 2, 20, 4}, Distribution::normal, 11);
    v(0, 0, 19, 1) = std::numeric_limits<float>::infinity();
    v(0, 1, 3, 2) = std::numeric_limits<float>::quiet_NaN();
    PositionStages<float> pos;
    pos.visibility = {true, true, std::nullopt};  // lower-right, Lq 30 > Lk 20: rows 0-9 see no key
    AttentionOptions options;
    options.row_stats = true;
    auto run = [&] { return sdpa<float>(q, k, v, {}, options, nullptr, &pos); };
    const auto fused = with_kernel(AttentionKernel::avx512, run);
    const auto blas = with_kernel(AttentionKernel::blas, run);
    CHECK(fused.empty_rows == 20);
    CHECK(blas.empty_rows == 20);
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t i = 0; i < 10; ++i)
            for (std::size_t c = 0; c < 4; ++c) CHECK(fused.output(0, h, i, c) == 0.0f);
    check_close(fused.output, blas.output, 2e-4, 2e-5, "sdpa output with NaN and Inf in V");
    check_stats(*fused.row_stats, *blas.row_stats, "sdpa row statistics");
}

TEST_CASE("the attention kernels are named, and a kernel the CPU cannot run is refused") {
    CHECK(attention_kernel_named("avx512") == AttentionKernel::avx512);
    CHECK(attention_kernel_named("blas") == AttentionKernel::blas);
    CHECK(!attention_kernel_named("avx1024"));
    CHECK(attention_kernel_name(AttentionKernel::best) == "best");
    const AttentionKernel best = attention_kernel();
    CHECK((best == AttentionKernel::avx512 || best == AttentionKernel::blas));
    if (best == AttentionKernel::blas)
        CHECK_THROWS_WITH_AS(set_attention_kernel(AttentionKernel::avx512),
                             "attention kernel: this CPU cannot run the avx512 kernels", UsageError);
}

TEST_CASE("the fused kernel's exp over scores 0 to -150 and more below the row maximum: a float64 softmax to 1e-5") {
    // The kernel's own exp (fused_avx512.cpp: a degree-5 polynomial, 0 below -87, a one-constant
    // reduction whose error grows with |k|): q scaled so each row's scores span far past -87.
    if (!fused_available()) return;
    auto q = random_tensor<float>({1, 2, 70, 16}, Distribution::normal, 21);
    auto k = random_tensor<float>({1, 2, 300, 16}, Distribution::normal, 22);
    auto v = random_tensor<float>({1, 2, 300, 8}, Distribution::normal, 23);
    for (std::size_t x = 0; x < q.size(); ++x) q.data()[x] *= 25.0f;  // the widest row spans about 220
    AttentionOptions options;
    const auto fused = with_kernel(AttentionKernel::avx512, [&] { return sdpa<float>(q, k, v, {}, options); });
    double widest = 0;
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t i = 0; i < 70; ++i) {
            std::vector<double> s(300);  // (Lk) the row's scores, float64
            for (std::size_t j = 0; j < 300; ++j) {
                double dot = 0;
                for (std::size_t d = 0; d < 16; ++d) dot += double(q(0, h, i, d)) * double(k(0, h, j, d));
                s[j] = dot / 4.0;  // 1 / sqrt(16)
            }
            const double m = *std::max_element(s.begin(), s.end());
            widest = std::max(widest, m - *std::min_element(s.begin(), s.end()));
            double l = 0;
            for (double& x : s) l += (x = std::exp(x - m));
            for (std::size_t c = 0; c < 8; ++c) {
                double o = 0;
                for (std::size_t j = 0; j < 300; ++j) o += s[j] / l * double(v(0, h, j, c));
                CHECK(std::abs(double(fused.output(0, h, i, c)) - o) <= 1e-5 * (1 + std::abs(o)));
            }
        }
    CHECK(widest > 150);  // the test reaches past -87, where the exp is 0
}
