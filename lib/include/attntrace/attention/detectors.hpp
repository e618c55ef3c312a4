#pragma once
// Head detectors: what kind of pattern a head's weights follow, as means over batch and query rows
// (rows with no allowed key are left out, as for the entropy):
//   previous_token  mean of w[i, i-1] over i >= 1       (induction-style "look one back" heads)
//   diagonal        mean of w[i, i]  (only when Lq == Lk: self-attention)
//   first_token     mean of w[i, 0]                     (attention sinks)
//   max_weight      mean of the row maximum             (how peaked the rows are)
// The text trace names a head by the first score that reaches kRoleThreshold, in this order:
// "previous-token", "sink" (first_token), "diagonal".
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

inline constexpr double kRoleThreshold = 0.5;

// Row i's detector values from its weights W (Lk); NaN where the key does not exist (w[i-1] of
// row 0, w[i] past Lk), and for diagonal when the plane is not square (SQUARE false).
struct RowScores {
    double previous_token = std::numeric_limits<double>::quiet_NaN();
    double diagonal = std::numeric_limits<double>::quiet_NaN();
    double first_token = std::numeric_limits<double>::quiet_NaN();
    double max_weight = 0;
};
template <class T>
RowScores row_scores(const T* w, std::size_t i, std::size_t lk, bool square);

struct HeadScores {
    double previous_token = 0, diagonal = 0, first_token = 0, max_weight = 0;  // NaN: no row had it
};

// Sums of RowScores per head, skipping NaNs; mean() divides by how many values each had.
class HeadScoreSums {
public:
    explicit HeadScoreSums(std::size_t heads) : sums_(heads), counts_(heads) {}
    void add(std::size_t head, const RowScores& row);
    std::vector<HeadScores> means() const;

private:
    std::vector<HeadScores> sums_;
    struct Counts { std::size_t previous_token = 0, diagonal = 0, first_token = 0, max_weight = 0; };
    std::vector<Counts> counts_;
};

// WEIGHTS (lead..., Lq, Lk): one HeadScores per head (the last lead dim; the others are batch).
template <class T>
std::vector<HeadScores> detect_heads(const Array<T>& weights);

// "previous-token", "sink", "diagonal", or "" when no score reaches kRoleThreshold.
std::string head_role(const HeadScores& scores);

}  // namespace attntrace
