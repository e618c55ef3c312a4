#pragma once
// Direct logit attribution: how much each component of the residual stream writes straight into a
// logit (or a logit difference) at one position, through the final norm with its scale frozen at
// the final residual's value (TransformerLens: cache.stack_head_results / decompose_resid, then
// apply_ln_to_stack, dotted with the unembedding direction). With d = W_U[target] − W_U[versus]
// (E) and w the final norm's weight, a component c (E) at position P contributes
//   LayerNorm:  (c − mean(c)) / σ · (w ∘ d),   σ = sqrt(var(x) + eps) of the final residual x
//   RMSNorm:    c / rms · (w ∘ d),             rms = sqrt(mean(x²) + eps)
// The components are the embeddings (resid_pre 0), each head's head_out, each layer's attention
// output bias and each mlp_out; the final norm's bias and the head's bias give one constant.
// Since they add up to x, the contributions plus the constant are the logit (difference) the
// model computes (before Gemma's final_logit_softcapping). Gemma 2/3 and OLMo 2 put a norm on the
// attention's output before the residual: their heads do not add up to it, so each layer's
// attn_out is one component ("attn") in place of its heads and bias. Post-norm families (BERT, RoBERTa, BLOOM with
// apply_residual_connection_post_layernorm) have no such decomposition.
//
// Legend: E hidden size, N layers, H heads.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "attntrace/analysis/ablate.hpp"
#include "attntrace/analysis/metric.hpp"
#include "attntrace/model/model.hpp"

namespace attntrace {

enum class ComponentKind : std::uint8_t { embed, head, attn_bias, attn, mlp, constant };
// "embed", "head", "attn_bias", "attn", "mlp", "constant"
const char* component_kind_name(ComponentKind kind);

struct Component {
    ComponentKind kind = ComponentKind::embed;
    std::optional<std::size_t> layer, head;
    double value = 0;
};

struct Attribution {
    Metric metric;                     // logit_diff with a versus, else logit
    double value = 0;                  // the model's logit (difference) at the position
    std::vector<Component> components; // embed, then per layer: its heads and bias (or attn), its MLP; the constant last
    double sum = 0;                    // of every component
};

// Why MODEL has no direct logit attribution ("" when it has one).
std::string attribution_refused(const ModelConfig& config);

// The attribution of REQUEST (its target required) on IDS. UsageError when attribution_refused.
template <class T>
Attribution attribute(const Model& model, const std::vector<std::uint32_t>& ids, const MetricRequest& request,
                      std::size_t threads);

}  // namespace attntrace
