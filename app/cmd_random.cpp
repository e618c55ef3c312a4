// attntrace random --shape 2,10,6 -o FILE: seeded tensors for demos and pipelines.
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/random.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct RandomOptions {
    std::string shape;
    std::string seed = "0";  // parsed here: CLI11 would wrap -1 to 2^64 - 1
    std::string dist = "normal";
    std::string dtype = "f32";
    std::string output;
    std::string to;  // "npy", "json", or "" (by extension; npy for -)
};

// "2,10,6" -> (2, 10, 6): at least one dim, each a non-negative integer (0 makes an empty tensor).
attntrace::Shape parse_shape(const std::string& text) {
    const auto dims = parse_uint_list(text);
    if (!dims) throw attntrace::UsageError("--shape: '" + text + "' is not a list of non-negative integers like 2,10,6");
    const attntrace::Shape shape(dims->begin(), dims->end());
    if (!attntrace::checked_element_count(shape)) {
        throw attntrace::UsageError("--shape: '" + text + "' has more than 2^64 elements");
    }
    return shape;
}

void run_random(const RandomOptions& opt) {
    const attntrace::Shape shape = parse_shape(opt.shape);
    const std::uint64_t seed = parse_seed(opt.seed);
    const auto dist = opt.dist == "uniform" ? attntrace::Distribution::uniform
                                            : attntrace::Distribution::normal;
    std::optional<attntrace::FileFormat> format;
    if (opt.to == "json") format = attntrace::FileFormat::json;
    if (opt.to == "npy" || (opt.to.empty() && opt.output == "-")) format = attntrace::FileFormat::npy;
    if (opt.dtype == "f64") {
        attntrace::save_tensor(opt.output, attntrace::random_tensor<double>(shape, dist, seed), format);
    } else {
        attntrace::save_tensor(opt.output, attntrace::random_tensor<float>(shape, dist, seed), format);
    }
}

}  // namespace

void setup_random(CLI::App& app) {
    auto [opt, cmd] = add_command<RandomOptions>(app, "random", "Write a seeded random tensor", run_random,
                                                 {{"(or name the format)", "(or --to)"}});
    cmd->add_option("--shape", opt->shape, "comma-separated dims, e.g. 2,10,6")->required();
    cmd->add_option("--seed", opt->seed, "the seed of the mt19937_64 generator")
        ->capture_default_str();
    cmd->add_option("--dist", opt->dist, "the distribution: normal (mean 0, std 1) or uniform [0, 1)")
        ->check(CLI::IsMember({"normal", "uniform"}))
        ->capture_default_str();
    cmd->add_option("--dtype", opt->dtype, "the dtype written")
        ->check(CLI::IsMember({"f32", "f64"}))
        ->capture_default_str();
    required_file(*cmd, "-o,--output", opt->output, "the output file; - writes stdout");
    cmd->add_option("--to", opt->to, "the output format (default: by extension, npy for -)")
        ->check(CLI::IsMember({"npy", "json"}));
    cmd->footer(R"(The values are the same on every machine: std::mt19937_64(seed); uniform is
(draw >> 11) * 2^-53; normal is Box-Muller, sqrt(-2 ln(1 - u1)) * cos(2 pi u2), two uniforms per
value; drawn in double, in row-major order, then rounded to the dtype.

Examples:
  attntrace random --shape 2,10,6 --seed 1 -o data/x.npy
  attntrace random --shape 4,4 --dist uniform --dtype f64 -o u.json
  attntrace random --shape 2,3 -o - | attntrace info -)");
}
