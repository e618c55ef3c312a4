// attntrace mha -q QUERY [-k KEY] [-v VALUE] --heads H: multi-head attention with projections,
// with torch.nn.MultiheadAttention(batch_first=True) semantics.
#include <memory>

#include "attention_cli.hpp"
#include "attntrace/errors.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/numbers.hpp"
#include "attntrace/params.hpp"
#include "attntrace/safetensors.hpp"
#include "attntrace/stage_report.hpp"
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
};

// The library's parameter names and the flags that set them.
const FlagNames kMhaFlags = {{"heads", "--heads"},           {"kv heads", "--kv-heads"},
                                 {"head dim", "--head-dim"},     {"value head dim", "--value-head-dim"},
                                 {"out dim", "--out-dim"}};

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

// The paths mha reads: KEY defaults to QUERY, VALUE to KEY; --valid-lens is a list or a file.
struct MhaPaths {
    std::string query, key, value;
    std::optional<std::vector<std::uint64_t>> valid_list;  // --valid-lens 3,2
    std::vector<std::string> inputs;                       // every file read, for the output checks

    explicit MhaPaths(const MhaFlags& f)
        : query(f.common.query),
          key(f.common.key.empty() ? query : f.common.key),
          value(f.common.value.empty() ? key : f.common.value),
          valid_list(f.valid_lens.empty() ? std::nullopt : parse_uint_list(f.valid_lens)),
          inputs{query, key, value, f.common.attn_mask, f.params, f.key_padding_mask} {
        if (!f.valid_lens.empty() && !valid_list) inputs.push_back(f.valid_lens);
    }
};

// query, key and value, one load per distinct path: -q x.npy alone is self-attention on one tensor.
template <class T>
struct MhaInputs {
    attntrace::LoadedTensor<T> query;
    std::optional<attntrace::LoadedTensor<T>> key_file, value_file;
    bool value_is_key = false;

    explicit MhaInputs(const MhaPaths& p) : query(attntrace::load_tensor<T>(p.query)), value_is_key(p.value == p.key) {
        if (p.key != p.query) key_file = attntrace::load_tensor<T>(p.key);
        if (p.value != p.key && p.value != p.query) value_file = attntrace::load_tensor<T>(p.value);
    }
    const attntrace::LoadedTensor<T>& key() const { return key_file ? *key_file : query; }
    const attntrace::LoadedTensor<T>& value() const { return value_file ? *value_file : value_is_key ? key() : query; }
};

// The attention mask, the key padding mask and the valid lengths from the flags.
template <class T>
attntrace::Masks<T> load_masks(const MhaFlags& f, const MhaPaths& paths, const AttentionRun<T>& run) {
    attntrace::Masks<T> masks;
    run.load_attn_mask(masks);
    if (!f.key_padding_mask.empty()) {
        masks.key_padding_mask = attntrace::load_tensor<T>(f.key_padding_mask).array;
        masks.key_padding_mask_name = f.key_padding_mask;
    }
    if (paths.valid_list) {
        masks.valid_lens = attntrace::Array<T>::from_shape({paths.valid_list->size()});
        std::copy(paths.valid_list->begin(), paths.valid_list->end(), masks.valid_lens->begin());
    } else if (!f.valid_lens.empty()) {
        masks.valid_lens = attntrace::load_tensor<T>(f.valid_lens).array;
    }
    masks.valid_lens_name = f.valid_lens;  // "3,2" or the file
    return masks;
}

// The JSON trace's options: the shared ones, then mha's own.
template <class T>
nlohmann::json mha_trace_options(const MhaFlags& f, const attntrace::MhaParams<T>& params,
                                 const attntrace::Masks<T>& masks, const attntrace::AttentionResult<T>& result) {
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    nlohmann::json options = shared_trace_options(f.common, masks, result);
    options["masks"]["key_padding_mask"] = or_null(f.key_padding_mask);
    options["masks"]["valid_lens"] = or_null(f.valid_lens);
    options.update({{"heads", f.heads},
                    {"kv_heads", f.kv_heads ? f.kv_heads : f.heads},
                    {"head_dim", result.sizes.head_dim},
                    {"value_head_dim", result.sizes.value_head_dim},
                    {"out_dim", result.sizes.out_dim},
                    {"out_proj", !f.no_out_proj},
                    {"params",
                     {{"source", params.source},
                      {"scheme", params.scheme},
                      {"prefix", f.prefix},
                      {"names", params.names},
                      {"ignored", params.ignored}}},
                    {"average_heads", f.average_heads}});
    return options;
}

