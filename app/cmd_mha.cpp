// attntrace mha -q QUERY [-k KEY] [-v VALUE] --heads H: multi-head attention with projections,
// with torch.nn.MultiheadAttention(batch_first=True) semantics.
#include <memory>

#include "attention_cli.hpp"
#include "attntrace/atomic_write.hpp"
#include "attntrace/checkpoint.hpp"
#include "attntrace/errors.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/numbers.hpp"
#include "attntrace/params.hpp"
#include "attntrace/safetensors.hpp"
#include "attntrace/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct MhaFlags {
    AttentionFlags common;
    std::size_t heads = 0;
    std::size_t kv_heads = 0;
    std::string params;
    std::string prefix;
    std::string seed = "0";  // parsed by parse_seed: CLI11 would wrap -1
    bool bias = true;
    std::size_t head_dim = 0, value_head_dim = 0, out_dim = 0;
    std::string save_params;
    bool no_out_proj = false;
    std::string key_padding_mask;
    std::string valid_lens;
    bool average_heads = false;
    std::string model;                 // --model DIR
    std::optional<std::size_t> layer;  // --layer N
    bool normed = false;               // --normed: the input is already normed
};

// --model DIR --layer N: the checkpoint's layer, its weights, and the flags checked against its
// config.json (a flag that disagrees is exit 2).
template <class T>
struct ModelLayer {
    attntrace::CheckpointLayer layer;
    attntrace::LayerWeights<T> weights;
};

void check_model_flags(const MhaFlags& f, const attntrace::LayerConfig& c) {
    const std::string config = f.model + "/config.json";
    auto refuse = [&](const std::string& flag, const std::string& why) { throw attntrace::UsageError(flag + ": " + why); };
    if (!f.params.empty()) refuse("--params", "the weights come from --model");
    if (!f.common.key.empty() || !f.common.value.empty()) refuse("-k/-v", "--model runs the layer's self-attention on -q");
    if (f.heads && f.heads != c.heads)
        refuse("--heads", std::to_string(f.heads) + " but " + config + " has " + std::to_string(c.heads));
    if (f.kv_heads && f.kv_heads != c.kv_heads)
        refuse("--kv-heads", std::to_string(f.kv_heads) + " but " + config + " has " + std::to_string(c.kv_heads));
    if (f.common.scale && std::abs(*f.common.scale - c.scale) > 1e-12 * c.scale)
        refuse("--scale", attntrace::format_number(*f.common.scale) + " but " + config + " gives " +
                              attntrace::format_number(c.scale));
    if (f.common.causal && !c.causal) refuse("--causal", "but the " + c.model_type + " layer in " + config + " is not causal");
    if (!f.common.rotary.empty() || f.common.alibi || f.common.window || f.common.causal_align != "upper-left")
        refuse("--rotary/--alibi/--window/--causal-align", "positions come from " + config + " with --model");
}

template <class T>
std::optional<ModelLayer<T>> open_model(const MhaFlags& f) {
    if (f.model.empty()) {
        if (f.layer) throw attntrace::UsageError("--layer: needs --model DIR");
        if (f.normed) throw attntrace::UsageError("--normed: needs --model DIR");
        if (f.heads == 0) throw attntrace::UsageError("--heads: required (or --model DIR --layer N)");
        return std::nullopt;
    }
    if (!f.layer) throw attntrace::UsageError("--model: needs --layer N");
    auto layer = attntrace::open_checkpoint_layer(f.model, *f.layer);
    check_model_flags(f, layer.config);
    auto weights = attntrace::load_layer_weights<T>(layer);
    return ModelLayer<T>{std::move(layer), std::move(weights)};
}

template <class T>
attntrace::MhaParams<T> resolve_params(const MhaFlags& f, const attntrace::MhaDims& dims) {
    if (!f.params.empty()) return attntrace::load_mha_params<T>(f.params, f.prefix, dims);
    const std::size_t h = dims.heads;
    attntrace::HeadSizes sizes;
    if (f.head_dim == 0 && dims.query_dim % h != 0)
        throw attntrace::ShapeError(f.common.query + ": embed dim " + std::to_string(dims.query_dim) +
                                    " is not divisible by --heads " + std::to_string(h) +
                                    " (give --head-dim, or a number of heads that divides it)");
    sizes.head_dim = f.head_dim ? f.head_dim : dims.query_dim / h;
    sizes.value_head_dim = f.value_head_dim ? f.value_head_dim : sizes.head_dim;
    sizes.out_dim = f.out_dim ? f.out_dim : dims.query_dim;
    return attntrace::random_mha_params<T>(dims, sizes, f.bias, parse_seed(f.seed));
}

