// A whole model opened (model.hpp): config.json read for every layer and for what surrounds the
// layers, and every tensor found and shape-checked, through the family's description alone.
#include "attntrace/model/model.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "model_tensors.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

ModelConfig read_model_config(const json& config, const std::string& source) {
    ModelConfig m;
    const LayerConfig first = read_layer_config(config, source, 0);
    m.layers.push_back(first);
    for (std::size_t n = 1; n < first.layers; ++n) m.layers.push_back(read_layer_config(config, source, n));
    m.model_type = first.model_type;
    m.family = first.family;
    m.hidden = first.hidden, m.heads = first.heads, m.kv_heads = first.kv_heads, m.head_dim = first.head_dim;
    m.values = first.values;
    const ConfigReader r{config, source, m.values};
    m.family->read_model(r, m);
    read_special_ids(r, m);
    return m;
}

const ModelTensor* ModelTensors::find(const std::vector<ModelTensor>& list, Canonical what) {
    for (const ModelTensor& t : list)
        if (t.spec.feeds.front() == what) return &t;
    return nullptr;
}

namespace {

std::vector<ModelTensor> resolve_all(CheckpointFiles& files, const std::string& dir, const std::string& prefix,
                                     const std::vector<TensorSpec>& specs) {
    std::vector<ModelTensor> out;
    for (const TensorSpec& spec : specs) out.push_back({spec, resolve_tensor(files, dir, prefix, spec)});
    return out;
}

// The head's tensors, or why there is none (Model::head_missing).
std::string resolve_head(ModelTensors& t, const ModelConfig& m, const std::string& dir) {
    const std::vector<TensorSpec> specs = m.family->head_tensors(m);
    if (specs.empty()) return "";  // tied: the token embeddings are the head
    const TensorSpec& first = specs.front();
    if (!t.files->names().count(first.role)) {
        if (m.head == Head::masked_lm)
            return dir + " has no masked-LM head (no " + first.role + "): it was saved without one (" + m.model_type +
                   "Model), so it has no logits";
        return dir + ": missing tensor '" + first.role + "' " + first.formula + " (tie_word_embeddings is false)";
    }
    t.head = resolve_all(*t.files, dir, "", specs);
    return "";
}

}  // namespace

Model open_model(const std::string& dir) {
    const json config = read_config(dir);
    Model model;
    model.dir = dir;
    model.config = read_model_config(config, (fs::path(dir) / "config.json").string());
    const ModelConfig& m = model.config;
    auto tensors = std::make_shared<ModelTensors>();
    tensors->files = CheckpointFiles::open(dir);
    CheckpointFiles& files = *tensors->files;
    const std::vector<TensorSpec> embeddings = m.family->embedding_tensors(m);
    const auto prefix = find_prefix(files.names(), embeddings.front().role);
    if (!prefix)
        throw InputError(dir + ": no tensor '" + embeddings.front().role + "' (with any prefix): the token embeddings of a " +
                         m.model_type + " checkpoint");
    tensors->prefix = *prefix;
    tensors->embeddings = resolve_all(files, dir, *prefix, embeddings);
    for (std::size_t n = 0; n < m.layers.size(); ++n) {
        const std::string stem = *prefix + m.family->layer_stem(n);
        tensors->attention.push_back(resolve_layer(dir, config, tensors->files, n));
        tensors->blocks.push_back(resolve_all(files, dir, stem, m.family->block_tensors_of(m, n)));
        tensors->experts.emplace_back();
        for (std::size_t x = 0; m.moe && m.moe->sparse[n] && x < m.moe->experts; ++x)
            tensors->experts.back().push_back(resolve_all(files, dir, stem, m.family->expert_tensors(m, n, x)));
    }
    tensors->final_norm = resolve_all(files, dir, *prefix, m.family->final_tensors(m));
    model.head_missing = resolve_head(*tensors, m, dir);
    model.tensors = std::move(tensors);
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
