#include "mha_inputs.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <type_traits>

#include "attntrace/tensor/timeline.hpp"
#include "attntrace/attention/params_files.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/weight_gemm.hpp"
#include "attntrace/attention/attention.hpp"
#include "attntrace/tensor/threads.hpp"
#include "flag_parsing.hpp"

namespace {

template <class T>
using ParamTensors = std::map<std::string, attntrace::Array<T>>;  // --params, name -> tensor

template <class T>
attntrace::MhaParams<T> resolve_params(const MhaFlags& f, const attntrace::MhaDims& dims,
                                       attntrace::Alongside<ParamTensors<T>>* read) {
    if (!f.params.empty() && f.add_bias_kv)
        throw attntrace::UsageError("--add-bias-kv: only for the random init; with --params, bias_k and bias_v come "
                                    "from the file");
    if (!f.params.empty() && read) return attntrace::load_mha_params<T>(read->get(), f.params, f.prefix, dims);
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
    attntrace::MhaParams<T> params = attntrace::random_mha_params<T>(dims, sizes, f.bias, parse_seed(f.seed));
    if (f.add_bias_kv) attntrace::add_random_bias_kv(params, parse_seed(f.seed));
    return params;
}

// --key-padding-mask and --valid-lens ("3,2" or a file).
template <class T>
void load_mha_masks(const MhaFlags& f, attntrace::Masks<T>& masks) {
    if (!f.key_padding_mask.empty()) {
        masks.key_padding_mask = attntrace::load_tensor<T>(f.key_padding_mask).array;
        masks.key_padding_mask_name = f.key_padding_mask;
    }
    const auto valid_list = f.valid_lens.empty() ? std::nullopt : parse_uint_list(f.valid_lens);
    if (valid_list) {
        masks.valid_lens = attntrace::Array<T>::from_shape({valid_list->size()});
        std::copy(valid_list->begin(), valid_list->end(), masks.valid_lens->begin());
        masks.valid_lens_name = f.valid_lens;  // "3,2"
    } else if (!f.valid_lens.empty()) {
        masks.valid_lens = attntrace::load_tensor<T>(f.valid_lens).array;
        masks.valid_lens_name = f.valid_lens;
    }
}

// Whether mha's products will likely call OpenBLAS: not when the float32 projections run on a kernel
// of ours at every row count (weight_gemm_every_row: AMX, or AVX-512 on AMD) and the attention on
// the fused one (a mask or a trace that sends the attention to the BLAS path loads OpenBLAS at its
// first product). Loading it beside the query's read costs 9-15 ms of the other core (11 ms on the
// AMD EPYC VM), and its mappings contend with the read's page faults.
template <class T>
bool products_need_blas() {
    if constexpr (std::is_same_v<T, float>)
        return !attntrace::weight_gemm_every_row() || attntrace::attention_kernel() == attntrace::AttentionKernel::blas;
    return true;
}

// The memory a run on these files will likely ask the pool for, for PagesAhead: the inputs read, and
// about three times as much again for the projections, the heads' contexts and the output; twice
// the parameter file (read, then its split or stacked copies). At most 256 MiB: past that the
// helper's lead matters less than the memory it would hold.
template <class T>
std::size_t pages_wanted(const MhaFlags& f, const std::string& key_path, const std::string& value_path) {
    const auto bytes = [](const std::string& path) {
        std::error_code no_size;
        if (!std::filesystem::is_regular_file(path, no_size)) return std::uintmax_t{0};
        const std::uintmax_t n = std::filesystem::file_size(path, no_size);
        return no_size ? std::uintmax_t{0} : n;
    };
    std::uintmax_t inputs = bytes(f.common.query);
    if (key_path != f.common.query) inputs += bytes(key_path);
    if (value_path != key_path && value_path != f.common.query) inputs += bytes(value_path);
    const std::uintmax_t wanted = (4 * inputs + 2 * bytes(f.params)) * (sizeof(T) / sizeof(float));
    return static_cast<std::size_t>(std::min<std::uintmax_t>(wanted, std::uintmax_t{256} << 20));
}

}  // namespace