// The trace's header and options for one mha run; CONFIG: the config.json values with --model, else null.
template <class T>
attntrace::TraceContext mha_context(const MhaFlags& f, const attntrace::MhaConfig& mha_config,
                                    const attntrace::AttentionResult<T>& result,
                                    const attntrace::MhaParams<T>& params, const attntrace::Masks<T>& masks,
                                    const attntrace::PositionStages<T>& positions, const nlohmann::json& config) {
    const auto& c = f.common;
    const std::size_t heads = mha_config.heads, kv_heads = mha_config.kv_heads;
    attntrace::TraceContext context;
    context.command = "mha";
    std::string& header = context.header;
    header = config.is_null() ? "" : "mha: " + positions.description + "\n  config: " + config.dump() + "\n";
    header += "mha: " + std::to_string(heads) + (heads == 1 ? " head" : " heads");
    if (kv_heads != heads) header += " sharing " + std::to_string(kv_heads) + " kv heads";
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
        {"heads", heads},
        {"kv_heads", kv_heads},
        {"head_dim", result.sizes.head_dim},
        {"value_head_dim", result.sizes.value_head_dim},
        {"out_dim", result.sizes.out_dim},
        {"out_proj", !f.no_out_proj},
        {"scale", result.scale},
        {"masks",
         {{"causal", masks.causal},
          {"attn_mask", or_null(c.attn_mask)},
          {"attn_mask_kind", c.attn_mask.empty() ? nlohmann::json() : nlohmann::json(masks.attn_mask_is_bool ? "bool" : "float")},
          {"key_padding_mask", or_null(f.key_padding_mask)},
          {"valid_lens", or_null(f.valid_lens)},
          {"empty_rows", result.empty_rows}}},
        {"model", config.is_null() ? nlohmann::json()
                                   : nlohmann::json{{"dir", f.model}, {"layer", *f.layer}, {"normed_input", f.normed},
                                                    {"description", positions.description}, {"config", config}}},
        {"positions",
         {{"rotary", positions.rotary ? nlohmann::json(positions.rotary->style == attntrace::RotaryStyle::half ? "half" : "interleaved") : nlohmann::json()},
          {"rotary_dims", positions.rotary ? nlohmann::json(positions.rotary->dims) : nlohmann::json()},
          {"alibi", !positions.alibi.empty()},
          {"window", positions.visibility.window ? nlohmann::json(*positions.visibility.window) : nlohmann::json()},
          {"causal_align", positions.visibility.lower_right ? "lower-right" : "upper-left"}}},
        {"params",
         {{"source", params.source},
          {"scheme", params.scheme},
          {"prefix", f.prefix},
          {"names", params.names},
          {"ignored", params.ignored}}},
        {"average_heads", f.average_heads},
        {"dtype", c.dtype},
        {"threads", c.threads ? nlohmann::json(c.threads) : nlohmann::json()}};
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

    // One load per distinct path: -q x.npy alone is self-attention on one tensor.
    const auto query = attntrace::load_tensor<T>(c.query);
    std::optional<attntrace::LoadedTensor<T>> key_file, value_file;
    if (key_path != c.query) key_file = attntrace::load_tensor<T>(key_path);
    const auto& key = key_file ? *key_file : query;
    if (value_path != key_path && value_path != c.query) value_file = attntrace::load_tensor<T>(value_path);
    const auto& value = value_file ? *value_file : (value_path == key_path ? key : query);

    attntrace::Masks<T> masks;
    run.load_attn_mask(masks);
    if (!f.key_padding_mask.empty()) {
        masks.key_padding_mask = attntrace::load_tensor<T>(f.key_padding_mask).array;
        masks.key_padding_mask_name = f.key_padding_mask;
    }
    if (valid_list) {
        masks.valid_lens = attntrace::Array<T>::from_shape({valid_list->size()});
        std::copy(valid_list->begin(), valid_list->end(), masks.valid_lens->begin());
        masks.valid_lens_name = f.valid_lens;  // "3,2"
    } else if (!f.valid_lens.empty()) {
        masks.valid_lens = attntrace::load_tensor<T>(f.valid_lens).array;
        masks.valid_lens_name = f.valid_lens;
    }

    const auto dim = [](const attntrace::Array<T>& a) { return a.dimension() ? a.shape().back() : 0; };
    const attntrace::MhaDims dims{heads, kv_heads, dim(query.array), dim(key.array), dim(value.array), !f.no_out_proj};
    if (dims.heads % dims.kv_heads != 0)
        throw attntrace::UsageError("--kv-heads: " + std::to_string(dims.heads) + " query heads cannot share " +
                                    std::to_string(dims.kv_heads) + " kv heads (" + std::to_string(dims.heads) +
                                    " % " + std::to_string(dims.kv_heads) + " != 0)");
    std::optional<attntrace::MhaParams<T>> own_params;  // the checkpoint's are used in place
    if (!model) own_params = resolve_params<T>(f, dims);
    const attntrace::MhaParams<T>& params = model ? model->weights.attn : *own_params;
    const auto positions = model ? attntrace::positions_for_layer(model->layer.config, model->weights, f.normed)
                                 : positions_from_flags<T>(c, heads, params.w_q.shape()[0] / heads);
    if (model) run.options.scale = model->layer.config.scale, masks.causal = model->layer.config.causal;
    if (query.array.dimension() >= 2 && key.array.dimension() >= 2) {
        const std::size_t batch = query.array.dimension() == 3 ? query.array.shape()[0] : 1;
        run.check_budget({batch, heads, query.array.shape()[query.array.dimension() - 2],
                          key.array.shape()[key.array.dimension() - 2]});
    }

    run.options.average_heads = f.average_heads;
    run.options.query_name = c.query, run.options.key_name = key_path, run.options.value_name = value_path;
    const attntrace::MhaConfig config{heads, dims.kv_heads, !f.no_out_proj};
    auto result = attntrace::mha(query.array, key.array, value.array, params, config, masks, run.options,
                                 &run.recorder, positions.any() ? &positions : nullptr);
    if (!f.save_params.empty())
        attntrace::write_file_atomically(f.save_params,
                                         attntrace::safetensors_bytes(attntrace::torch_state_dict(params)));

    auto context = mha_context(f, config, result, params, masks, positions, model ? model->layer.config.values : nlohmann::json());
    context.inputs = inputs_json(query, key, value);
    run.finish(result, context);
}

}  // namespace

