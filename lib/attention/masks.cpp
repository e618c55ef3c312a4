// Mask planning (see masks.hpp): every mask's shape is checked here, once, and turned into
// strides over the scores.
#include "attntrace/attention/masks.hpp"

#include <algorithm>
#include <cmath>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {
namespace {

// "a & b & c" of the non-empty parts.
void add_description(std::string& d, const std::string& part) {
    if (!part.empty()) d += (d.empty() ? "" : " & ") + part;
}

// Checks that a mask of shape MS broadcasts to TARGET (lead..., Lq, Lk) and fills the plan's
// strides; the mask's data is DATA, laid out as MS.
template <class T>
void plan_attn_mask(MaskPlan<T>& plan, const T* data, const Shape& ms, const std::string& name, const Shape& target,
                    const std::string& target_desc) {
    auto refuse = [&] {
        return ShapeError(name + ": attention mask of shape " + shape_string(ms) + " does not broadcast to " +
                          target_desc + " " + shape_string(target));
    };
    if (ms.size() > target.size() || ms.size() < 2) throw refuse();
    const std::size_t pad = target.size() - ms.size();
    std::vector<std::size_t> strides(target.size(), 0);
    std::size_t stride = 1;
    for (std::size_t d = target.size(); d-- > 0;) {
        const std::size_t dim = d >= pad ? ms[d - pad] : 1;
        if (dim != target[d] && dim != 1) throw refuse();
        strides[d] = dim == 1 ? 0 : stride;
        stride *= dim;
    }
    plan.attn = data;
    plan.attn_lead_strides.assign(strides.begin(), strides.end() - 2);
    plan.attn_stride_i = strides[target.size() - 2];
    plan.attn_stride_j = strides[target.size() - 1];
}

template <class T>
void check_whole_numbers(const Array<T>& a, const std::string& name, T max) {
    for (T x : a)
        if (!(x >= 0) || x != std::floor(x) || x > max)
            throw InputError(name + ": valid lengths must be whole numbers from 0 to " +
                             std::to_string(static_cast<std::size_t>(max)) + ", found " + std::to_string(x));
}

// The attention mask of mha: PyTorch's 3-D (B*H, Lq, Lk) mask is our (B, H, Lq, Lk), same layout.
template <class T>
void plan_mha_attn_mask(MaskPlan<T>& plan, const Masks<T>& masks, std::size_t b, std::size_t h, std::size_t lq,
                        std::size_t lk, bool batched) {
    const Array<T>& m = *masks.attn_mask;
    const Shape ms(m.shape().begin(), m.shape().end());
    const Shape plane{b, h, lq, lk};
    if (ms.size() == 3 && ms[0] == b * h && ms[0] != h && ms[0] != 1) {
        plan_attn_mask(plan, m.data(), plane, masks.attn_mask_name, plane, "(B, H, Lq, Lk)");
    } else {
        const Shape target = batched ? plane : Shape{h, lq, lk};
        plan_attn_mask(plan, m.data(), ms, masks.attn_mask_name, target, batched ? "(B, H, Lq, Lk)" : "(H, Lq, Lk)");
        if (!batched) plan.attn_lead_strides.insert(plan.attn_lead_strides.begin(), 0);
    }
    plan.attn_is_bool = masks.attn_mask_is_bool;
    if (!masks.attn_mask_name.empty())  // empty: only the causal mask folded in (with_causal_mask)
        add_description(plan.description, (masks.attn_mask_is_bool ? "bool mask " : "float mask ") + masks.attn_mask_name);
}

template <class T>
void plan_key_padding(MaskPlan<T>& plan, const Masks<T>& masks, std::size_t b, std::size_t lk, bool batched) {
    const Array<T>& m = *masks.key_padding_mask;
    const Shape ms(m.shape().begin(), m.shape().end());
    const Shape want = batched ? Shape{b, lk} : Shape{lk};
    if (ms != want)
        throw ShapeError(masks.key_padding_mask_name + ": key padding mask of shape " + shape_string(ms) +
                         " but expected " + shape_string(want) + (batched ? " (B, Lk)" : " (Lk)"));
    plan.key_padding = m.data();
    add_description(plan.description, "key padding " + masks.key_padding_mask_name);
}

template <class T>
void plan_valid_lens(MaskPlan<T>& plan, const Masks<T>& masks, std::size_t b, std::size_t lq, std::size_t lk) {
    const Array<T>& m = *masks.valid_lens;
    const Shape ms(m.shape().begin(), m.shape().end());
    if (ms != Shape{b} && ms != Shape{b, lq})
        throw ShapeError(masks.valid_lens_name + ": valid lengths of shape " + shape_string(ms) + " but expected " +
                         shape_string(Shape{b}) + " (B,) or " + shape_string(Shape{b, lq}) + " (B, Lq)");
    plan.valid_lens_per_query = ms.size() == 2;
    check_whole_numbers(m, masks.valid_lens_name, T(lk));
    plan.valid_lens = m.data();
    add_description(plan.description, "valid lens " + masks.valid_lens_name);
}

// A (..., N) -> (..., N + EXTRA) with zeros in the new columns.
template <class T>
Array<T> pad_last_axis(const Array<T>& a, std::size_t extra) {
    Shape shape = shape_of(a);
    if (shape.empty()) return a;  // a scalar: refused later by the mask's own shape check
    const std::size_t n = shape.back(), rows = n == 0 ? 0 : a.size() / n;
    shape.back() += extra;
    Array<T> out = Array<T>::from_shape(shape);
    out.fill(T(0));
    for (std::size_t r = 0; r < rows; ++r)
        std::copy(a.data() + r * n, a.data() + (r + 1) * n, out.data() + r * shape.back());
    return out;
}

}  // namespace

