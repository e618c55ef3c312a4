#pragma once
// Vectors that grow to megabytes for a 1 MB text (alignments, pieces, tokens) take the project's
// allocator (tensor/buffer.hpp): a block is populated by one system call, or from 2 MiB takes huge
// pages (a GPT-2 vocabulary's look-up table is one), and is reused once freed, instead of costing
// a page fault per 4 KiB as it is first written (a third of a run's time before).
#include <vector>

#include "attntrace/tensor/buffer.hpp"

namespace attntrace::text {

template <class T>
using Buffer = std::vector<T, BufferAllocator<T>>;

}  // namespace attntrace::text
