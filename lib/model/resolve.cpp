// A family's tensors found in a source (resolve.hpp).
#include "resolve.hpp"

#include <algorithm>

#include "attntrace/io/gguf.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

// "(E, 3E)" -> "(3E, E)": a 2-D formula's dims swapped.
std::string swapped(const std::string& formula) {
    const auto comma = formula.find(", ");
    if (comma == std::string::npos) return formula;
    std::string out = "(";  // appended piece by piece: GCC 12's -Wrestrict misfires on "(" + string
    out += formula.substr(comma + 2, formula.size() - comma - 3);
    out += ", ";
    out += formula.substr(1, comma - 1);
    out += ")";
    return out;
}

// The entry of SPEC's role in FAMILY's GGUF table for the architecture of SOURCE (InputError
// naming it when there is none).
const GgufTable::Tensor& gguf_entry(const ModelSource& source, const Family& family, const TensorSpec& spec) {
    const auto arch = source.gguf()->string("general.architecture");
    const GgufTable::Tensor* entry = family.gguf() && arch ? family.gguf()->find(spec.role, *arch) : nullptr;
    if (!entry)
        fail(source.path(), "no GGUF name for the tensor '" + spec.role + "' " + spec.formula + " (llama.cpp has none)");
    return *entry;
}

}  // namespace

std::optional<std::string> find_prefix(const std::map<std::string, std::string>& names, const std::string& tail) {
    for (const auto& [name, file] : names) {
        if (name.size() < tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail) != 0) continue;
        const std::string prefix = name.substr(0, name.size() - tail.size());
        if (prefix.empty() || prefix.back() == '.') return prefix;
    }
    return std::nullopt;
}

std::optional<TensorNaming> naming_for(ModelSource& source, const Family& family, const std::string& tail) {
    if (source.gguf()) return TensorNaming{&family, "", family.gguf()};
    const auto prefix = find_prefix(source.names(), tail);
    if (!prefix) return std::nullopt;
    return TensorNaming{&family, *prefix, nullptr};
}

TensorSpec as_stored(const ModelSource& source, const Family& family, TensorSpec spec) {
    if (!source.gguf()) return spec;
    const GgufTable::Tensor& entry = gguf_entry(source, family, spec);
    if (entry.layout == GgufLayout::shifted) spec.offset = 0;
    if (entry.layout == GgufLayout::transposed && spec.shape.size() == 2) {
        spec.stored = Stored::linear;
        spec.shape = {spec.shape[1], spec.shape[0]};
        spec.formula = swapped(spec.formula);
    }
    if (entry.layout == GgufLayout::rotary) {
        const auto arch = source.gguf()->string("general.architecture");
        const GgufTable::Architecture* a = arch ? family.gguf()->architecture(*arch) : nullptr;
        spec.rotary_permuted = a && a->rotary_permuted;
    }
    return spec;
}

ModelTensor resolve_tensor(ModelSource& source, const TensorNaming& naming, const TensorSpec& wanted,
                           std::optional<std::size_t> layer, bool head) {
    const TensorSpec spec = as_stored(source, *naming.family, wanted);
    std::string name;
    if (naming.gguf) {
        name = (layer ? "blk." + std::to_string(*layer) + "." : "") +
               std::string(gguf_entry(source, *naming.family, spec).name);
    } else {
        const std::string at = head ? "" : naming.prefix + (layer ? naming.family->layer_stem(*layer) : "");
        name = at + spec.role;
        if (!source.names().count(name) && !spec.alias.empty() && source.names().count(at + spec.alias))
            name = at + spec.alias;
    }
    if (!source.names().count(name)) fail(source.path(), "missing tensor '" + name + "' " + spec.formula);
    const TensorMeta t = source.meta(name);
    if (const GgufFiles* g = source.gguf()) g->check_readable(*g->tensor(name));  // before anything is run
    if (t.shape != spec.shape)
        throw ShapeError(source.path() + ": " + name + " has shape " + shape_string(t.shape) + " but " +
                         source.config_word() + " gives " + spec.formula + " = " + shape_string(spec.shape));
    return {spec, {spec.role, name, source.names().at(name), t.dtype, t.shape}};
}

