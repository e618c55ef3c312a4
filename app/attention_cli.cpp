#include "attention_cli.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <unistd.h>

#include "attntrace/errors.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/tensor_io.hpp"

void add_attention_flags(CLI::App& cmd, AttentionFlags& f) {
    cmd.add_option("--scale", f.scale, "score scale (default 1/sqrt(head dim))");
    cmd.add_flag("--causal", f.causal, "query i sees keys <= i (top-left aligned, as PyTorch's is_causal)");
    cmd.add_option("--attn-mask", f.attn_mask,
                   "mask file: bool (true = not allowed) or float (added to the scores); (Lq, Lk) or broadcastable");
    cmd.add_option("-o,--output", f.output, "write the output tensor: .npy, .json, or - (stdout, npy)");
    cmd.add_option("--attn-weights", f.attn_weights, "write the softmax weights: .npy, .json or -");
    cmd.add_option("--dtype", f.dtype, "compute and output precision")
        ->check(CLI::IsMember({"f32", "f64"}))
        ->capture_default_str();
    cmd.add_option("--trace", f.trace, "what the trace shows: none, shapes, values")
        ->check(CLI::IsMember({"none", "shapes", "values"}))
        ->capture_default_str();
    cmd.add_option("--threads", f.threads, "number of threads (default: all cores)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
}

template <class T>
void load_attn_mask(const AttentionFlags& flags, attntrace::Masks<T>& masks) {
    masks.causal = flags.causal;
    if (flags.attn_mask.empty()) return;
    auto mask = attntrace::load_tensor<T>(flags.attn_mask);
    masks.attn_mask_is_bool = !attntrace::is_float(mask.source.dtype);
    masks.attn_mask = std::move(mask.array);
    masks.attn_mask_name = flags.attn_mask;
}

template <class T>
attntrace::StageRecorder<T> make_recorder(const AttentionFlags& flags) {
    return attntrace::StageRecorder<T>({}, flags.trace == "values");
}

void check_outputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs) {
    std::size_t to_stdout = 0;
    for (const auto& out : outputs) {
        if (out.empty()) continue;
        if (out == "-") ++to_stdout;
        attntrace::ensure_not_an_input(out, inputs);
    }
    if (to_stdout > 1) throw attntrace::UsageError("-o: only one output can go to stdout (-)");
}

namespace {

std::optional<attntrace::FileFormat> stdout_format(const std::string& path) {
    if (path == "-") return attntrace::FileFormat::npy;
    return std::nullopt;
}

bool use_terminal_style(FILE* stream) {
    return isatty(fileno(stream)) && std::getenv("NO_COLOR") == nullptr;
}

}  // namespace

template <class T>
void finish_attention(const AttentionFlags& flags, const std::vector<std::string>& /*inputs*/,
                      attntrace::AttentionResult<T>& result, const attntrace::StageRecorder<T>& recorder,
                      const std::string& header) {
    if (!flags.output.empty()) attntrace::save_tensor(flags.output, result.output, stdout_format(flags.output));
    if (!flags.attn_weights.empty() && result.weights)
        attntrace::save_tensor(flags.attn_weights, *result.weights, stdout_format(flags.attn_weights));
    if (flags.trace == "none") return;
    // The trace goes to stdout unless a tensor does; then to stderr, so pipelines stay clean.
    const bool tensor_on_stdout = flags.output == "-" || flags.attn_weights == "-";
    FILE* stream = tensor_on_stdout ? stderr : stdout;
    attntrace::TextStyle style;
    style.values = flags.trace == "values";
    style.unicode = style.color = use_terminal_style(stream);
    const std::string text = attntrace::render_text_trace(header, recorder.stages(), style);
    if (tensor_on_stdout) {
        std::cerr << text << std::flush;
    } else {
        std::cout << text << std::flush;
    }
}

template void load_attn_mask(const AttentionFlags&, attntrace::Masks<float>&);
template void load_attn_mask(const AttentionFlags&, attntrace::Masks<double>&);
template attntrace::StageRecorder<float> make_recorder(const AttentionFlags&);
template attntrace::StageRecorder<double> make_recorder(const AttentionFlags&);
template void finish_attention(const AttentionFlags&, const std::vector<std::string>&,
                               attntrace::AttentionResult<float>&, const attntrace::StageRecorder<float>&,
                               const std::string&);
template void finish_attention(const AttentionFlags&, const std::vector<std::string>&,
                               attntrace::AttentionResult<double>&, const attntrace::StageRecorder<double>&,
                               const std::string&);
