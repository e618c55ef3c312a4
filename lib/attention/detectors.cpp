#include "attntrace/attention/detectors.hpp"

#include <algorithm>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

template <class T>
RowScores row_scores(const T* w, std::size_t i, std::size_t lk, bool square) {
    RowScores s;
    if (lk == 0) return s;
    if (i >= 1 && i - 1 < lk) s.previous_token = double(w[i - 1]);
    if (square && i < lk) s.diagonal = double(w[i]);
    s.first_token = double(w[0]);
    s.max_weight = double(*std::max_element(w, w + lk));
    return s;
}

void HeadScoreSums::add(std::size_t head, const RowScores& row) {
    auto one = [](double v, double& sum, std::size_t& count) {
        if (std::isnan(v)) return;
        sum += v;
        ++count;
    };
    one(row.previous_token, sums_[head].previous_token, counts_[head].previous_token);
    one(row.diagonal, sums_[head].diagonal, counts_[head].diagonal);
    one(row.first_token, sums_[head].first_token, counts_[head].first_token);
    one(row.max_weight, sums_[head].max_weight, counts_[head].max_weight);
}

std::vector<HeadScores> HeadScoreSums::means() const {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto mean = [nan](double sum, std::size_t count) { return count ? sum / double(count) : nan; };
    std::vector<HeadScores> out(sums_.size());
    for (std::size_t h = 0; h < out.size(); ++h) {
        out[h].previous_token = mean(sums_[h].previous_token, counts_[h].previous_token);
        out[h].diagonal = mean(sums_[h].diagonal, counts_[h].diagonal);
        out[h].first_token = mean(sums_[h].first_token, counts_[h].first_token);
        out[h].max_weight = mean(sums_[h].max_weight, counts_[h].max_weight);
    }
    return out;
}

template <class T>
std::vector<HeadScores> detect_heads(const Array<T>& weights) {
    const std::size_t rank = weights.dimension();
    if (rank < 2) throw ShapeError("weights: shape " + shape_string(weights.shape()) + " has no (Lq, Lk) plane");
    const std::size_t lq = weights.shape()[rank - 2], lk = weights.shape()[rank - 1];
    const std::size_t heads = rank >= 3 ? weights.shape()[rank - 3] : 1;
    const std::size_t planes = lq * lk == 0 ? 0 : weights.size() / (lq * lk);
    HeadScoreSums sums(heads);
    for (std::size_t n = 0; n < planes; ++n)
        for (std::size_t i = 0; i < lq; ++i) {
            const T* row = weights.data() + (n * lq + i) * lk;
            if (std::all_of(row, row + lk, [](T x) { return x == T(0); })) continue;  // an empty row
            sums.add(n % heads, row_scores(row, i, lk, lq == lk));
        }
    return sums.means();
}

std::string head_role(const HeadScores& s) {
    if (s.previous_token >= kRoleThreshold) return "previous-token";
    if (s.first_token >= kRoleThreshold) return "sink";
    if (s.diagonal >= kRoleThreshold) return "diagonal";
    return "";
}

template RowScores row_scores(const float*, std::size_t, std::size_t, bool);
template RowScores row_scores(const double*, std::size_t, std::size_t, bool);
template std::vector<HeadScores> detect_heads(const Array<float>&);
template std::vector<HeadScores> detect_heads(const Array<double>&);

}  // namespace attntrace
