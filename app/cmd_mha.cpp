// attntrace mha -q QUERY [-k KEY] [-v VALUE] --heads H: multi-head attention with projections,
// with torch.nn.MultiheadAttention(batch_first=True) semantics.
#include <memory>

#include "mha_inputs.hpp"
#include "attntrace/io/atomic_write.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/model/checkpoint.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/attention/stage_report.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

// --model DIR --layer N: the checkpoint's layer, its weights, and the flags checked against its
// config.json (a flag that disagrees is exit 2).
template <class T>
struct ModelLayer {
    attntrace::CheckpointLayer layer;
    attntrace::LayerWeights<T> weights;
};

void check_model_flags(const MhaFlags& f, const attntrace::LayerConfig& c) {
    const std::string config = attntrace::is_gguf_path(f.model_dir) ? f.model_dir : f.model_dir + "/config.json";
    auto refuse = [&](const std::string& flag, const std::string& why) { throw attntrace::UsageError(flag + ": " + why); };
    if (!f.params.empty()) refuse("--params", "the weights come from --model");
    if (f.add_bias_kv || f.add_zero_attn) refuse("--add-bias-kv/--add-zero-attn", "the layer comes from --model");
    if (!f.common.key.empty() || !f.common.value.empty()) refuse("-k/-v", "--model runs the layer's self-attention on -q");
    if (f.heads && f.heads != c.heads)
        refuse("--heads", std::to_string(f.heads) + " but " + config + " has " + std::to_string(c.heads));
    if (f.kv_heads && f.kv_heads != c.kv_heads)
        refuse("--kv-heads", std::to_string(f.kv_heads) + " but " + config + " has " + std::to_string(c.kv_heads));
    if (f.common.scale && std::abs(*f.common.scale - c.scale) > 1e-12 * c.scale)
        refuse("--scale", attntrace::format_number(*f.common.scale) + " but " + config + " gives " +
                              attntrace::format_number(c.scale));
    if (f.common.softcap && (!c.softcap || std::abs(*f.common.softcap - *c.softcap) > 1e-12 * *c.softcap))
        refuse("--softcap", attntrace::format_number(*f.common.softcap) + " but " + config +
                                (c.softcap ? " gives " + attntrace::format_number(*c.softcap) : " has no soft-capping"));
    if (f.common.causal && !c.causal) refuse("--causal", "but the " + c.model_type + " layer in " + config + " is not causal");
    if (!f.common.rotary.empty() || f.common.alibi || f.common.window || f.common.causal_align != "upper-left")
        refuse("--rotary/--alibi/--window/--causal-align", "positions come from " + config + " with --model");
}

template <class T>
std::optional<ModelLayer<T>> open_model(const MhaFlags& f) {
    if (f.model_dir.empty()) {
        if (f.layer) throw attntrace::UsageError("--layer: needs --model DIR");
        if (f.normed) throw attntrace::UsageError("--normed: needs --model DIR");
        if (f.heads == 0) throw attntrace::UsageError("--heads: required (or --model DIR --layer N)");
        return std::nullopt;
    }
    if (!f.layer) throw attntrace::UsageError("--model: needs --layer N");
    auto layer = attntrace::open_checkpoint_layer(f.model_dir, *f.layer);
    check_model_flags(f, layer.config);
    auto weights = attntrace::load_layer_weights<T>(layer);
    return ModelLayer<T>{std::move(layer), std::move(weights)};
}

// The library's parameter names and the flags that set them.
const FlagNames kMhaFlags = {{"heads", "--heads"},           {"kv heads", "--kv-heads"},
                             {"head dim", "--head-dim"},     {"value head dim", "--value-head-dim"},
                             {"out dim", "--out-dim"}};

