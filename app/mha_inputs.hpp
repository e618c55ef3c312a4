#pragma once
// What mha (and check) run on, from mha's flags: the tensors, the masks, the dims and the parameters.
#include <cstddef>
#include <memory>
#include <optional>

#include "attention_flags.hpp"
#include "attention_run.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/tensor/buffer.hpp"


// What mha runs on, from the flags: one load per distinct path (-q x.npy alone is self-attention on
// one tensor), the masks, the dims checked, and the parameters (loaded, or the seeded init).
template <class T>
struct MhaInputs {
    attntrace::LoadedTensor<T> query;                      // (B, Lq, Eq) or (Lq, Eq)
    std::optional<attntrace::LoadedTensor<T>> key_file;    // (B, Lk, Ek) when -k names another file
    std::optional<attntrace::LoadedTensor<T>> value_file;  // (B, Lk, Ev) when -v names a third file
    bool value_is_key = true;                              // -v is -k's file (or both default)
    attntrace::Masks<T> masks;
    attntrace::MhaDims dims;
    attntrace::MhaParams<T> params;
    std::unique_ptr<attntrace::PagesAhead> pages_ahead;   // made while the inputs were read (or null)

    const attntrace::LoadedTensor<T>& key() const { return key_file ? *key_file : query; }
    const attntrace::LoadedTensor<T>& value() const {
        return value_file ? *value_file : (value_is_key ? key() : query);
    }
};

// RUN supplies the attention mask (--attn-mask, --causal). HEADS and KV_HEADS are the checkpoint's
// with --model (0: the flags'); OWN_PARAMS false leaves `params` empty (the caller has a checkpoint's).
template <class T>
MhaInputs<T> load_mha_inputs(const MhaFlags& flags, const AttentionRun<T>& run, std::size_t heads = 0,
                             std::size_t kv_heads = 0, bool own_params = true);
