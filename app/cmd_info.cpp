// attntrace info FILE...: format, dtype, shape, order, element count and statistics per file.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "attntrace/io/gguf.hpp"
#include "attntrace/model/checkpoint.hpp"
#include "attntrace/tensor/stats.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attention_flags.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct InfoOptions {
    std::vector<std::string> files;
    bool json = false;                       // --json
    TraceFormat format = TraceFormat::text;  // --format json: the same
};

// The checkpoint text's plans and advice in mha's flags: "  --model --layer 2: LayerNorm ...".
const FlagNames kCheckpointInfoPhrases = {{"  plan of layer ", "  --model --layer "},
                                          {"a checkpoint is read from its folder", "--model takes the folder"}};

// Stops at the first bad file (exit 3); the files before it are already printed.
void run_info(const InfoOptions& opt) {
    const bool json = opt.json || opt.format == TraceFormat::json;
    for (const std::string& file : opt.files) {
        if (file != "-" && attntrace::is_gguf_path(file)) {
            std::cout << (json ? attntrace::gguf_info_json(file).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"
                               : with_flag_phrases(attntrace::gguf_info(file), kCheckpointInfoPhrases))
                      << std::flush;
            continue;
        }
        if (attntrace::is_checkpoint_path(file)) {
            std::cout << (json ? attntrace::checkpoint_info_json(file).dump() + "\n"
                                   : with_flag_phrases(attntrace::checkpoint_info(file), kCheckpointInfoPhrases))
                      << std::flush;
            continue;
        }
        const auto loaded = attntrace::load_tensor<double>(file);
        const attntrace::Shape shape(loaded.array.shape().begin(), loaded.array.shape().end());
        const auto stats = attntrace::tensor_stats(loaded.array);
        std::cout << (json ? attntrace::info_json(loaded.source, shape, stats)
                               : attntrace::info_text(loaded.source, shape, stats))
                  << std::flush;
    }
}

}  // namespace

void setup_info(CLI::App& app) {
    auto [opt, cmd] = add_command<InfoOptions>(app, "info", "Describe tensor files: format, dtype, shape, statistics", run_info);
    cmd->add_option("FILE", opt->files, "a .npy or JSON tensor file, - (stdin), a checkpoint folder / .safetensors file, or a GGUF file")->required()->check(file_name());
    cmd->add_flag("--json", opt->json, "one JSON object per file, one per line (JSON Lines)");
    add_mode_option(*cmd, "--format", opt->format, {{"text", TraceFormat::text}, {"json", TraceFormat::json}},
                    "text, or json: the same as --json");
    cmd->footer(R"(min/max/mean/std are over the finite values; NaN and Inf are counted apart.
Stops at the first file that cannot be read (exit 3).

Examples:
  attntrace info data/x.npy
  attntrace info path/to/gpt2          (a Hugging Face checkpoint: layers, attention tensors, --model plan)
  attntrace info model.gguf            (a GGUF file: architecture, sizes, tensor types, tokenizer, plans)
  attntrace info --json a.npy b.json | jq .shape
  attntrace random --shape 2,3 -o - | attntrace info -)");
}
