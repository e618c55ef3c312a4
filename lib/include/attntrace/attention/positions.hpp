#pragma once
// What a transformer layer adds around the attention core: the pre-attention norms, rotary
// position embeddings, ALiBi slopes and which keys a query row may see (causal alignment,
// sliding window). Small functions, each checked against transformers' code as transcribed in
// tests/goldens/hf_attention.py.
//
// Legend: B batch, L/Lq/Lk lengths, E hidden size, H heads, P head dim, R rotary dims (<= P).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attntrace {

enum class NormKind : std::uint8_t { none, layer_norm, rms_norm };

// x (rows, E) in place: (x - mean) / sqrt(var + eps) * w + b (torch.nn.LayerNorm, biased
// variance), accumulated in double. W, B: (E); B may be null.
template <class T>
void layer_norm(T* x, std::size_t rows, std::size_t e, const T* w, const T* b, double eps);

// x (rows, D) with leading dim LD, in place: w * x / sqrt(mean(x^2) + eps) (LlamaRMSNorm; also
// Qwen3's per-head q_norm / k_norm), accumulated in double. W: (D).
template <class T>
void rms_norm(T* x, std::size_t rows, std::size_t d, std::size_t ld, const T* w, double eps);

// rope_scaling / rope_parameters: "default", "linear" (inv_freq / factor), "llama3" (three
// wavelength bands, modeling_rope_utils.py _compute_llama3_parameters) or "longrope" (inv_freq /
// short_factor; the long factors past original_max_position, _compute_longrope_parameters).
struct RopeScaling {
    std::string type = "default";
    double factor = 1;
    double low_freq_factor = 1;
    double high_freq_factor = 4;
    double original_max_position = 8192;  // original_max_position_embeddings
    std::vector<double> short_factor, long_factor;  // (R/2) each, longrope
    std::optional<double> attention_factor;         // longrope: cos and sin scaled (default from factor)
};

// (R/2) inverse frequencies 1 / theta^(2i / R), then scaled (modeling_rope_utils.py); longrope:
// divided by short_factor (LONG: by long_factor).
std::vector<double> rope_inv_freq(std::size_t rotary_dims, double theta, const RopeScaling& scaling, bool long_factors = false);

enum class RotaryStyle : std::uint8_t {
    half,         // rotate-half (Llama, NeoX): dim i pairs with i + R/2
    interleaved,  // GPT-J / Meta's original: dim 2i pairs with 2i + 1
};

struct Rotary {
    RotaryStyle style = RotaryStyle::half;
    std::size_t dims = 0;           // R, even; the dims past R pass through (NeoX's rotary_pct)
    std::vector<double> inv_freq;   // (R/2)
    // LongRoPE (Phi-3): (R/2) frequencies used instead of inv_freq when the sequence reaches past
    // LONG_AFTER positions (modeling_rope_utils.py dynamic_rope_update, longrope_frequency_update:
    // max(position_ids) + 1 > original_max_position_embeddings); empty: none.
    std::vector<double> long_inv_freq{};
    std::size_t long_after = 0;
    double attention_scaling = 1;   // cos and sin multiplied by it (LongRoPE's attention factor)
};

// x (B, L, heads*P) rows with leading dim LD, head h at columns [h*P, h*P + P), in place: each
// head's first R dims rotated by angle position * inv_freq (LongRoPE: the long frequencies when
// POS0 + L > long_after), cos and sin times attention_scaling, row i of the L at position POS0 + i;
// on up to THREADS workers (the same numbers on any count).
template <class T>
void apply_rotary(T* x, std::size_t b, std::size_t l, std::size_t heads, std::size_t p, std::size_t ld,
                  const Rotary& rotary, std::size_t pos0, std::size_t threads = 1);

// (H) ALiBi slopes as BLOOM's build_alibi_tensor computes them: the closest power of two n <= H
// gets 2^(-8i/n), i = 1..n; the remaining heads the odd powers of 2^(-4/n).
std::vector<double> alibi_slopes(std::size_t heads);

// Which keys query row I (of LQ) may see among LK, as the half-open range [begin, end).
//   causal: keys j <= i + shift; window W (implies causal): also j > i + shift - W;
//   shift = 0 (upper-left, PyTorch's is_causal) or Lk - Lq (lower-right: the queries are the
//   last Lq of the Lk positions, as with a KV cache).
struct KeyVisibility {
    bool causal = false;
    bool lower_right = false;
    std::optional<std::size_t> window;  // W >= 1
    bool any() const { return causal || window.has_value(); }
};
struct KeyRange {
    std::size_t begin = 0, end = 0;
};
KeyRange visible_keys(const KeyVisibility& v, std::size_t i, std::size_t lq, std::size_t lk);

// What a model layer adds around mha's core, stage by stage (each optional):
//   normed            the pre-attention norm of the query input (B, L, E)
//   q_rotary/k_rotary Qwen3's per-head q/k RMSNorm (OLMo 2's over the whole projection), then the
//                     rotary embedding, on (B, H|G, L, P)
//   masked_scores     + slope_h * j (ALiBi), keys outside visible_keys() masked
template <class T>
struct PositionStages {
    NormKind norm = NormKind::none;
    const T* norm_weight = nullptr;  // (E)
    const T* norm_bias = nullptr;    // (E), LayerNorm only (may be null)
    double norm_eps = 0;
    const T* q_norm = nullptr;       // (P), Qwen3; (H*P) with qk_norm_whole
    const T* k_norm = nullptr;       // (P); (G*P) with qk_norm_whole
    double qk_norm_eps = 0;
    bool qk_norm_whole = false;      // OLMo 2, OLMoE: one RMSNorm over each row's whole projection
    std::optional<Rotary> rotary;
    std::vector<double> alibi;       // (H) slopes; empty: none
    KeyVisibility visibility;        // causal alignment and window (mha's own --causal included)
    std::string description;         // for the trace's first line: "gpt2 layer 1 (...)"
    bool any() const { return norm != NormKind::none || rotary || q_norm || !alibi.empty() || visibility.any(); }
};

}  // namespace attntrace
