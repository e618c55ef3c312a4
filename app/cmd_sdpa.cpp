// attntrace sdpa -q Q -k K -v V: scaled dot-product attention with no projections.
#include <memory>

#include "attention_cli.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/numbers.hpp"
#include "attntrace/tensor_io.hpp"
#include "commands.hpp"

namespace {

template <class T>
void run_sdpa(const AttentionFlags& f) {
    const std::vector<std::string> inputs{f.query, f.key, f.value, f.attn_mask};
    check_outputs({f.output, f.attn_weights}, inputs);
    attntrace::set_blas_threads(f.threads);
    const auto q = attntrace::load_tensor<T>(f.query);
    const auto k = attntrace::load_tensor<T>(f.key);
    const auto v = attntrace::load_tensor<T>(f.value);
    attntrace::Masks<T> masks;
    load_attn_mask(f, masks);
    attntrace::AttentionOptions options;
    options.scale = f.scale;
    options.need_weights = !f.attn_weights.empty();
    options.threads = f.threads;
    options.query_name = f.query, options.key_name = f.key, options.value_name = f.value;
    auto recorder = make_recorder<T>(f);
    auto result = attntrace::sdpa(q.array, k.array, v.array, masks, options, &recorder);
    const std::string header = "sdpa: scale " + attntrace::format_number(result.scale) + ", " +
                               std::to_string(result.empty_rows) + " empty rows";
    finish_attention(f, inputs, result, recorder, header);
}

}  // namespace

void setup_sdpa(CLI::App& app) {
    auto f = std::make_shared<AttentionFlags>();
    auto* cmd = app.add_subcommand("sdpa", "Scaled dot-product attention on Q, K, V (no projections)");
    cmd->add_option("-q,--query", f->query, "Q (..., Lq, E)")->required();
    cmd->add_option("-k,--key", f->key, "K (..., Lk, E)")->required();
    cmd->add_option("-v,--value", f->value, "V (..., Lk, Ev)")->required();
    add_attention_flags(*cmd, *f);
    cmd->footer(R"(softmax(Q Kᵀ · scale + mask) V, as torch.nn.functional.scaled_dot_product_attention.
Q, K and V may have any number of equal leading dims; the output is (..., Lq, Ev).

Examples:
  attntrace sdpa -q data/atcold/q1.npy -k data/atcold/k.npy -v data/atcold/v.npy --scale 0.125 --trace values
  attntrace sdpa -q q.npy -k k.npy -v v.npy --causal -o out.npy --attn-weights w.json)");
    cmd->callback([f] {
        if (f->dtype == "f64") {
            run_sdpa<double>(*f);
        } else {
            run_sdpa<float>(*f);
        }
    });
}
