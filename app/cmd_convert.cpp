// attntrace convert IN OUT: between .npy and JSON.
#include <memory>
#include <optional>
#include <string>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct ConvertOptions {
    std::string input;
    std::string output;
    std::string to;     // "npy", "json" or "" (by OUT's extension)
    std::string dtype;  // "f32", "f64" or "" (f64 when the input is float64, else f32)
};

void run_convert(const ConvertOptions& opt) {
    if (opt.output == "-" && opt.to.empty()) {
        throw attntrace::UsageError("--to: required when writing to stdout");
    }
    attntrace::ensure_not_an_input(opt.output, {opt.input});
    const std::optional<attntrace::FileFormat> format =
        opt.to.empty() ? std::nullopt
                       : std::optional(opt.to == "json" ? attntrace::FileFormat::json
                                                        : attntrace::FileFormat::npy);
    auto loaded = attntrace::load_tensor<double>(opt.input);
    const bool f64 = opt.dtype.empty() ? loaded.source.dtype == attntrace::DType::f8 : opt.dtype == "f64";
    if (f64) {
        attntrace::save_tensor(opt.output, loaded.array, format);
    } else {
        attntrace::save_tensor(opt.output, attntrace::Array<float>(xt::cast<float>(loaded.array)), format);
    }
}

}  // namespace

void setup_convert(CLI::App& app) {
    auto [opt, cmd] = add_command<ConvertOptions>(app, "convert", "Convert a tensor file between .npy and JSON", run_convert,
                                                  {{"(or name the format)", "(or --to)"}});
    cmd->add_option("IN", opt->input, "the input file (.npy or JSON, detected); - reads stdin")
        ->required()
        ->check(file_name());
    cmd->add_option("OUT", opt->output, "the output file, format by extension; - writes stdout")
        ->required()
        ->check(file_name());
    cmd->add_option("--to", opt->to, "the output format (required for -)")
        ->check(CLI::IsMember({"npy", "json"}));
    cmd->add_option("--dtype", opt->dtype, "the output dtype (default: f64 for float64 input, else f32)")
        ->check(CLI::IsMember({"f32", "f64"}));
    cmd->footer(R"(The output is written atomically and never over the input.

Examples:
  attntrace convert x.npy x.json
  attntrace convert x.json x.npy --dtype f64
  attntrace random --shape 2,3 -o - | attntrace convert - out.json
  attntrace convert x.npy - --to json | jq .shape)");
}
