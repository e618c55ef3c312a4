// attntrace info FILE...: format, dtype, shape, order, element count and statistics per file.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "attntrace/model/checkpoint.hpp"
#include "attntrace/tensor/stats.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct InfoOptions {
    std::vector<std::string> files;
    bool json = false;
};

// The checkpoint text's plans and advice in mha's flags: "  --model --layer 2: LayerNorm ...".
const FlagNames kCheckpointInfoPhrases = {{"  plan of layer ", "  --model --layer "},
                                          {"a checkpoint is read from its folder", "--model takes the folder"}};

// Stops at the first bad file (exit 3); the files before it are already printed.
void run_info(const InfoOptions& opt) {
    for (const std::string& file : opt.files) {
        if (attntrace::is_checkpoint_path(file)) {
            std::cout << (opt.json ? attntrace::checkpoint_info_json(file).dump() + "\n"
                                   : with_flag_phrases(attntrace::checkpoint_info(file), kCheckpointInfoPhrases))
                      << std::flush;
            continue;
        }
        const auto loaded = attntrace::load_tensor<double>(file);
        const attntrace::Shape shape(loaded.array.shape().begin(), loaded.array.shape().end());
        const auto stats = attntrace::tensor_stats(loaded.array);
        std::cout << (opt.json ? attntrace::info_json(loaded.source, shape, stats)
                               : attntrace::info_text(loaded.source, shape, stats))
                  << std::flush;
    }
}

}  // namespace

void setup_info(CLI::App& app) {
    auto [opt, cmd] = add_command<InfoOptions>(app, "info", "Describe tensor files: format, dtype, shape, statistics", run_info);
    cmd->add_option("FILE", opt->files, "a .npy or JSON tensor file, - (stdin), or a checkpoint folder / .safetensors file")->required()->check(file_name());
    cmd->add_flag("--json", opt->json, "one JSON object per file, one per line (JSON Lines)");
    cmd->footer(R"(min/max/mean/std are over the finite values; NaN and Inf are counted apart.
Stops at the first file that cannot be read (exit 3).

Examples:
  attntrace info data/x.npy
  attntrace info path/to/gpt2          (a Hugging Face checkpoint: layers, attention tensors, --model plan)
  attntrace info --json a.npy b.json | jq .shape
  attntrace random --shape 2,3 -o - | attntrace info -)");
}
