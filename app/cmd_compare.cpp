// attntrace compare A B: numpy.allclose on two tensor files; exit 1 when they differ.
#include <iostream>
#include <memory>
#include <string>

#include "attntrace/check/compare.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct CompareOptions {
    std::string a;
    std::string b;
    attntrace::Tolerance tol;
};

void run_compare(const CompareOptions& opt) {
    const auto a = attntrace::load_tensor<double>(opt.a);
    const auto b = attntrace::load_tensor<double>(opt.b);
    const FlagNames flags{{"rtol", "--rtol"}, {"atol", "--atol"}};
    const auto result = naming_flags(flags, [&] { return attntrace::compare_tensors(a.array, b.array, opt.tol); });
    std::cout << attntrace::compare_report(result, opt.tol, opt.a, opt.b) << std::flush;
    if (!result.close) throw CLI::RuntimeError(attntrace::exit_differs);
}

}  // namespace

void setup_compare(CLI::App& app) {
    auto [opt, cmd] = add_command<CompareOptions>(app, "compare", "Check that two tensors are close (numpy.allclose)",
                                                  run_compare);
    required_file(*cmd, "A", opt->a, "the tensor to check; - reads stdin");
    required_file(*cmd, "B", opt->b, "the reference tensor (rtol scales |B|)");
    cmd->add_option("--rtol", opt->tol.rtol, "relative tolerance")->capture_default_str();
    cmd->add_option("--atol", opt->tol.atol, "absolute tolerance")->capture_default_str();
    cmd->footer(R"(A element is close when |a - b| <= atol + rtol * |b|; NaN is never close, and the
shapes must be equal. Exit 0 when every element is close, 1 when not (the largest absolute and
relative differences are printed with their positions), 3 when a file cannot be read.

Examples:
  attntrace compare out.npy expected.npy
  attntrace compare out.npy expected.json --rtol 1e-4 --atol 1e-6)");
}