template <class T>
MhaInputs<T> load_mha_inputs(const MhaFlags& f, const AttentionRun<T>& run, std::size_t heads,
                             std::size_t kv_heads, bool own_params) {
    const auto& c = f.common;
    const std::string key_path = c.key.empty() ? c.query : c.key;
    const std::string value_path = c.value.empty() ? key_path : c.value;
    attntrace::timeline_mark("inputs: read");
    // Beside the query's read (it uses the read workers), with more than one thread: the parameter
    // file's, and with a query of 1 MiB or more OpenBLAS's load, which the projections would
    // otherwise wait for (the run's serial start, docs/performance.md). Errors still come in the
    // order of the reads below.
    const bool beside = attntrace::thread_count(c.threads) > 1;
    std::error_code no_size;
    const bool large = c.query != "-" && std::filesystem::file_size(c.query, no_size) >= (std::size_t{1} << 20);
    // Threads are started before OpenBLAS's load, which holds the dynamic loader's lock that
    // starting a thread waits for: the read's workers first, then the parameters' thread.
    if (beside && large) attntrace::run_workers(attntrace::thread_count(c.threads), [](std::size_t) {});
    // and the pages of the blocks the run will ask for, made by a helper while the inputs are read
    // (the L = 4096 run: 209 -> 188 ms on the AMD EPYC VM, docs/performance.md)
    std::unique_ptr<attntrace::PagesAhead> pages_ahead;
    if (beside && large)
        pages_ahead = std::make_unique<attntrace::PagesAhead>(pages_wanted<T>(f, key_path, value_path));
    std::optional<attntrace::Alongside<ParamTensors<T>>> param_tensors;
    const auto params_kind = std::filesystem::status(f.params, no_size).type();  // not stdin, not a FIFO
    if (beside && own_params && (params_kind == std::filesystem::file_type::regular ||
                       params_kind == std::filesystem::file_type::directory))
        param_tensors.emplace([path = f.params] { return attntrace::read_param_tensors<T>(path); });
    std::optional<attntrace::Alongside<void>> blas;
    if (beside && large && products_need_blas<T>()) blas.emplace([] { attntrace::load_blas_now(); });
    MhaInputs<T> in{attntrace::load_tensor<T>(c.query), {}, {}, value_path == key_path, {}, {}, {},
                    std::move(pages_ahead)};
    attntrace::timeline_mark("inputs: query read");
    if (key_path != c.query) in.key_file = attntrace::load_tensor<T>(key_path);
    if (value_path != key_path && value_path != c.query) in.value_file = attntrace::load_tensor<T>(value_path);
    run.load_attn_mask(in.masks);
    load_mha_masks(f, in.masks);

    const auto dim = [](const attntrace::Array<T>& a) { return a.dimension() ? a.shape().back() : 0; };
    if (heads == 0) heads = f.heads, kv_heads = f.kv_heads ? f.kv_heads : f.heads;
    in.dims = {heads, kv_heads, dim(in.query.array), dim(in.key().array),
               dim(in.value().array), !f.no_out_proj};
    if (in.dims.heads % in.dims.kv_heads != 0)
        throw attntrace::UsageError("--kv-heads: " + std::to_string(in.dims.heads) + " query heads cannot share " +
                                    std::to_string(in.dims.kv_heads) + " kv heads (" + std::to_string(in.dims.heads) +
                                    " % " + std::to_string(in.dims.kv_heads) + " != 0)");
    if (own_params) in.params = resolve_params<T>(f, in.dims, param_tensors ? &*param_tensors : nullptr);
    attntrace::timeline_mark("inputs: parameters read");
    return in;
}

template MhaInputs<float> load_mha_inputs(const MhaFlags&, const AttentionRun<float>&, std::size_t, std::size_t,
                                          bool);
template MhaInputs<double> load_mha_inputs(const MhaFlags&, const AttentionRun<double>&, std::size_t, std::size_t,
                                           bool);
