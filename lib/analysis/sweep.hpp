#pragma once
// A sweep of interventions in as few forward passes as memory allows: base sequences (the clean
// run; or clean and corrupted) run unedited, and for each swept layer n, `per_layer` forks of one
// base are made at a site of layer n, each edited there, and run on to the logits. A fork shares
// everything its base computed before the site, and the forks of every layer run together as one
// batch (their products as one GEMM), so the layers' weights are read once a pass. When a pass
// would hold more than the budget, the forks are split over passes, each resuming from the bases'
// residual stream kept at its first layer. Internal to lib/analysis.
//
// Legend: B0 base sequences, L length, V vocabulary, N layers.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "attntrace/model/forward.hpp"

namespace attntrace {

template <class T>
struct Sweep {
    std::vector<std::vector<std::uint32_t>> bases;  // (B0) sequences 0 .. B0-1 of every pass
    Site site = Site::z;                            // where the forks are made
    std::size_t fork_of = 0;                        // the base each fork copies
    std::size_t per_layer = 0;                      // forks per swept layer (heads, or positions)
    std::vector<std::size_t> layers;                // the swept layers, increasing
    // Writes fork K of layer N into sequence FORK of VALUES (the bases are sequences 0 .. B0-1).
    std::function<void(SiteValues<T>& values, std::size_t fork, std::size_t layer, std::size_t k)> edit;
    std::size_t position = 0;                       // the logits' position P
    std::size_t threads = 0;
    std::uint64_t budget = 0;                       // the bytes a pass may hold
    std::string what = "ids";                       // names the bases in messages
};

// Runs SWEEP: ON_FORK(index of the layer in sweep.layers, k, the fork's logits at P (V)) once per
// fork. Returns the bases' logits at P, (B0, V). InputError naming the budget when not even one
// fork fits.
template <class T>
Array<T> run_sweep(const Model& model, const Sweep<T>& sweep,
                   const std::function<void(std::size_t, std::size_t, const T*)>& on_fork);

// The largest batch of sequences of LENGTH whose forward, with the logits of one position each,
// fits BUDGET (0 when none does).
std::size_t sequences_within(const ModelConfig& config, std::size_t length, std::size_t threads, std::size_t element,
                             std::uint64_t budget);

}  // namespace attntrace
