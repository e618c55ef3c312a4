// attntrace mha -q QUERY [-k KEY] [-v VALUE] --heads H: multi-head attention with projections,
// with torch.nn.MultiheadAttention(batch_first=True) semantics.
#include <memory>

#include "attention_cli.hpp"
#include "attntrace/atomic_write.hpp"
#include "attntrace/errors.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/numbers.hpp"
#include "attntrace/params.hpp"
#include "attntrace/safetensors.hpp"
#include "attntrace/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

template <class T>
void run_mha(const MhaFlags& f) {
    const auto& c = f.common;
    AttentionRun<T> run(c, attntrace::mha_stage_names());
    const std::string key_path = c.key.empty() ? c.query : c.key;
    const std::string value_path = c.value.empty() ? key_path : c.value;
    std::vector<std::string> inputs{c.query, key_path, value_path, c.attn_mask, f.params, f.key_padding_mask};
    const auto valid_list = f.valid_lens.empty() ? std::nullopt : parse_uint_list(f.valid_lens);
    if (!f.valid_lens.empty() && !valid_list) inputs.push_back(f.valid_lens);
    run.check_outputs(inputs, {{"--save-params", f.save_params}});
    if (f.heads == 0) throw attntrace::UsageError("--heads: must be at least 1");

    const auto in = load_mha_inputs<T>(f, run);
    const auto &query = in.query, &key = in.key(), &value = in.value();
    const auto& masks = in.masks;
    const auto& dims = in.dims;
    const auto& params = in.params;
    if (query.array.dimension() >= 2 && key.array.dimension() >= 2) {
        const std::size_t batch = query.array.dimension() == 3 ? query.array.shape()[0] : 1;
        run.check_budget({batch, f.heads, query.array.shape()[query.array.dimension() - 2],
                          key.array.shape()[key.array.dimension() - 2]});
    }

    run.options.average_heads = f.average_heads;
    run.options.query_name = c.query, run.options.key_name = key_path, run.options.value_name = value_path;
    const attntrace::MhaConfig config{f.heads, dims.kv_heads, !f.no_out_proj};
    auto result = attntrace::mha(query.array, key.array, value.array, params, config, masks, run.options,
                                 &run.recorder);
    if (!f.save_params.empty())
        attntrace::write_file_atomically(f.save_params,
                                         attntrace::safetensors_bytes(attntrace::torch_state_dict(params)));

    attntrace::TraceContext context;
    context.command = "mha";
    std::string& header = context.header;
    header = "mha: " + std::to_string(f.heads) + (f.heads == 1 ? " head" : " heads");
    if (dims.kv_heads != f.heads) header += " sharing " + std::to_string(dims.kv_heads) + " kv heads";
    header += ", head dim " + std::to_string(result.sizes.head_dim) + ", value head dim " +
              std::to_string(result.sizes.value_head_dim) + ", scale " + attntrace::format_number(static_cast<T>(result.scale)) +
              ", params " + params.source + " (" + params.scheme + ")";
    if (!params.ignored.empty()) {
        header += ", ignored:";
        for (const auto& n : params.ignored) header += " " + n;
    }
    header += ", " + std::to_string(result.empty_rows) + " empty rows";
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    context.options = {
        {"heads", f.heads},
        {"kv_heads", dims.kv_heads},
        {"head_dim", result.sizes.head_dim},
        {"value_head_dim", result.sizes.value_head_dim},
        {"out_dim", result.sizes.out_dim},
        {"out_proj", !f.no_out_proj},
        {"scale", result.scale},
        {"masks",
         {{"causal", c.causal},
          {"attn_mask", or_null(c.attn_mask)},
          {"attn_mask_kind", c.attn_mask.empty() ? nlohmann::json() : nlohmann::json(masks.attn_mask_is_bool ? "bool" : "float")},
          {"key_padding_mask", or_null(f.key_padding_mask)},
          {"valid_lens", or_null(f.valid_lens)},
          {"empty_rows", result.empty_rows}}},
        {"params",
         {{"source", params.source},
          {"scheme", params.scheme},
          {"prefix", f.prefix},
          {"names", params.names},
          {"ignored", params.ignored}}},
        {"average_heads", f.average_heads},
        {"dtype", c.dtype},
        {"threads", c.threads ? nlohmann::json(c.threads) : nlohmann::json()}};
    context.inputs = inputs_json(query, key, value);
    run.finish(result, context);
}

}  // namespace

void setup_mha(CLI::App& app) {
    auto f = std::make_shared<MhaFlags>();
    auto* cmd = app.add_subcommand("mha", "Multi-head attention with projections (torch.nn.MultiheadAttention)");
    add_mha_model_flags(*cmd, *f);
    cmd->get_option("--heads")->required();
    cmd->add_option("--save-params", f->save_params, "write the parameters used as .safetensors (PyTorch names)")
        ->check(file_name());
    cmd->add_flag("--average-heads", f->average_heads, "--attn-weights averaged over heads (B, Lq, Lk)");
    add_attention_flags(*cmd, f->common);
    cmd->footer(R"(Parameter names are tried in this order: PyTorch's nn.MultiheadAttention state_dict
(in_proj_weight or q/k/v_proj_weight, out_proj.*), d2l/atcold (W_q.weight ... W_o.weight),
Bloem (toqueries.weight ... unifyheads.*). Without --params the init is seeded and documented.

Examples:
  attntrace mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors
  attntrace mha -q x.npy --heads 8 --seed 1 --causal -o out.npy --attn-weights w.npy
  attntrace mha -q q.npy -k kv.npy --heads 5 --params d2l.safetensors --valid-lens 3,2)");
    cmd->callback([f] {
        if (f->common.dtype == "f64") {
            run_mha<double>(*f);
        } else {
            run_mha<float>(*f);
        }
    });
}
