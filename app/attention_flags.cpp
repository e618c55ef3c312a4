#include "attention_flags.hpp"

#include "attntrace/tensor/errors.hpp"

using namespace attntrace;


void add_dtype_flag(CLI::App& cmd, Precision& dtype) {
    add_mode_option(cmd, "--dtype", dtype, {{"f32", Precision::f32}, {"f64", Precision::f64}},
                    "compute and output precision");
}

void add_format_flag(CLI::App& cmd, TraceFormat& format) {
    add_mode_option(cmd, "--format", format, {{"text", TraceFormat::text}, {"json", TraceFormat::json}},
                    "the trace as text, or as one JSON document on stdout");
}

void add_attention_input_flags(CLI::App& cmd, AttentionFlags& f) {
    cmd.add_option("--scale", f.scale, "score scale (default 1/sqrt(head dim))");
    cmd.add_flag("--causal", f.causal, "query i sees keys <= i (top-left aligned, as PyTorch's is_causal)");
    cmd.add_option("--attn-mask", f.attn_mask,
                   "mask file: bool (true = not allowed) or float (added to the scores); (Lq, Lk) or broadcastable")
        ->check(file_name());
}

void add_attention_flags(CLI::App& cmd, AttentionFlags& f) {
    add_attention_input_flags(cmd, f);
    cmd.add_option("--softcap", f.softcap,
                   "soft-cap the scores before the masks: tanh(s / C) * C (Gemma 2's attn_logit_softcapping)");
    cmd.add_option("-o,--output", f.output, "write the output tensor: .npy, .json, or - (stdout, npy)")
        ->check(file_name());
    cmd.add_option("--attn-weights", f.attn_weights, "write the softmax weights: .npy, .json or - (stdout, npy)")
        ->check(file_name());
    add_dtype_flag(cmd, f.dtype);
    add_mode_option(cmd, "--trace", f.trace,
                    {{"none", TraceDetail::none}, {"shapes", TraceDetail::shapes}, {"values", TraceDetail::values}},
                    "what the trace shows: none, shapes (with head statistics), values");
    add_format_flag(cmd, f.format);
    cmd.add_option("--dump", f.dumps, "write a stage's tensor: STAGE=FILE (.npy, .json); repeatable");
    cmd.add_option("--threads", f.threads, "number of threads (default: all cores)")
        ->check(positive_integer(1024));
    cmd.add_option("--max-memory", f.max_memory,
                   "refuse runs whose (Lq, Lk) buffers need more (e.g. 4G; default: half the RAM)");
    add_picture_flags(cmd, f.pictures, true, "--picture-scale");
    cmd.add_option("--rotary", f.rotary, "rotary position embedding on q and k: half (Llama, NeoX) or interleaved (GPT-J)")
        ->check(CLI::IsMember({"half", "interleaved"}));
    cmd.add_option("--rotary-theta", f.rotary_theta, "rotary base theta")->capture_default_str();
    cmd.add_option("--rotary-dims", f.rotary_dims, "rotate the first R dims of each head (default: all)")
        ->check(positive_integer());
    cmd.add_flag("--alibi", f.alibi, "add BLOOM's ALiBi bias slope_h * j to the scores");
    cmd.add_option("--window", f.window, "sliding window W: key j visible to query i when i - W < j <= i")
        ->check(positive_integer());
    cmd.add_option("--causal-align", f.causal_align,
                   "causal diagonal: upper-left (PyTorch's default) or lower-right (queries end the keys, KV cache)")
        ->check(CLI::IsMember({"upper-left", "lower-right"}))
        ->capture_default_str();
}

std::string_view precision_name(Precision p) { return p == Precision::f64 ? "f64" : "f32"; }

template <class T>
PositionStages<T> positions_from_flags(const AttentionFlags& f, std::size_t heads, std::size_t head_dim) {
    PositionStages<T> pos;
    if (!f.rotary.empty()) {
        const std::size_t dims = f.rotary_dims ? f.rotary_dims : head_dim;
        if (dims % 2 != 0 || dims > head_dim)
            throw UsageError("--rotary-dims: " + std::to_string(dims) + " must be even and at most the head dim " +
                             std::to_string(head_dim));
        if (!(f.rotary_theta > 0)) throw UsageError("--rotary-theta: must be positive");
        pos.rotary = Rotary{f.rotary == "half" ? RotaryStyle::half : RotaryStyle::interleaved, dims,
                            rope_inv_freq(dims, f.rotary_theta, RopeScaling{})};
    } else if (f.rotary_dims) {
        throw UsageError("--rotary-dims: needs --rotary half|interleaved");
    }
    if (f.alibi) pos.alibi = alibi_slopes(heads);
    pos.visibility.causal = f.causal;
    pos.visibility.lower_right = f.causal_align == "lower-right";
    if (f.window) pos.visibility.window = f.window;
    return pos;
}

template PositionStages<float> positions_from_flags<float>(const AttentionFlags&, std::size_t, std::size_t);
template PositionStages<double> positions_from_flags<double>(const AttentionFlags&, std::size_t, std::size_t);

void add_mha_model_flags(CLI::App& cmd, MhaFlags& f) {
    required_file(cmd, "-q,--query", f.common.query, "QUERY (B, Lq, Eq) or (Lq, Eq)");
    cmd.add_option("-k,--key", f.common.key, "KEY (B, Lk, Ek); default QUERY")->check(file_name());
    cmd.add_option("-v,--value", f.common.value, "VALUE (B, Lk, Ev); default KEY")->check(file_name());
    cmd.add_option("--heads", f.heads, "number of heads H")->check(positive_integer());
    cmd.add_option("--kv-heads", f.kv_heads, "grouped-query attention: G key/value heads (H % G == 0)")
        ->check(positive_integer());
    cmd.add_option("--params", f.params, "parameters: .safetensors, .json, or a directory of NAME.npy")
        ->check(file_name());
    cmd.add_option("--prefix", f.prefix, "use only parameter names starting with this prefix (stripped)");
    cmd.add_option("--seed", f.seed, "seed of the random init when there is no --params")->capture_default_str();
    cmd.add_flag("--bias,!--no-bias", f.bias, "random init: with biases (default) or without");
    cmd.add_option("--head-dim", f.head_dim, "random init: P (default E/H)")->check(positive_integer());
    cmd.add_option("--value-head-dim", f.value_head_dim, "random init: Pv (default P)")->check(positive_integer());
    cmd.add_option("--out-dim", f.out_dim, "random init: PO (default E)")->check(positive_integer());
    cmd.add_flag("--no-out-proj", f.no_out_proj, "concatenate the heads with no output projection");
    cmd.add_option("--key-padding-mask", f.key_padding_mask, "(B, Lk) bool or 0/1: true ignores that key")
        ->check(file_name());
    cmd.add_option("--valid-lens", f.valid_lens, "d2l valid lengths: 3,2 or a (B,) / (B, Lq) file")->check(file_name());
}
