// attntrace sdpa -q Q -k K -v V: scaled dot-product attention with no projections.
#include <memory>

#include "attention_run.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/attention/stage_report.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

template <class T>
void run_sdpa(const AttentionFlags& f) {
    AttentionRun<T> run(f, attntrace::sdpa_stage_names());
    run.check_outputs({f.query, f.key, f.value, f.attn_mask}, {});
    const auto q = attntrace::load_tensor<T>(f.query);
    const auto k = attntrace::load_tensor<T>(f.key);
    const auto v = attntrace::load_tensor<T>(f.value);
    attntrace::Masks<T> masks;
    run.load_attn_mask(masks);
    if (q.array.dimension() >= 2 && k.array.dimension() >= 2) {
        attntrace::Shape plane = shape_of(q.array);
        plane.back() = k.array.shape()[k.array.dimension() - 2];
        run.stream_weights(plane);
        run.check_budget(plane);
        std::size_t planes = 1;
        for (std::size_t d = 0; d + 2 < plane.size(); ++d) planes *= plane[d];
        run.enable_progress(planes, plane[plane.size() - 2], plane.back(), q.array.shape().back());
    }
    run.options.query_name = f.query, run.options.key_name = f.key, run.options.value_name = f.value;
    const std::size_t rank = q.array.dimension();
    const auto positions = positions_from_flags<T>(f, rank >= 3 ? q.array.shape()[rank - 3] : 1,
                                                   rank ? q.array.shape()[rank - 1] : 0);
    auto result = naming_flags(kPositionFlagNames, [&] {
        return attntrace::sdpa(q.array, k.array, v.array, masks, run.options, &run.recorder,
                               positions.any() ? &positions : nullptr);
    });

    const attntrace::TraceContext context{attntrace::sdpa_header(result), "sdpa", shared_trace_options(f, masks, result),
                                          inputs_json(q, k, v), {}};
    run.finish(result, context);
}

}  // namespace

void setup_sdpa(CLI::App& app) {
    auto run = [](const AttentionFlags& f) { with_precision(f.dtype, [&]<class T>() { run_sdpa<T>(f); }); };
    auto [f, cmd] = add_command<AttentionFlags>(app, "sdpa", "Scaled dot-product attention on Q, K, V (no projections)", run);
    required_file(*cmd, "-q,--query", f->query, "Q (..., Lq, E)");
    required_file(*cmd, "-k,--key", f->key, "K (..., Lk, E)");
    required_file(*cmd, "-v,--value", f->value, "V (..., Lk, Ev)");
    add_attention_flags(*cmd, *f);
    cmd->footer(R"(softmax(Q Kᵀ · scale + mask) V, as torch.nn.functional.scaled_dot_product_attention.
Q, K and V may have any number of equal leading dims; the output is (..., Lq, Ev).

Examples:
  attntrace sdpa -q data/atcold/q1.npy -k data/atcold/k.npy -v data/atcold/v.npy --scale 0.125 --trace values
  attntrace sdpa -q q.npy -k k.npy -v v.npy --causal -o out.npy --attn-weights w.json
  attntrace sdpa -q q.npy -k k.npy -v v.npy --rotary half --window 4 --causal-align lower-right)");
}
