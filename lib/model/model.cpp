// A whole model opened (model.hpp): its source opened (model_source.hpp), the configuration
// read for every layer and for what surrounds the layers through the family's description, and
// every tensor found and shape-checked (resolve.hpp).
#include "attntrace/model/model.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "model_tensors.hpp"
#include "resolve.hpp"
#include "model_source.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

ModelConfig read_model_config(const json& config, const std::string& source,
                              const std::map<std::string, std::string>* key_names) {
    ModelConfig m;
    const LayerConfig first = read_layer_config(config, source, 0, key_names);
    m.layers.push_back(first);
    for (std::size_t n = 1; n < first.layers; ++n) m.layers.push_back(read_layer_config(config, source, n, key_names));
    m.model_type = first.model_type;
    m.family = first.family;
    m.hidden = first.hidden, m.heads = first.heads, m.kv_heads = first.kv_heads, m.head_dim = first.head_dim;
    m.values = first.values;
    const ConfigReader r{config, source, m.values, key_names};
    m.family->read_model(r, m);
    read_special_ids(r, m);
    return m;
}

const ModelTensor* ModelTensors::find(const std::vector<ModelTensor>& list, Canonical what) {
    for (const ModelTensor& t : list)
        if (t.spec.feeds.front() == what) return &t;
    return nullptr;
}

Model open_model(const std::string& path) {
    Model model;
    const std::shared_ptr<ModelSource> source = open_source(path);
    model.dir = path;
    model.config = model_config(*source);
    model.tensors = resolve_model(source, model.config, model.head_missing);
    return model;
}

std::string describe_model(const ModelConfig& m) {
    std::ostringstream o;
    o << m.model_type << ", " << m.layers.size() << " layers, " << m.heads << " heads";
    if (m.kv_heads != m.heads) o << " (" << m.kv_heads << " kv heads)";
    o << " of " << m.head_dim << ", hidden " << m.hidden << ", MLP " << m.intermediate << " "
      << activation_name(m.activation) << (m.mlp == Mlp::gated ? " gated" : "") << ", vocabulary " << m.vocab;
    if (m.residual == Residual::sandwich) o << ", norms before and after attention and MLP";
    if (m.scale_embeddings) o << ", embeddings x sqrt(" << m.hidden << ")";
    if (m.final_softcap) o << ", logits soft-capped at " << format_number(*m.final_softcap);
    if (m.moe) {
        const auto sparse = std::count(m.moe->sparse.begin(), m.moe->sparse.end(), true);
        o << "; " << sparse << " MoE layers: top " << m.moe->top_k << " of " << m.moe->experts << " experts of "
          << m.moe->intermediate << (m.moe->normalize ? " (weights renormalised)" : "");
        if (m.moe->shared_intermediate) o << " + a shared expert of " << m.moe->shared_intermediate;
    }
    return o.str();
}

std::vector<std::size_t> position_ids(const std::vector<std::uint32_t>& ids, std::size_t offset,
                                      std::optional<std::uint32_t> padding_idx) {
    std::vector<std::size_t> out(ids.size());
    std::size_t counted = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (padding_idx && ids[i] == *padding_idx) {
            out[i] = *padding_idx;
            continue;
        }
        out[i] = offset + (padding_idx ? counted++ : i);
    }
    return out;
}

void check_ids(const ModelConfig& m, const std::vector<std::uint32_t>& ids, const std::string& what) {
    if (ids.empty()) throw InputError(what + ": no tokens to run");
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (ids[i] >= m.vocab)
            throw InputError(what + ": id " + std::to_string(ids[i]) + " (token " + std::to_string(i) +
                             ") is past the vocabulary (ids 0 to " + std::to_string(m.vocab - 1) + ")");
    // RoBERTa: a pad token keeps position padding_idx, so only the others use up the table
    const auto counted = static_cast<std::size_t>(
        std::count_if(ids.begin(), ids.end(), [&](std::uint32_t id) { return !m.padding_idx || id != *m.padding_idx; }));
    if (m.max_length && counted > *m.max_length) {
        const std::string table = m.position_offset ? " (positions start at padding_idx + 1 = " +
                                                          std::to_string(m.position_offset) + ")"
                                                    : "";
        throw InputError(what + ": " + std::to_string(ids.size()) + " tokens but " + m.model_type +
                         " positions allow at most " + std::to_string(*m.max_length) + table);
    }
}

}  // namespace attntrace
