#pragma once
// The MLP activations of transformers' activations.py (ACT2FN) and BLOOM's own GELU, applied to a
// whole block of the MLP in one pass. float uses branch-free approximations that vectorize (an
// exp polynomial within 2.5e-7 relative, erf within 1.5e-7 absolute), double the libm functions.
//
//   gelu               x/2 (1 + erf(x / sqrt 2))                         GELUActivation (exact)
//   gelu_tanh          x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    gelu_new, gelu_pytorch_tanh
//   gelu_fast          x/2 (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))
//   bloom_gelu         x/2 (1 + tanh(0.79788456 x (1 + 0.044715 x^2)))  modeling_bloom.py bloom_gelu_forward
//   quick_gelu         x sigmoid(1.702 x)
//   silu               x sigmoid(x)                                      silu, swish
//   relu, tanh
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attntrace {

enum class Activation : std::uint8_t { gelu, gelu_tanh, gelu_fast, bloom_gelu, quick_gelu, silu, relu, tanh };

// config.json's hidden_act / activation_function name -> the activation; nullopt when unknown.
std::optional<Activation> activation_from_name(std::string_view name);
// "gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, quick_gelu, silu, swish, relu, tanh"
std::string activation_names();
// The activation's name as this file's table spells it ("gelu_tanh").
std::string_view activation_name(Activation act);

// x[i] := act(x[i] + bias[i % cols]) for N = rows * cols values of rows of COLS at leading dim LD;
// BIAS (cols) may be null.
void activate(Activation act, float* x, std::size_t rows, std::size_t cols, std::size_t ld, const float* bias);
void activate(Activation act, double* x, std::size_t rows, std::size_t cols, std::size_t ld, const double* bias);

// The gated MLP's middle: g[i] := act(g[i] + gate_bias) * (u[i] + up_bias) over rows of COLS, G at
// leading dim LDG and U at LDU; the biases (cols) may be null.
void activate_gated(Activation act, float* g, std::size_t ldg, const float* u, std::size_t ldu, std::size_t rows,
                    std::size_t cols, const float* gate_bias, const float* up_bias);
void activate_gated(Activation act, double* g, std::size_t ldg, const double* u, std::size_t ldu, std::size_t rows,
                    std::size_t cols, const double* gate_bias, const double* up_bias);

}  // namespace attntrace