void setup_mha(CLI::App& app) {
    auto f = std::make_shared<MhaFlags>();
    auto* cmd = app.add_subcommand("mha", "Multi-head attention with projections (torch.nn.MultiheadAttention)");
    cmd->add_option("-q,--query", f->common.query, "QUERY (B, Lq, Eq) or (Lq, Eq)")->required()->check(file_name());
    cmd->add_option("-k,--key", f->common.key, "KEY (B, Lk, Ek); default QUERY")->check(file_name());
    cmd->add_option("-v,--value", f->common.value, "VALUE (B, Lk, Ev); default KEY")->check(file_name());
    cmd->add_option("--heads", f->heads, "number of heads H (with --model: from config.json)")->check(positive_integer());
    cmd->add_option("--model", f->model, "a Hugging Face checkpoint folder: config.json + model.safetensors (or shards)")
        ->check(file_name());
    cmd->add_option("--layer", f->layer, "with --model: the layer N to run (0-based); -q is hidden_states[N]");
    cmd->add_flag("--normed", f->normed, "with --model: -q is already through the layer's pre-attention norm");
    cmd->add_option("--kv-heads", f->kv_heads, "grouped-query attention: G key/value heads (H % G == 0)")
        ->check(positive_integer());
    cmd->add_option("--params", f->params, "parameters: .safetensors, .json, or a directory of NAME.npy")
        ->check(file_name());
    cmd->add_option("--prefix", f->prefix, "use only parameter names starting with this prefix (stripped)");
    cmd->add_option("--seed", f->seed, "seed of the random init when there is no --params")->capture_default_str();
    cmd->add_flag("--bias,!--no-bias", f->bias, "random init: with biases (default) or without");
    cmd->add_option("--head-dim", f->head_dim, "random init: P (default E/H)")->check(positive_integer());
    cmd->add_option("--value-head-dim", f->value_head_dim, "random init: Pv (default P)")->check(positive_integer());
    cmd->add_option("--out-dim", f->out_dim, "random init: PO (default E)")->check(positive_integer());
    cmd->add_option("--save-params", f->save_params, "write the parameters used as .safetensors (PyTorch names)")
        ->check(file_name());
    cmd->add_flag("--no-out-proj", f->no_out_proj, "concatenate the heads with no output projection");
    cmd->add_option("--key-padding-mask", f->key_padding_mask, "(B, Lk) bool or 0/1: true ignores that key")
        ->check(file_name());
    cmd->add_option("--valid-lens", f->valid_lens, "d2l valid lengths: 3,2 or a (B,) / (B, Lq) file")
        ->check(file_name());
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
    cmd->callback([f] {
        if (f->common.dtype == "f64") {
            run_mha<double>(*f);
        } else {
            run_mha<float>(*f);
        }
    });
}
