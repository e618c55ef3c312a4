#pragma once
// Tensors printed byte for byte the way PyTorch 1.13's str(tensor) prints them, so a notebook user
// recognises them: "tensor([3.7266e-06, 9.9999e-01, 3.7266e-06, 3.7266e-06])".
//
// The algorithm is torch/_tensor_str.py's, step by step:
//   - one format for the whole tensor, chosen from its nonzero finite values (only the edge items
//     when the tensor is summarised): "1." when they are all integers, scientific ("%.4e") when
//     max/min > 1000, max > 1e8 or (for non-integers) min < 1e-4, fixed ("%.4f") otherwise;
//     every element is right-aligned to the widest of those values (nan/inf are not measured);
//   - nested brackets, each level indented one more than its parent, sub-tensors separated by
//     one blank line per remaining dim beyond the first;
//   - more than `threshold` elements: each dim longer than 2*edgeitems keeps its first and last
//     `edgeitems` entries around "...";
//   - 1-d rows wrap after floor((linewidth - indent) / (width + 2)) elements;
//   - float64 gets ", dtype=torch.float64" (on a new line when it would pass `linewidth`), an empty
//     tensor prints "[]" with ", size=(0, 3)" unless it is 1-d.
// Values are formatted as Python does: a float32 is widened to double first, and rounding is
// the exact decimal expansion with ties to even (glibc printf and Python agree on it).
#include <cstddef>
#include <optional>
#include <string>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// torch.set_printoptions; the defaults are torch's.
struct TorchPrintOptions {
    int precision = 4;              // digits after the point (0..100)
    std::size_t threshold = 1000;   // summarise when there are more elements than this
    std::size_t edgeitems = 3;      // entries kept at each end of a summarised dim (>= 1)
    std::size_t linewidth = 80;     // where 1-d rows and the dtype suffix wrap
    std::optional<bool> sci_mode;   // nullopt: chosen from the values
};

// str(torch.from_numpy(VALUES)) for a float32 (T = float) or float64 (T = double) tensor of any
// rank, 0-d included. Throws UsageError for a precision outside 0..100 or edgeitems 0.
template <class T>
std::string torch_str(const Array<T>& values, const TorchPrintOptions& options = {});

}  // namespace attntrace
