// The MLP activations (activations.hpp). Each float loop is compiled for AVX-512, AVX2 and
// baseline x86-64 (ATTNTRACE_CLONES) and has no libm call, so it vectorizes: exp from
// exp_poly, tanh(y) = 1 - 2 / (exp(2y) + 1), erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7,
// the approximation PyTorch's own vectorized float erf uses).
#include "attntrace/model/activations.hpp"

#include <array>
#include <cmath>
#include <numbers>

#include "attntrace/tensor/vector_math.hpp"

namespace attntrace {

namespace {

struct Named {
    std::string_view name;
    Activation act;
};

constexpr std::array<Named, 9> kNames{{{"gelu", Activation::gelu},
                                       {"gelu_new", Activation::gelu_tanh},
                                       {"gelu_pytorch_tanh", Activation::gelu_tanh},
                                       {"gelu_fast", Activation::gelu_fast},
                                       {"quick_gelu", Activation::quick_gelu},
                                       {"silu", Activation::silu},
                                       {"swish", Activation::silu},
                                       {"relu", Activation::relu},
                                       {"tanh", Activation::tanh}}};

constexpr float kSqrt2OverPi = 0.7978845608028654f;

[[gnu::always_inline]] inline float tanh_f(float y) { return 1.0f - 2.0f / (exp_poly(2.0f * y) + 1.0f); }
[[gnu::always_inline]] inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

// erf(x) by Abramowitz & Stegun 7.1.26 on |x|, the sign put back.
[[gnu::always_inline]] inline float erf_f(float x) {
    const float a = std::fabs(x);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly =
        t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float y = 1.0f - poly * exp_poly(-a * a);
    return x < 0.0f ? -y : y;
}

template <class T>
[[gnu::always_inline]] inline T apply_one(Activation act, T x) {
    if constexpr (std::is_same_v<T, float>) {
        switch (act) {
        case Activation::gelu: return 0.5f * x * (1.0f + erf_f(x * std::numbers::sqrt2_v<float> * 0.5f));
        case Activation::gelu_tanh: return 0.5f * x * (1.0f + tanh_f(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
        case Activation::gelu_fast: return 0.5f * x * (1.0f + tanh_f(x * 0.7978845608f * (1.0f + 0.044715f * x * x)));
        case Activation::bloom_gelu: return x * 0.5f * (1.0f + tanh_f(0.79788456f * x * (1.0f + 0.044715f * x * x)));
        case Activation::quick_gelu: return x * sigmoid_f(1.702f * x);
        case Activation::silu: return x * sigmoid_f(x);
        case Activation::relu: return x > 0.0f ? x : 0.0f;
        case Activation::tanh: return tanh_f(x);
        }
    } else {
        const double s = std::sqrt(2.0 / std::numbers::pi);
        switch (act) {
        case Activation::gelu: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
        case Activation::gelu_tanh: return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
        case Activation::gelu_fast: return 0.5 * x * (1.0 + std::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
        case Activation::bloom_gelu: return x * 0.5 * (1.0 + std::tanh(0.79788456 * x * (1 + 0.044715 * x * x)));
        case Activation::quick_gelu: return x / (1.0 + std::exp(-1.702 * x));
        case Activation::silu: return x / (1.0 + std::exp(-x));
        case Activation::relu: return x > 0.0 ? x : 0.0;
        case Activation::tanh: return std::tanh(x);
        }
    }
    return x;
}

// One row: x[j] := act(x[j] + b[j]). A is a compile-time constant in each call below, so the
// switch folds away and the loop vectorizes.
template <Activation A, class T>
[[gnu::always_inline]] inline void activate_row(T* x, std::size_t n, const T* b) {
    if (b) {
#pragma omp simd
        for (std::size_t j = 0; j < n; ++j) x[j] = apply_one(A, x[j] + b[j]);
    } else {
#pragma omp simd
        for (std::size_t j = 0; j < n; ++j) x[j] = apply_one(A, x[j]);
    }
}

template <Activation A, class T>
[[gnu::always_inline]] inline void gated_row(T* g, const T* u, std::size_t n, const T* gb, const T* ub) {
    if (gb || ub) {
        for (std::size_t j = 0; j < n; ++j) g[j] = apply_one(A, g[j] + (gb ? gb[j] : T(0))) * (u[j] + (ub ? ub[j] : T(0)));
        return;
    }
#pragma omp simd
    for (std::size_t j = 0; j < n; ++j) g[j] = apply_one(A, g[j]) * u[j];
}

// Calls F.template operator()<A>() for the activation ACT, so each activation gets its own loop.
template <class F>
[[gnu::always_inline]] inline void dispatch(Activation act, F&& f) {
    switch (act) {
    case Activation::gelu: return f.template operator()<Activation::gelu>();
    case Activation::gelu_tanh: return f.template operator()<Activation::gelu_tanh>();
    case Activation::gelu_fast: return f.template operator()<Activation::gelu_fast>();
    case Activation::bloom_gelu: return f.template operator()<Activation::bloom_gelu>();
    case Activation::quick_gelu: return f.template operator()<Activation::quick_gelu>();
    case Activation::silu: return f.template operator()<Activation::silu>();
    case Activation::relu: return f.template operator()<Activation::relu>();
    case Activation::tanh: return f.template operator()<Activation::tanh>();
    }
}

template <class T>
[[gnu::always_inline]] inline void activate_rows(Activation act, T* x, std::size_t rows, std::size_t cols,
                                                 std::size_t ld, const T* bias) {
    dispatch(act, [&]<Activation A>() {
        for (std::size_t r = 0; r < rows; ++r) activate_row<A>(x + r * ld, cols, bias);
    });
}

template <class T>
[[gnu::always_inline]] inline void gated_rows(Activation act, T* g, std::size_t ldg, const T* u, std::size_t ldu,
                                              std::size_t rows, std::size_t cols, const T* gb, const T* ub) {
    dispatch(act, [&]<Activation A>() {
        for (std::size_t r = 0; r < rows; ++r) gated_row<A>(g + r * ldg, u + r * ldu, cols, gb, ub);
    });
}

}  // namespace

std::optional<Activation> activation_from_name(std::string_view name) {
    for (const Named& n : kNames)
        if (n.name == name) return n.act;
    return std::nullopt;
}

std::string activation_names() {
    std::string out;
    for (const Named& n : kNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
}

std::string_view activation_name(Activation act) {
    switch (act) {
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::gelu_fast: return "gelu_fast";
    case Activation::bloom_gelu: return "bloom_gelu";
    case Activation::quick_gelu: return "quick_gelu";
    case Activation::silu: return "silu";
    case Activation::relu: return "relu";
    case Activation::tanh: return "tanh";
    }
    return "";
}

ATTNTRACE_CLONES void activate(Activation act, float* x, std::size_t rows, std::size_t cols, std::size_t ld,
                               const float* bias) {
    activate_rows(act, x, rows, cols, ld, bias);
}

void activate(Activation act, double* x, std::size_t rows, std::size_t cols, std::size_t ld, const double* bias) {
    activate_rows(act, x, rows, cols, ld, bias);
}

ATTNTRACE_CLONES void activate_gated(Activation act, float* g, std::size_t ldg, const float* u, std::size_t ldu,
                                     std::size_t rows, std::size_t cols, const float* gate_bias, const float* up_bias) {
    gated_rows(act, g, ldg, u, ldu, rows, cols, gate_bias, up_bias);
}

void activate_gated(Activation act, double* g, std::size_t ldg, const double* u, std::size_t ldu, std::size_t rows,
                    std::size_t cols, const double* gate_bias, const double* up_bias) {
    gated_rows(act, g, ldg, u, ldu, rows, cols, gate_bias, up_bias);
}

}  // namespace attntrace
