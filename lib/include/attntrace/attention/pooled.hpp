#pragma once
// Attention weights pooled to a bounded grid of cells per head, for pictures of long sequences:
// the grid is at most max_cells x max_cells whatever Lq and Lk are, so a picture of L = 32768
// needs (max_cells^2) floats per head, not L^2.
//
// Cell (r, c) of head n is the MEAN of w[n, i, j] over the queries i in [r*q_block, (r+1)*q_block)
// and keys j in [c*k_block, (c+1)*k_block), both clipped to the plane (the last cell of an axis
// may cover fewer). A block is ceil(length / max_cells): equal blocks, so a header can say "one
// cell = 4 queries x 4 keys".
#include <cstddef>
#include <mutex>
#include <vector>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

struct PooledWeights {
    Shape lead;                           // the head index's shape: (B, H) mha, Q's leading dims sdpa
    std::size_t lq = 0, lk = 0;           // the plane that was pooled
    std::size_t q_block = 1, k_block = 1; // queries and keys per cell
    std::size_t rows = 0, cols = 0;       // cells per head: ceil(Lq / q_block), ceil(Lk / k_block)
    std::vector<float> cells;             // (N, rows, cols), N = product(lead)

    std::size_t count() const;            // N, the number of (batch, head) planes
    std::size_t heads() const;            // the last lead dim (1 when lead is empty)
    std::size_t batches() const;          // N / heads()
    const float* plane(std::size_t batch, std::size_t head) const;  // (rows, cols)
    float* plane(std::size_t n);          // (rows, cols) of plane n
    std::size_t rows_in(std::size_t r) const;  // queries cell row r covers
    std::size_t cols_in(std::size_t c) const;  // keys cell column c covers
};

// ceil(length / max_cells), at least 1: the block that fits LENGTH into MAX_CELLS cells.
std::size_t pool_block(std::size_t length, std::size_t max_cells);

// An all-zero grid for (lead..., Lq, Lk) with at most MAX_CELLS cells per axis.
PooledWeights pooled_grid(Shape lead, std::size_t lq, std::size_t lk, std::size_t max_cells);

// WEIGHTS (lead..., Lq, Lk) pooled to at most MAX_CELLS cells per axis.
template <class T>
PooledWeights pool_weights(const Array<T>& weights, std::size_t max_cells);

// P pooled further to at most MAX_ROWS x MAX_COLS cells: each new cell is the exact mean of the
// original weights it covers (cells are weighted by how many weights they hold).
PooledWeights repool(const PooledWeights& p, std::size_t max_rows, std::size_t max_cols);

// Pooled weights built one weight row at a time, from any number of threads: for the tiled path,
// which never holds a whole (Lq, Lk) plane. Each row brings its weights already summed per key
// bin (cols sums); finish() turns the sums into means.
class PooledSums {
public:
    PooledSums(Shape lead, std::size_t lq, std::size_t lk, std::size_t max_cells);
    const PooledWeights& grid() const { return grid_; }
    // Row I of plane N: BINS (cols) holds sum_j w[n, i, j] over each key bin's keys.
    void add_row(std::size_t n, std::size_t i, const double* bins);
    PooledWeights finish() &&;

private:
    PooledWeights grid_;               // cells hold sums until finish()
    std::vector<std::mutex> locks_;    // striped over (n, cell row)
};

// The mean over the heads of batch B: (rows, cols).
std::vector<float> mean_over_heads(const PooledWeights& p, std::size_t batch);

}  // namespace attntrace
