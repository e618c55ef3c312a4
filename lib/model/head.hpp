#pragma once
// The end of a forward pass: the final norm and the head (forward.hpp), shared by the forward and
// by the unembedding the analyses call. Internal to lib/model.
//
// Legend: R rows, E hidden size, V vocabulary.
#include <cstddef>

#include "attntrace/model/forward.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// final_norm: the norm after the last block on X (ROWS, E), in place (none for BERT).
template <class T>
void final_norm_rows(const Model& model, T* x, std::size_t rows, std::size_t threads);

// head: logits (R, V) of X (R, E) after the final norm: X · Wᵀ (+ bias), W (V, E) the head's
// own or the token embeddings (the masked-LM head's transform first), read in blocks of
// vocabulary rows, never whole. To COLUMNS when given, in blocks of vocabulary columns (an empty
// array is then returned). CAPPED: Gemma 2/3's final_logit_softcapping applied (false: the
// logits before it).
template <class T>
Array<T> head(const Model& model, const Array<T>& x, std::size_t threads, const LogitsColumns<T>* columns = nullptr,
              bool capped = true);

}  // namespace attntrace
