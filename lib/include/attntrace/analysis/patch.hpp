#pragma once
// Activation patching between two prompts of one length: the corrupted prompt run with one
// activation taken from the clean run, and how much of the clean answer comes back,
//   (m_patched − m_corrupt) / (m_clean − m_corrupt)    1: restored, 0: no change,
// m the logit of the target minus that of `versus` at a position (or the target's logit alone).
// Swept over every site of a kind (TransformerLens patching.py):
//   head   a head's z at every position       (N, H)   get_act_patch_attn_head_out_all_pos
//   resid  resid_pre of layer n at position p (N, L)   get_act_patch_resid_pre
//   attn   attn_out of layer n at position p  (N, L)   get_act_patch_attn_out
//   mlp    mlp_out of layer n at position p   (N, L)   get_act_patch_mlp_out
// The clean and the corrupted prompt run side by side as one batch; at each layer's site the
// corrupted run forks once per head (or position), each fork takes the clean run's values there,
// and all run on together (sweep.hpp): nothing before a patch is computed twice.
//
// Legend: L length, N layers, H heads.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/analysis/ablate.hpp"
#include "attntrace/analysis/metric.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

enum class PatchSite : std::uint8_t { head, resid, attn, mlp };
// "head", "resid", "attn", "mlp"; and back (nullopt for another word).
const char* patch_site_name(PatchSite site);
std::optional<PatchSite> patch_site_named(const std::string& name);

struct PatchResult {
    Metric metric;            // logit_diff with a versus, else logit
    double clean = 0, corrupt = 0;
    PatchSite site = PatchSite::head;
    Array<double> values;     // (N, H) or (N, L), normalised
};

struct PatchOptions {
    PatchSite site = PatchSite::head;
    std::size_t threads = 0;
    std::uint64_t budget = 0;  // the bytes a forward pass may hold (0: no limit)
};

// The sweep of OPTIONS.site. InputError (exit 3): prompts of different lengths (naming both
// counts), m_clean equal to m_corrupt within 1e-6 of their magnitude (nothing to restore); the
// request's target is required (UsageError).
template <class T>
PatchResult patch(const Model& model, const std::vector<std::uint32_t>& clean, const std::vector<std::uint32_t>& corrupt,
                  const MetricRequest& request, const PatchOptions& options);

}  // namespace attntrace