CheckpointLayer resolve_layer(std::shared_ptr<ModelSource> source, const LayerConfig& c) {
    CheckpointLayer out{source->path(), c, {}, source};
    const std::vector<TensorSpec> specs = c.family->attention_tensors(c);
    const std::string stem = c.family->layer_stem(c.layer);
    const auto naming = naming_for(*source, *c.family, stem + specs.front().role);
    if (!naming)
        fail(source->path(), "no tensor '" + stem + specs.front().role + "' (with any prefix) for layer " +
                                 std::to_string(c.layer) + " of this " + c.model_type + " checkpoint");
    for (const TensorSpec& spec : specs) out.tensors.push_back(resolve_tensor(*source, *naming, spec, c.layer).stored);
    return out;
}

namespace {

std::vector<ModelTensor> resolve_all(ModelSource& source, const TensorNaming& naming, const std::vector<TensorSpec>& specs,
                                     std::optional<std::size_t> layer, bool head = false) {
    std::vector<ModelTensor> out;
    for (const TensorSpec& spec : specs) out.push_back(resolve_tensor(source, naming, spec, layer, head));
    return out;
}

// The head's tensors into T, or why there is none (Model::head_missing).
std::string resolve_head(ModelTensors& t, const ModelConfig& m, const TensorNaming& naming) {
    const std::vector<TensorSpec> specs = m.family->head_tensors(m);
    if (specs.empty()) return "";  // tied: the token embeddings are the head
    ModelSource& source = *t.files;
    const TensorSpec& first = specs.front();
    const std::string name = naming.gguf ? std::string(gguf_entry(source, *m.family, first).name) : first.role;
    if (!source.names().count(name)) {
        if (m.head == Head::masked_lm)
            return source.path() + " has no masked-LM head (no " + first.role + "): it was saved without one (" +
                   m.model_type + "Model), so it has no logits";
        return source.path() + ": missing tensor '" + name + "' " + first.formula + " (tie_word_embeddings is false)";
    }
    t.head = resolve_all(source, naming, specs, std::nullopt, true);
    return "";
}

}  // namespace

std::shared_ptr<const ModelTensors> resolve_model(std::shared_ptr<ModelSource> source, const ModelConfig& m,
                                                  std::string& head_missing) {
    auto tensors = std::make_shared<ModelTensors>();
    tensors->files = source;
    const std::vector<TensorSpec> embeddings = m.family->embedding_tensors(m);
    const auto naming = naming_for(*source, *m.family, embeddings.front().role);
    if (!naming)
        throw InputError(source->path() + ": no tensor '" + embeddings.front().role +
                         "' (with any prefix): the token embeddings of a " + m.model_type + " checkpoint");
    tensors->prefix = naming->prefix;
    tensors->embeddings = resolve_all(*source, *naming, embeddings, std::nullopt);
    for (std::size_t n = 0; n < m.layers.size(); ++n) {
        tensors->attention.push_back(resolve_layer(source, m.layers[n]));
        tensors->blocks.push_back(resolve_all(*source, *naming, m.family->block_tensors_of(m, n), n));
        tensors->experts.emplace_back();
        for (std::size_t x = 0; m.moe && m.moe->sparse[n] && x < m.moe->experts; ++x)
            tensors->experts.back().push_back(resolve_all(*source, *naming, m.family->expert_tensors(m, n, x), n));
    }
    tensors->final_norm = resolve_all(*source, *naming, m.family->final_tensors(m), std::nullopt);
    head_missing = resolve_head(*tensors, m, *naming);
    return tensors;
}

}  // namespace attntrace
