#pragma once
// What the tiled path (the online softmax over key blocks) records for pictures and the head
// detectors, without ever holding a weight row: per row of a query block, the running sums of
// P = exp(S - m) per pooled key bin, and P at keys i-1, i and 0. They follow the same rescaling
// as the context (x exp(m_old - m_new) when the running maximum grows) and are divided by the
// row's normalizer l at the end, so bins / l are the row's weights summed per bin.
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/pooled.hpp"

namespace attntrace {

template <class T>
class TilePictureRows {
public:
    // POOL (may be null): the pooled grid the rows go to; STATS (may be null): where the detector
    // values go. LK, SQUARE: the plane's key count and whether Lq == Lk.
    TilePictureRows(PooledSums* pool, RowStats* stats, std::size_t lk, bool square)
        : pool_(pool), stats_(stats), lk_(lk), square_(square),
          cols_(pool ? pool->grid().cols : 0), k_block_(pool ? pool->grid().k_block : 1) {}

    bool active() const { return pool_ || (stats_ && !stats_->first_token.empty()); }

    // A new block of ROWS query rows.
    void start(std::size_t rows) {
        bins_.assign(rows * cols_, 0.0);
        prev_.assign(rows, 0.0), diag_.assign(rows, 0.0), first_.assign(rows, 0.0);
    }

    // Row R (query I): its keys [J0, J0 + N) now hold P = exp(S - m_new); CORRECTION =
    // exp(m_old - m_new) rescales what the row gathered from the keys before J0.
    void add(std::size_t r, std::size_t i, std::size_t j0, const T* p, std::size_t n, T correction) {
        if (correction != T(1)) {
            const double c = double(correction);
            prev_[r] *= c, diag_[r] *= c, first_[r] *= c;
            if (pool_)  // only the bins holding keys before j0 are non-zero
                for (std::size_t b = 0; b < cols_ && b * k_block_ < j0; ++b) bins_[r * cols_ + b] *= c;
        }
        if (i >= 1 && i - 1 >= j0 && i - 1 < j0 + n) prev_[r] = double(p[i - 1 - j0]);
        if (i >= j0 && i < j0 + n) diag_[r] = double(p[i - j0]);
        if (j0 == 0 && n > 0) first_[r] = double(p[0]);
        if (!pool_) return;
        double* bins = bins_.data() + r * cols_;
        for (std::size_t j = 0; j < n; ++j) bins[(j0 + j) / k_block_] += double(p[j]);
    }

    // Row R (query I of plane N, RowStats row ROW) is done with normalizer L (0: an empty row).
    void finish(std::size_t r, std::size_t n, std::size_t i, std::size_t row, T l) {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double inv = l == T(0) ? 0.0 : 1.0 / double(l);
        if (stats_ && !stats_->first_token.empty()) {
            stats_->previous_token[row] = l == T(0) || i == 0 || i - 1 >= lk_ ? nan : prev_[r] * inv;
            stats_->diagonal[row] = l == T(0) || !square_ ? nan : diag_[r] * inv;
            stats_->first_token[row] = l == T(0) || lk_ == 0 ? nan : first_[r] * inv;
        }
        if (!pool_ || l == T(0) || std::isnan(l)) return;  // an empty or NaN row adds nothing
        double* bins = bins_.data() + r * cols_;
        for (std::size_t b = 0; b < cols_; ++b) bins[b] *= inv;
        pool_->add_row(n, i, bins);
    }

private:
    PooledSums* pool_;
    RowStats* stats_;
    std::size_t lk_;
    bool square_;
    std::size_t cols_, k_block_;
    std::vector<double> bins_;               // (rows, cols) sums of P per key bin
    std::vector<double> prev_, diag_, first_;  // (rows) P at keys i-1, i, 0
};

}  // namespace attntrace
