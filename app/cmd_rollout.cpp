// attntrace rollout W0.npy W1.npy ... -o OUT: attention rollout across layers (Abnar & Zuidema
// 2020), with the same pictures as mha (--plot, --heatmap).
#include <cstdio>
#include <iostream>
#include <memory>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/rollout.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "picture_flags.hpp"

namespace {

struct RolloutFlags {
    std::vector<std::string> layers;
    std::string output;
    std::string dtype = "f32";
    PictureFlags pictures;
};

template <class T>
void run_rollout(const RolloutFlags& f) {
    check_picture_flags(f.pictures);
    if (f.output.empty() && !f.pictures.any())
        throw attntrace::UsageError("rollout: nothing to do; give -o OUT, --plot FILE or --heatmap");
    std::vector<std::string> outputs = f.pictures.outputs();
    outputs.push_back(f.output);
    for (const auto& out : outputs)
        if (!out.empty()) attntrace::ensure_not_an_input(out, f.layers);
    std::vector<attntrace::Array<T>> layers;
    for (const auto& path : f.layers) layers.push_back(attntrace::load_tensor<T>(path).array);
    const attntrace::Array<T> rollout = attntrace::attention_rollout(layers, f.layers);
    if (!f.output.empty()) attntrace::save_tensor(f.output, rollout, f.output == "-" ? std::optional(attntrace::FileFormat::npy) : std::nullopt);
    if (!f.pictures.any()) return;
    // The rollout (B, L, L) pictured as B batch rows of one head each.
    attntrace::PooledWeights pooled = attntrace::pool_weights(rollout, kPictureCells);
    pooled.lead = rollout.dimension() == 3 ? attntrace::Shape{rollout.shape()[0], 1} : attntrace::Shape{1, 1};
    const std::size_t l = rollout.shape().back();
    const auto labels = load_axis_labels(f.pictures, l, l);
    const std::string title = "rollout over " + std::to_string(f.layers.size()) + " layers";
    FILE* stream = f.output == "-" ? stderr : stdout;
    const std::string text = draw_pictures(f.pictures, pooled, title, labels, stream, {});
    (f.output == "-" ? std::cerr : std::cout) << text << std::flush;
}

}  // namespace

void setup_rollout(CLI::App& app) {
    auto run = [](const RolloutFlags& f) {
        if (f.dtype == "f64") {
            run_rollout<double>(f);
        } else {
            run_rollout<float>(f);
        }
    };
    auto [f, cmd] = add_command<RolloutFlags>(app, "rollout", "Attention rollout across layers (Abnar & Zuidema 2020)", run);
    cmd->add_option("WEIGHTS", f->layers, "each layer's weights, first layer first: (B, H, L, L), (H, L, L) or (L, L)")
        ->required();
    cmd->add_option("-o,--output", f->output, "write the rollout (B, L, L) or (L, L): .npy, .json, or - (stdout)");
    cmd->add_option("--dtype", f->dtype, "compute and output precision")
        ->check(CLI::IsMember({"f32", "f64"}))
        ->capture_default_str();
    add_picture_flags(*cmd, f->pictures, false, "--scale");
    cmd->footer(R"(Per layer: the mean over heads, plus the identity (the residual connection), rows renormalised;
the rollout is the product of the layers, the last layer on the left. Row i says how much each
input token flows into position i at the top of the stack.

Examples:
  attntrace mha -q x.npy --heads 4 --attn-weights w0.npy ... (one file per layer)
  attntrace rollout w0.npy w1.npy w2.npy -o rollout.npy --plot rollout.png --labels tokens.txt)");
}
