#include "attntrace/attention/pooled.hpp"

#include <algorithm>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

std::size_t PooledWeights::count() const {
    std::size_t n = 1;
    for (auto d : lead) n *= d;
    return n;
}
std::size_t PooledWeights::heads() const { return lead.empty() ? 1 : lead.back(); }
std::size_t PooledWeights::batches() const { return heads() == 0 ? 0 : count() / heads(); }
const float* PooledWeights::plane(std::size_t batch, std::size_t head) const {
    return cells.data() + (batch * heads() + head) * rows * cols;
}
float* PooledWeights::plane(std::size_t n) { return cells.data() + n * rows * cols; }
std::size_t PooledWeights::rows_in(std::size_t r) const { return std::min(lq, (r + 1) * q_block) - r * q_block; }
std::size_t PooledWeights::cols_in(std::size_t c) const { return std::min(lk, (c + 1) * k_block) - c * k_block; }

std::size_t pool_block(std::size_t length, std::size_t max_cells) {
    if (max_cells == 0) throw UsageError("pooling: at least one cell per axis is needed");
    return std::max<std::size_t>(1, (length + max_cells - 1) / max_cells);
}

PooledWeights pooled_grid(Shape lead, std::size_t lq, std::size_t lk, std::size_t max_cells) {
    PooledWeights p;
    p.lead = std::move(lead);
    p.lq = lq, p.lk = lk;
    p.q_block = pool_block(lq, max_cells), p.k_block = pool_block(lk, max_cells);
    p.rows = (lq + p.q_block - 1) / p.q_block, p.cols = (lk + p.k_block - 1) / p.k_block;
    p.cells.assign(p.count() * p.rows * p.cols, 0.0f);
    return p;
}

template <class T>
PooledWeights pool_weights(const Array<T>& weights, std::size_t max_cells) {
    if (weights.dimension() < 2) throw ShapeError("weights: shape " + shape_string(weights.shape()) + " has no (Lq, Lk) plane");
    const std::size_t rank = weights.dimension();
    PooledWeights p = pooled_grid(Shape(weights.shape().begin(), weights.shape().end() - 2), weights.shape()[rank - 2],
                                  weights.shape()[rank - 1], max_cells);
    std::vector<double> sums(p.rows * p.cols);
    for (std::size_t n = 0; n < p.count(); ++n) {
        std::fill(sums.begin(), sums.end(), 0.0);
        const T* w = weights.data() + n * p.lq * p.lk;
        for (std::size_t i = 0; i < p.lq; ++i)
            for (std::size_t j = 0; j < p.lk; ++j) sums[(i / p.q_block) * p.cols + j / p.k_block] += w[i * p.lk + j];
        float* out = p.plane(n);
        for (std::size_t r = 0; r < p.rows; ++r)
            for (std::size_t c = 0; c < p.cols; ++c)
                out[r * p.cols + c] = float(sums[r * p.cols + c] / double(p.rows_in(r) * p.cols_in(c)));
    }
    return p;
}

PooledWeights repool(const PooledWeights& p, std::size_t max_rows, std::size_t max_cols) {
    const std::size_t fr = pool_block(p.rows, max_rows), fc = pool_block(p.cols, max_cols);
    if (fr == 1 && fc == 1) return p;
    PooledWeights out = p;
    out.q_block = p.q_block * fr, out.k_block = p.k_block * fc;
    out.rows = (p.rows + fr - 1) / fr, out.cols = (p.cols + fc - 1) / fc;
    out.cells.assign(out.count() * out.rows * out.cols, 0.0f);
    std::vector<double> sums(out.rows * out.cols);
    for (std::size_t n = 0; n < p.count(); ++n) {
        std::fill(sums.begin(), sums.end(), 0.0);
        const float* in = p.cells.data() + n * p.rows * p.cols;
        for (std::size_t r = 0; r < p.rows; ++r)  // a cell's mean times its size is its sum
            for (std::size_t c = 0; c < p.cols; ++c)
                sums[(r / fr) * out.cols + c / fc] += double(in[r * p.cols + c]) * double(p.rows_in(r) * p.cols_in(c));
        float* o = out.plane(n);
        for (std::size_t r = 0; r < out.rows; ++r)
            for (std::size_t c = 0; c < out.cols; ++c)
                o[r * out.cols + c] = float(sums[r * out.cols + c] / double(out.rows_in(r) * out.cols_in(c)));
    }
    return out;
}

PooledSums::PooledSums(Shape lead, std::size_t lq, std::size_t lk, std::size_t max_cells)
    : grid_(pooled_grid(std::move(lead), lq, lk, max_cells)), locks_(64) {}

void PooledSums::add_row(std::size_t n, std::size_t i, const double* bins) {
    const std::size_t r = i / grid_.q_block;
    float* cells = grid_.plane(n) + r * grid_.cols;
    const std::lock_guard<std::mutex> lock(locks_[(n * grid_.rows + r) % locks_.size()]);
    for (std::size_t c = 0; c < grid_.cols; ++c) cells[c] += float(bins[c]);
}

PooledWeights PooledSums::finish() && {
    for (std::size_t n = 0; n < grid_.count(); ++n) {
        float* p = grid_.plane(n);
        for (std::size_t r = 0; r < grid_.rows; ++r)
            for (std::size_t c = 0; c < grid_.cols; ++c) p[r * grid_.cols + c] /= float(grid_.rows_in(r) * grid_.cols_in(c));
    }
    return std::move(grid_);
}

std::vector<float> mean_over_heads(const PooledWeights& p, std::size_t batch) {
    std::vector<float> mean(p.rows * p.cols, 0.0f);
    const std::size_t h = p.heads();
    for (std::size_t head = 0; head < h; ++head) {
        const float* w = p.plane(batch, head);
        for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += w[i] / float(h);
    }
    return mean;
}

template PooledWeights pool_weights(const Array<float>&, std::size_t);
template PooledWeights pool_weights(const Array<double>&, std::size_t);

}  // namespace attntrace
