// attntrace check DIR [mha's flags] | check DIR --sdpa [sdpa's flags]: compares another
// implementation's stage tensors with the float64 reference and names the first divergence.
#include <iostream>
#include <memory>

#include "mha_inputs.hpp"
#include "attntrace/check/check.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct CheckFlags {
    MhaFlags model;  // the inputs, masks and (mha) parameters, as mha takes them
    std::string dir;
    bool sdpa = false;
    attntrace::ToleranceOverride tol;
    std::string format = "text";
};

// The reference problem from the flags, in float64.
attntrace::CheckProblem check_problem(const CheckFlags& f) {
    const auto& c = f.model.common;
    AttentionRun<double> run(c, f.sdpa ? attntrace::sdpa_stage_names() : attntrace::mha_stage_names());
    attntrace::CheckProblem p;
    p.is_mha = !f.sdpa;
    p.options = run.options;
    if (f.sdpa) {
        if (c.key.empty() || c.value.empty()) throw attntrace::UsageError("--sdpa: give -k and -v too");
        if (f.model.heads || !f.model.params.empty() || !f.model.key_padding_mask.empty() || !f.model.valid_lens.empty())
            throw attntrace::UsageError("--sdpa: --heads, --params, --key-padding-mask and --valid-lens are mha's");
        p.query = attntrace::load_tensor<double>(c.query).array;
        p.key = attntrace::load_tensor<double>(c.key).array;
        p.value = attntrace::load_tensor<double>(c.value).array;
        run.load_attn_mask(p.masks);
        return p;
    }
    if (f.model.heads == 0) throw attntrace::UsageError("--heads: required (or --sdpa for attention without projections)");
    auto in = load_mha_inputs<double>(f.model, run);
    p.query = in.query.array, p.key = in.key().array, p.value = in.value().array;
    p.masks = std::move(in.masks);
    p.params = std::move(in.params);
    p.config = {f.model.heads, in.dims.kv_heads, !f.model.no_out_proj};
    return p;
}

void run_check(const CheckFlags& f) {
    const FlagNames flags{{"rtol", "--rtol"}, {"atol", "--atol"}};
    auto report = naming_flags(flags, [&] { return attntrace::check_implementation(check_problem(f), f.dir, f.tol); });
    if (report.diagnosis)  // the library's "0.2 = the given scale" is --scale here
        report.diagnosis->detail = with_flag_phrases(report.diagnosis->detail, {{"the given scale", "--scale"}});
    if (f.format == "json") {
        std::cout << attntrace::check_json(report).dump() << '\n' << std::flush;
    } else {
        std::cout << attntrace::check_text(report) << std::flush;
    }
    if (report.first_divergence) throw CLI::RuntimeError(attntrace::exit_differs);
}

}  // namespace

void setup_check(CLI::App& app) {
    auto [f, cmd] = add_command<CheckFlags>(app, "check", "Find where another attention implementation's stages diverge, and why",
                                            run_check, kParamFlagPhrases);
    cmd->add_option("DIR", f->dir, "the other implementation's stages: STAGE.npy or STAGE.json, any subset")->required();
    cmd->add_flag("--sdpa", f->sdpa, "the reference is sdpa (-q -k -v, no projections) instead of mha");
    add_mha_model_flags(*cmd, f->model);
    add_attention_input_flags(*cmd, f->model.common);
    cmd->add_option("--rtol", f->tol.rtol, "relative tolerance for every stage (default: by the file's dtype)");
    cmd->add_option("--atol", f->tol.atol, "absolute tolerance for every stage (default: by the file's dtype)");
    cmd->add_option("--format", f->format, "the report as text or JSON")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    cmd->footer(R"(The reference runs in float64 with the same inputs and flags as mha (or sdpa with --sdpa).
Each stage file present is compared in forward order: match, differs, shape mismatch, or missing.
Default tolerance by the file's dtype: float64 rtol 1e-5, atol 1e-8; float32 rtol 1e-4,
atol 1e-5 * max|stage|; float16 rtol 1e-2, atol 1e-3 * max|stage|. The first diverging stage is
diagnosed: missing_scale, wrong_scale, softmax_axis, transposed_weight, wrong_projection,
head_split, mask_inverted, causal_offset, context_from_input, missing_bias, or unknown.
Exit 0 when every stage given matches, 1 when one differs.

Examples:
  attntrace check mine/ -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors
  attntrace check mine/ --sdpa -q q.npy -k k.npy -v v.npy --causal --format json)");
}
