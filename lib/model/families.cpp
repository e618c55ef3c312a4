// The registry of model families: one line each. A new family is its file family_<name>.cpp
// (family.hpp says what it describes) and one line here.
#include "family.hpp"

namespace attntrace {

const std::vector<const Family*>& families() {
    static const std::vector<const Family*> all = {
        &gpt2_family(),
        &bert_family(),
        &llama_family(),
        &gpt_neox_family(),
        &bloom_family(),
        &gemma_family(),
        &phi3_family(),
        &olmo2_family(),
        &moe_family(),
    };
    return all;
}

}  // namespace attntrace
