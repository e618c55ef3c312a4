// The stage names declared in observer.hpp, in execution order.
#include "attntrace/attention/observer.hpp"

namespace attntrace {

const std::vector<std::string>& mha_stage_names() {
    static const std::vector<std::string> names = {
        "query", "key", "value", "normed", "q", "k", "v", "q_heads", "k_heads", "v_heads", "q_rotary", "k_rotary", "scores",
        "masked_scores", "weights", "context", "merged", "output"};
    return names;
}

const std::vector<std::string>& sdpa_stage_names() {
    static const std::vector<std::string> names = {"query", "key", "value", "q_rotary", "k_rotary", "scores",
                                                   "masked_scores", "weights", "output"};
    return names;
}

}  // namespace attntrace
