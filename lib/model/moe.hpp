#pragma once
// A sparse mixture-of-experts MLP (model.hpp MoeConfig), as transformers runs it
// (models/mixtral/modular_mixtral.py MixtralSparseMoeBlock.forward, models/qwen2_moe/
// modular_qwen2_moe.py Qwen2MoeTopKRouter + Qwen2MoeSparseMoeBlock, models/olmoe/modular_olmoe.py
// OlmoeSparseMoeBlock.route_tokens_to_experts): the router's softmax over the X experts per row,
// the top K (most weight first; equal weights: the lower expert id first), renormalised to sum 1
// where the config says, then each expert that some row chose run on its rows only, its output
// times the row's weight added in expert order (index_add_ over the experts hit, in order); Qwen2-
// MoE's shared expert times sigmoid(shared_expert_gate x) added after. An expert no row chose is
// never read: its weights are read (in place when the file holds the compute type, else converted
// into a buffer reused from expert to expert) when its turn comes, and their pages dropped after.
// Internal to lib/model.
//
// Legend: R rows (B*L), E hidden size, X experts, K chosen per row, I_x an expert's MLP size,
// I_s the shared expert's.
#include <cstddef>

#include "attntrace/model/forward.hpp"
#include "model_tensors.hpp"

namespace attntrace {

// OUT (R, E) := the MoE MLP of layer N on IN (R, E) + BETA · OUT, with W's router and shared
// expert and the experts of T. The routing goes to OBSERVER (expert_routing) before the experts run.
template <class T>
void moe_mlp(const ModelConfig& m, const BlockWeights<T>& w, const ModelTensors& t, std::size_t layer, const T* in,
             std::size_t rows, T* out, T beta, std::size_t threads, ModelObserver<T>& observer);

// The routing of ROWS rows from their router logits (R, X): softmax (in double), the top K,
// renormalised when NORMALIZE.
LayerRouting route(const double* logits, std::size_t rows, std::size_t experts, std::size_t k, bool normalize);

}  // namespace attntrace