template <class T>
void run_mha(const MhaFlags& f) {
    AttentionRun<T> run(f.common, attntrace::mha_stage_names());
    const MhaPaths paths(f);
    run.check_outputs(paths.inputs, {f.save_params});
    const MhaInputs<T> in(paths);
    const attntrace::Masks<T> masks = load_masks(f, paths, run);

    const auto dim = [](const attntrace::Array<T>& a) { return a.dimension() ? a.shape().back() : 0; };
    const attntrace::MhaDims dims{f.heads, f.kv_heads ? f.kv_heads : f.heads, dim(in.query.array),
                                  dim(in.key().array), dim(in.value().array), !f.no_out_proj};
    naming_flags(kMhaFlags, [&] { attntrace::check_head_counts(dims); });
    const auto params = naming_flags(kMhaFlags, [&] { return resolve_params<T>(f, dims); });
    const auto& q = in.query.array;
    if (q.dimension() >= 2 && in.key().array.dimension() >= 2)
        run.check_budget({q.dimension() == 3 ? q.shape()[0] : 1, f.heads, q.shape()[q.dimension() - 2],
                          in.key().array.shape()[in.key().array.dimension() - 2]});

    run.options.average_heads = f.average_heads;
    run.options.query_name = paths.query, run.options.key_name = paths.key, run.options.value_name = paths.value;
    const attntrace::MhaConfig config{f.heads, dims.kv_heads, !f.no_out_proj};
    auto result = naming_flags(kMhaFlags, [&] {
        return attntrace::mha(q, in.key().array, in.value().array, params, config, masks, run.options, &run.recorder);
    });
    if (!f.save_params.empty())
        attntrace::write_file_atomically(f.save_params, attntrace::safetensors_bytes(attntrace::torch_state_dict(params)));

    attntrace::TraceContext context{attntrace::mha_header(result, params, config), "mha",
                                    mha_trace_options(f, params, masks, result),
                                    inputs_json(in.query, in.key(), in.value()), {}};
    run.finish(result, context);
}

}  // namespace

void setup_mha(CLI::App& app) {
    auto f = std::make_shared<MhaFlags>();
    auto* cmd = app.add_subcommand("mha", "Multi-head attention with projections (torch.nn.MultiheadAttention)");
    cmd->add_option("-q,--query", f->common.query, "QUERY (B, Lq, Eq) or (Lq, Eq)")->required();
    cmd->add_option("-k,--key", f->common.key, "KEY (B, Lk, Ek); default QUERY");
    cmd->add_option("-v,--value", f->common.value, "VALUE (B, Lk, Ev); default KEY");
    cmd->add_option("--heads", f->heads, "number of heads H")->required()->check(positive_integer());
    cmd->add_option("--kv-heads", f->kv_heads, "grouped-query attention: G key/value heads (H % G == 0)")
        ->check(positive_integer());
    cmd->add_option("--params", f->params, "parameters: .safetensors, .json, or a directory of NAME.npy");
    cmd->add_option("--prefix", f->prefix, "use only parameter names starting with this prefix (stripped)");
    cmd->add_option("--seed", f->seed, "seed of the random init when there is no --params")->capture_default_str();
    cmd->add_flag("--bias,!--no-bias", f->bias, "random init: with biases (default) or without");
    cmd->add_option("--head-dim", f->head_dim, "random init: P (default E/H)")->check(positive_integer());
    cmd->add_option("--value-head-dim", f->value_head_dim, "random init: Pv (default P)")->check(positive_integer());
    cmd->add_option("--out-dim", f->out_dim, "random init: PO (default E)")->check(positive_integer());
    cmd->add_option("--save-params", f->save_params, "write the parameters used as .safetensors (PyTorch names)");
    cmd->add_flag("--no-out-proj", f->no_out_proj, "concatenate the heads with no output projection");
    cmd->add_option("--key-padding-mask", f->key_padding_mask, "(B, Lk) bool or 0/1: true ignores that key");
    cmd->add_option("--valid-lens", f->valid_lens, "d2l valid lengths: 3,2 or a (B,) / (B, Lq) file");
    cmd->add_flag("--average-heads", f->average_heads, "--attn-weights averaged over heads (B, Lq, Lk)");
    add_attention_flags(*cmd, f->common);
    cmd->footer(R"(Parameter names are tried in this order: PyTorch's nn.MultiheadAttention state_dict
(in_proj_weight or q/k/v_proj_weight, out_proj.*), d2l/atcold (W_q.weight ... W_o.weight),
Bloem (toqueries.weight ... unifyheads.*). Without --params the init is seeded and documented.

Examples:
  attntrace mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors
  attntrace mha -q x.npy --heads 8 --seed 1 --causal -o out.npy --attn-weights w.npy
  attntrace mha -q q.npy -k kv.npy --heads 5 --params d2l.safetensors --valid-lens 3,2)");
    cmd->callback([f] { with_precision(f->common.dtype, [&]<class T>() { run_mha<T>(*f); }); });
}