template <class T>
MaskPlan<T> plan_sdpa_masks(const Masks<T>& masks, const Shape& lead, std::size_t lq, std::size_t lk) {
    if (masks.key_padding_mask || masks.valid_lens)
        throw UsageError("sdpa: key padding masks and valid lengths belong to mha");
    MaskPlan<T> plan;
    plan.causal = masks.causal, plan.lead = lead, plan.lq = lq, plan.lk = lk;
    if (masks.causal) plan.description = "causal";
    if (masks.attn_mask) {
        Shape target = lead;
        target.push_back(lq), target.push_back(lk);
        const Shape ms(masks.attn_mask->shape().begin(), masks.attn_mask->shape().end());
        plan_attn_mask(plan, masks.attn_mask->data(), ms, masks.attn_mask_name, target, "(..., Lq, Lk)");
        plan.attn_is_bool = masks.attn_mask_is_bool;
        add_description(plan.description, masks.attn_mask_name);
    }
    return plan;
}

template <class T>
MaskPlan<T> plan_mha_masks(const Masks<T>& masks, std::size_t b, std::size_t h, std::size_t lq, std::size_t lk,
                           bool batched) {
    MaskPlan<T> plan;
    plan.causal = masks.causal, plan.lead = {b, h}, plan.lq = lq, plan.lk = lk, plan.heads_per_batch = h;
    if (masks.causal || masks.causal_in_attn_mask) plan.description = "causal";
    if (masks.attn_mask) plan_mha_attn_mask(plan, masks, b, h, lq, lk, batched);
    if (masks.key_padding_mask) plan_key_padding(plan, masks, b, lk, batched);
    if (masks.valid_lens) plan_valid_lens(plan, masks, b, lq, lk);
    return plan;
}

template <class T>
Masks<T> pad_key_columns(const Masks<T>& masks, std::size_t extra) {
    Masks<T> out = masks;
    if (out.attn_mask) out.attn_mask = pad_last_axis(*masks.attn_mask, extra);
    if (out.key_padding_mask) out.key_padding_mask = pad_last_axis(*masks.key_padding_mask, extra);
    return out;
}

template <class T>
Masks<T> with_causal_mask(const Masks<T>& masks, std::size_t lq, std::size_t lk) {
    Masks<T> out = masks;
    if (!masks.causal) return out;
    Shape shape = masks.attn_mask ? shape_of(*masks.attn_mask) : Shape{lq, lk};
    const std::size_t r = shape.size();
    if (r < 2 || (shape[r - 2] != lq && shape[r - 2] != 1) || (shape[r - 1] != lk && shape[r - 1] != 1)) return out;
    const std::size_t rows = shape[r - 2], cols = shape[r - 1];  // the given mask's (1 where broadcast)
    shape[r - 2] = lq, shape[r - 1] = lk;
    Array<T> folded = Array<T>::from_shape(shape);
    const bool is_bool = !masks.attn_mask || masks.attn_mask_is_bool;
    const std::size_t planes = folded.size() / (lq * lk);
    for (std::size_t n = 0; n < planes; ++n)
        for (std::size_t i = 0; i < lq; ++i)
            for (std::size_t j = 0; j < lk; ++j) {
                const T given = masks.attn_mask ? masks.attn_mask->data()[(n * rows + (rows > 1 ? i : 0)) * cols +
                                                                          (cols > 1 ? j : 0)]
                                                : T(0);
                T& m = folded.data()[(n * lq + i) * lk + j];
                if (is_bool) m = given != T(0) || j > i ? T(1) : T(0);
                else m = j > i ? -std::numeric_limits<T>::infinity() : given;
            }
    out.attn_mask = std::move(folded);
    out.attn_mask_is_bool = is_bool;
    out.causal = false;
    out.causal_in_attn_mask = true;
    return out;
}

template Masks<float> with_causal_mask(const Masks<float>&, std::size_t, std::size_t);
template Masks<double> with_causal_mask(const Masks<double>&, std::size_t, std::size_t);
template Masks<float> pad_key_columns(const Masks<float>&, std::size_t);
template Masks<double> pad_key_columns(const Masks<double>&, std::size_t);
template MaskPlan<float> plan_sdpa_masks(const Masks<float>&, const Shape&, std::size_t, std::size_t);
template MaskPlan<double> plan_sdpa_masks(const Masks<double>&, const Shape&, std::size_t, std::size_t);
template MaskPlan<float> plan_mha_masks(const Masks<float>&, std::size_t, std::size_t, std::size_t, std::size_t,
                                        bool);
template MaskPlan<double> plan_mha_masks(const Masks<double>&, std::size_t, std::size_t, std::size_t, std::size_t,
                                         bool);

}  // namespace attntrace