// The trace's header and options for one mha run; CONFIG: the config.json values with --model, else null.
template <class T>
attntrace::TraceContext mha_context(const MhaFlags& f, const attntrace::MhaConfig& mha_config,
                                    const attntrace::AttentionResult<T>& result,
                                    const attntrace::MhaParams<T>& params, const attntrace::Masks<T>& masks,
                                    const attntrace::PositionStages<T>& positions, const nlohmann::json& config) {
    attntrace::TraceContext context;
    context.command = "mha";
    context.header = config.is_null() ? "" : "mha: " + positions.description + "\n  config: " + config.dump() + "\n";
    context.header += attntrace::mha_header(result, params, mha_config);
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    auto& options = context.options = shared_trace_options(f.common, masks, result);
    options["masks"]["causal"] = masks.causal;
    options["masks"]["key_padding_mask"] = or_null(f.key_padding_mask);
    options["masks"]["valid_lens"] = or_null(f.valid_lens);
    const auto& rotary = positions.rotary;
    options.update({
        {"heads", mha_config.heads},
        {"kv_heads", mha_config.kv_heads},
        {"head_dim", result.sizes.head_dim},
        {"value_head_dim", result.sizes.value_head_dim},
        {"out_dim", result.sizes.out_dim},
        {"out_proj", !f.no_out_proj},
        {"model", config.is_null() ? nlohmann::json()
                                   : nlohmann::json{{"dir", f.model_dir}, {"layer", *f.layer}, {"normed_input", f.normed},
                                                    {"description", positions.description}, {"config", config}}},
        {"positions",
         {{"rotary", rotary ? nlohmann::json(rotary->style == attntrace::RotaryStyle::half ? "half" : "interleaved")
                            : nlohmann::json()},
          {"rotary_dims", rotary ? nlohmann::json(rotary->dims) : nlohmann::json()},
          {"alibi", !positions.alibi.empty()},
          {"window", positions.visibility.window ? nlohmann::json(*positions.visibility.window) : nlohmann::json()},
          {"causal_align", positions.visibility.lower_right ? "lower-right" : "upper-left"}}},
        {"params",
         {{"source", params.source},
          {"scheme", params.scheme},
          {"prefix", f.prefix},
          {"names", params.names},
          {"ignored", params.ignored}}},
        {"average_heads", f.average_heads}});
    return context;
}

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
    const auto model = open_model<T>(f);
    const std::size_t heads = model ? model->layer.config.heads : f.heads;
    const std::size_t kv_heads = model ? model->layer.config.kv_heads : (f.kv_heads ? f.kv_heads : f.heads);

    auto in = naming_flags(kMhaFlags, [&] { return load_mha_inputs<T>(f, run, heads, kv_heads, !model); });
    const auto &query = in.query, &key = in.key(), &value = in.value();
    auto& masks = in.masks;
    const auto& dims = in.dims;
    const attntrace::MhaParams<T>& params = model ? model->weights.attn : in.params;  // a checkpoint's in place
    const auto positions = model ? attntrace::positions_for_layer(model->layer.config, model->weights, f.normed)
                                 : positions_from_flags<T>(c, heads, params.w_q.shape()[0] / heads);
    if (model) {
        run.options.scale = model->layer.config.scale, masks.causal = model->layer.config.causal;
        run.options.softcap = model->layer.config.softcap;
    }
    run.options.average_heads = f.average_heads;
    if (query.array.dimension() >= 2 && key.array.dimension() >= 2) {
        const std::size_t batch = query.array.dimension() == 3 ? query.array.shape()[0] : 1;
        const std::size_t lq = query.array.shape()[query.array.dimension() - 2];
        const std::size_t lk = key.array.shape()[key.array.dimension() - 2];
        if (!f.add_zero_attn && !params.bias_k)  // else Lk grows by the extra key rows
            run.stream_weights(query.array.dimension() == 3 ? attntrace::Shape{batch, heads, lq, lk}
                                                            : attntrace::Shape{heads, lq, lk});
        run.stream_output();
        run.check_budget({batch, heads, lq, lk});
        run.enable_progress(batch * heads, lq, lk, dims.query_dim / heads);
    }

    run.options.query_name = c.query, run.options.key_name = key_path, run.options.value_name = value_path;
    const attntrace::MhaConfig config{heads, dims.kv_heads, !f.no_out_proj, f.add_zero_attn};
    FlagNames flags = kMhaFlags;  // the positions' flags too, unless they come from the checkpoint
    if (!model) flags.insert(flags.end(), kPositionFlagNames.begin(), kPositionFlagNames.end());
    auto result = naming_flags(flags, [&] {
        return attntrace::mha(query.array, key.array, value.array, params, config, masks, run.options, &run.recorder,
                              positions.any() ? &positions : nullptr);
    });
    if (!f.save_params.empty())
        attntrace::write_file_atomically(f.save_params,
                                         attntrace::safetensors_bytes(attntrace::torch_state_dict(params)));

    auto context = mha_context(f, config, result, params, masks, positions, model ? model->layer.config.values : nlohmann::json());
    context.inputs = inputs_json(query, key, value);
    run.finish(result, context);
}

}  // namespace

void setup_mha(CLI::App& app) {
    auto run = [](const MhaFlags& f) { with_precision(f.common.dtype, [&]<class T>() { run_mha<T>(f); }); };
    auto [f, cmd] = add_command<MhaFlags>(app, "mha", "Multi-head attention with projections (torch.nn.MultiheadAttention)", run,
                                          kParamFlagPhrases);
    add_mha_model_flags(*cmd, *f);
    cmd->add_option("--model", f->model_dir, "a Hugging Face checkpoint folder (config.json + model.safetensors or shards) or a GGUF file")
        ->check(file_name());
    cmd->add_option("--layer", f->layer, "with --model: the layer N to run (0-based); -q is hidden_states[N]");
    cmd->add_flag("--normed", f->normed, "with --model: -q is already through the layer's pre-attention norm");
    cmd->add_option("--save-params", f->save_params, "write the parameters used as .safetensors (PyTorch names)")
        ->check(file_name());
    cmd->add_flag("--add-bias-kv", f->add_bias_kv, "random init: torch's add_bias_kv (bias_k, bias_v xavier-normal)");
    cmd->add_flag("--add-zero-attn", f->add_zero_attn, "torch's add_zero_attn: a zero key/value row (Lk + 1)");
    cmd->add_flag("--average-heads", f->average_heads, "--attn-weights averaged over heads (B, Lq, Lk)");
    add_attention_flags(*cmd, f->common);
    cmd->footer(R"(Parameter names are tried in this order: PyTorch's nn.MultiheadAttention state_dict
(in_proj_weight or q/k/v_proj_weight, out_proj.*), d2l/atcold (W_q.weight ... W_o.weight),
Bloem (toqueries.weight ... unifyheads.*). Without --params the init is seeded and documented.

Examples:
  attntrace mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors
  attntrace mha -q x.npy --heads 8 --seed 1 --causal -o out.npy --attn-weights w.npy
  attntrace mha -q q.npy -k kv.npy --heads 5 --params d2l.safetensors --valid-lens 3,2
  attntrace mha --model gpt2/ --layer 5 -q hidden5.npy --attn-weights w.npy)");
}
