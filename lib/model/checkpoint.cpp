// Hugging Face checkpoints (checkpoint.hpp): config.json, the single or sharded safetensors
// files, layer N's tensors in the library's canonical layout. The per-family details follow
// transformers' modeling_*.py, as transcribed in tests/goldens/hf_attention.py.
#include "attntrace/model/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "attntrace/io/safetensors.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

struct ModelType {
    const char* name;
    Family family;
};
constexpr ModelType model_types[] = {
    {"gpt2", Family::gpt2},    {"bert", Family::bert},    {"roberta", Family::bert},
    {"llama", Family::llama},  {"mistral", Family::llama}, {"qwen2", Family::llama},
    {"qwen3", Family::llama},  {"gpt_neox", Family::gpt_neox}, {"bloom", Family::bloom},
};

// config.json values, each read once and remembered in LayerConfig::values.
struct ConfigReader {
    const json& config;
    const std::string& source;
    json& values;

    const json* find(const char* key) const {
        const auto it = config.find(key);
        return it == config.end() || it->is_null() ? nullptr : &*it;
    }
    std::size_t count(const char* key) const {
        const json* v = find(key);
        if (!v) fail(source, "missing config key '" + std::string(key) + "'");
        if (!v->is_number_integer() || v->get<std::int64_t>() <= 0)
            fail(source, "config key '" + std::string(key) + "' must be a positive integer, not " + v->dump());
        values[key] = *v;
        return v->get<std::size_t>();
    }
    // The first of KEYS present (a count), or nullopt.
    std::optional<std::size_t> count_of(std::initializer_list<const char*> keys) const {
        for (const char* k : keys)
            if (find(k)) return count(k);
        return std::nullopt;
    }
    // The first of KEYS present (a count); missing: an error naming the first.
    std::size_t any_count(std::initializer_list<const char*> keys) const {
        const auto found = count_of(keys);
        return found ? *found : count(*keys.begin());
    }
    // KEY's value, FALLBACK when absent; a value that IS_KIND refuses is an error ("must be WHAT").
    template <class V, class IsKind>
    V typed(const char* key, V fallback, IsKind is_kind, const char* what) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!is_kind(*v)) fail(source, "config key '" + std::string(key) + "' must be " + what + ", not " + v->dump());
        values[key] = *v;
        return v->get<V>();
    }
    double number(const char* key, double fallback) const {
        return typed(key, fallback, [](const json& v) { return v.is_number(); }, "a number");
    }
    bool flag(const char* key, bool fallback) const {
        return typed(key, fallback, [](const json& v) { return v.is_boolean(); }, "true or false");
    }
};

// rope_parameters (new style) or rope_theta + rope_scaling (old style) -> theta and scaling.
std::pair<double, RopeScaling> read_rope(const ConfigReader& r, double default_theta) {
    const json* params = r.find("rope_parameters");
    const json* scaling = params ? params : r.find("rope_scaling");
    if (scaling && !scaling->is_object()) fail(r.source, "'rope_parameters' / 'rope_scaling' must be an object");
    double theta = r.number("rope_theta", default_theta);
    RopeScaling s;
    if (!scaling) return {theta, s};
    r.values[params ? "rope_parameters" : "rope_scaling"] = *scaling;
    const auto num = [&](const char* key, double fallback) {
        const auto it = scaling->find(key);
        return it != scaling->end() && it->is_number() ? it->get<double>() : fallback;
    };
    theta = num("rope_theta", theta);
    s.type = scaling->value("rope_type", scaling->value("type", std::string("default")));
    if (s.type != "default" && s.type != "linear" && s.type != "llama3")
        fail(r.source, "rope type '" + s.type + "' is not supported (default, linear, llama3)");
    s.factor = num("factor", 1.0);
    s.low_freq_factor = num("low_freq_factor", 1.0);
    s.high_freq_factor = num("high_freq_factor", 4.0);
    s.original_max_position = num("original_max_position_embeddings", r.number("max_position_embeddings", 8192));
    return {theta, s};
}

// Qwen2/Qwen3: sliding_window if use_sliding_window, on layers whose layer_types entry is
// "sliding_attention" (by default: layer >= max_window_layers).
std::optional<std::size_t> qwen_window(const ConfigReader& r, std::size_t layer) {
    if (!r.flag("use_sliding_window", false) || !r.find("sliding_window")) return std::nullopt;
    const std::size_t window = r.count("sliding_window");
    if (const json* types = r.find("layer_types")) {
        if (!types->is_array() || layer >= types->size()) fail(r.source, "'layer_types' has no entry for layer " + std::to_string(layer));
        r.values["layer_types"] = *types;
        return (*types)[layer] == "sliding_attention" ? std::optional(window) : std::nullopt;
    }
    const double first = r.number("max_window_layers", 28);
    return static_cast<double>(layer) >= first ? std::optional(window) : std::nullopt;
}

void read_llama_like(const ConfigReader& r, LayerConfig& c) {
    c.hidden = r.count("hidden_size");
    c.heads = r.count("num_attention_heads");
    c.layers = r.count("num_hidden_layers");
    c.kv_heads = r.count_of({"num_key_value_heads"}).value_or(c.heads);
    c.head_dim = r.count_of({"head_dim"}).value_or(c.hidden / c.heads);
    c.norm = NormKind::rms_norm;
    c.norm_eps = r.number("rms_norm_eps", 1e-6);
    c.causal = true;
    const auto [theta, scaling] = read_rope(r, 10000.0);
    c.rotary = Rotary{RotaryStyle::half, c.head_dim, rope_inv_freq(c.head_dim, theta, scaling)};
    if (c.model_type == "mistral" && r.find("sliding_window")) c.window = r.count("sliding_window");
    if (c.model_type == "qwen2" || c.model_type == "qwen3") c.window = qwen_window(r, c.layer);
    c.qk_norm = c.model_type == "qwen3";
    // LlamaAttention: bias=config.attention_bias on all four; Qwen2: q/k/v True, o_proj False;
    // Mistral: none.
    const bool bias = c.model_type != "mistral" && r.flag("attention_bias", false);
    c.qkv_bias = c.model_type == "qwen2" || bias;
    c.o_bias = c.model_type != "qwen2" && bias;
}

// hidden (E), heads (H, each its own kv head), layers and head dim P = E / H under the config's
// keys HIDDEN, HEADS and LAYERS.
void read_mha_sizes(const ConfigReader& r, LayerConfig& c, const char* hidden, const char* heads, const char* layers) {
    c.hidden = r.count(hidden);
    c.heads = c.kv_heads = r.count(heads);
    c.layers = r.count(layers);
    c.head_dim = c.hidden / c.heads;
}

void read_gpt_neox(const ConfigReader& r, LayerConfig& c) {
    read_mha_sizes(r, c, "hidden_size", "num_attention_heads", "num_hidden_layers");
    c.norm = NormKind::layer_norm;
    c.norm_eps = r.number("layer_norm_eps", 1e-5);
    c.causal = true;
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    auto [theta, scaling] = read_rope(r, r.number("rotary_emb_base", 10000.0));
    double pct = r.number("partial_rotary_factor", r.number("rotary_pct", 0.25));
    if (const json* params = r.find("rope_parameters"))
        pct = params->value("partial_rotary_factor", pct);
    const auto dims = static_cast<std::size_t>(static_cast<double>(c.head_dim) * pct);  // int(P * pct)
    c.rotary = Rotary{RotaryStyle::half, dims, rope_inv_freq(dims, theta, scaling)};
}

void read_family(const ConfigReader& r, LayerConfig& c) {
    switch (c.family) {
    case Family::gpt2:
        read_mha_sizes(r, c, "n_embd", "n_head", "n_layer");
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.scale = r.flag("scale_attn_weights", true) ? 1.0 / std::sqrt(double(c.head_dim)) : 1.0;
        if (r.flag("scale_attn_by_inverse_layer_idx", false)) c.scale /= static_cast<double>(c.layer + 1);
        return;
    case Family::bert: {
        read_mha_sizes(r, c, "hidden_size", "num_attention_heads", "num_hidden_layers");
        const json* pos = r.find("position_embedding_type");
        if (pos && *pos != "absolute") fail(r.source, "position_embedding_type " + pos->dump() + " is not supported (absolute)");
        return;
    }
    case Family::llama: return read_llama_like(r, c);
    case Family::gpt_neox: return read_gpt_neox(r, c);
    case Family::bloom:
        c.hidden = r.any_count({"hidden_size", "n_embed"});
        c.heads = c.kv_heads = r.any_count({"n_head", "num_attention_heads"});
        c.layers = r.any_count({"n_layer", "num_hidden_layers"});
        c.head_dim = c.hidden / c.heads;
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.alibi = true;
        return;
    }
}

}  // namespace

std::string supported_model_types() {
    std::string out;
    for (const ModelType& m : model_types) out += (out.empty() ? "" : ", ") + std::string(m.name);
    return out;
}

LayerConfig read_layer_config(const json& config, const std::string& source, std::size_t layer) {
    if (!config.is_object()) fail(source, "config is not a JSON object");
    LayerConfig c;
    c.layer = layer;
    const auto type = config.find("model_type");
    if (type == config.end() || !type->is_string()) fail(source, "missing config key 'model_type'");
    c.model_type = type->get<std::string>();
    const auto m = std::find_if(std::begin(model_types), std::end(model_types),
                                [&](const ModelType& t) { return c.model_type == t.name; });
    if (m == std::end(model_types))
        fail(source, "model_type '" + c.model_type + "' is not supported (supported: " + supported_model_types() + ")");
    c.family = m->family;
    c.values["model_type"] = c.model_type;
    read_family(ConfigReader{config, source, c.values}, c);
    if (c.hidden % c.heads != 0 && c.family != Family::llama)
        fail(source, "hidden size " + std::to_string(c.hidden) + " is not divisible by " + std::to_string(c.heads) + " heads");
    if (c.heads % c.kv_heads != 0)
        fail(source, std::to_string(c.heads) + " heads cannot share " + std::to_string(c.kv_heads) + " key/value heads");
    if (c.family != Family::gpt2) c.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    if (layer >= c.layers)
        fail(source, "layer " + std::to_string(layer) + " does not exist (the model has " + std::to_string(c.layers) +
                         " layers, 0 to " + std::to_string(c.layers - 1) + ")");
    return c;
}

// ---- files ------------------------------------------------------------------------------------

// The safetensors files of a checkpoint: each opened (memory-mapped, header parsed) when one of
// its tensors is first asked for.
class CheckpointFiles {
public:
    // PATH: a folder with model.safetensors or model.safetensors.index.json, or one .safetensors file.
    static std::shared_ptr<CheckpointFiles> open(const std::string& path) {
        auto files = std::make_shared<CheckpointFiles>();
        const fs::path p(path);
        if (!fs::is_directory(p)) {
            files->dir_ = p.parent_path().string();
            files->add_file(p.filename().string());
            return files;
        }
        files->dir_ = path;
        if (fs::exists(p / "model.safetensors.index.json")) {
            files->read_index((p / "model.safetensors.index.json").string());
        } else if (fs::exists(p / "model.safetensors")) {
            files->add_file("model.safetensors");
        } else {
            fail(path, "no model.safetensors or model.safetensors.index.json");
        }
        return files;
    }

    const std::map<std::string, std::string>& names() const { return where_; }  // tensor -> file
    const std::string& dir() const { return dir_; }

    const SafetensorsIndex::Tensor& meta(const std::string& name) {
        return shard(name).index.tensors.at(name);
    }
    template <class T>
    Array<T> read(const std::string& name) {
        const Shard& s = shard(name);
        Array<T> out = read_safetensors_tensor<T>(s.bytes.bytes(), s.index, name, &s.bytes);
        const SafetensorsIndex::Tensor& t = s.index.tensors.at(name);
        s.bytes.release(t.offset, t.nbytes);  // converted: the file's pages need not stay resident
        return out;
    }

private:
    struct Shard {
        FileBytes bytes;
        SafetensorsIndex index;
    };

    std::string path_of(const std::string& file) const { return (fs::path(dir_) / file).string(); }

    void add_file(const std::string& file) {
        Shard& s = open_shard(file);
        for (const auto& [name, t] : s.index.tensors) where_.emplace(name, file);
    }

    void read_index(const std::string& index_path) {
        const FileBytes bytes = FileBytes::open(index_path);
        json index;
        try {
            index = json::parse(bytes.bytes());
        } catch (const json::exception& e) {
            fail(index_path, std::string("not valid JSON: ") + e.what());
        }
        const auto map = index.find("weight_map");
        if (map == index.end() || !map->is_object()) fail(index_path, "missing 'weight_map'");
        for (const auto& [name, file] : map->items()) {
            if (!file.is_string()) fail(index_path, "weight_map['" + name + "'] is not a file name");
            where_.emplace(name, file.get<std::string>());
        }
        index_name_ = index_path;
    }

    Shard& open_shard(const std::string& file) {
        auto it = shards_.find(file);
        if (it != shards_.end()) return *it->second;
        const std::string path = path_of(file);
        if (!index_name_.empty() && !fs::exists(path))
            fail(index_name_, "shard " + file + " is missing (listed in the weight_map)");
        FileBytes bytes = FileBytes::open(path);
        SafetensorsIndex index = index_safetensors(bytes.bytes(), path);
        auto shard = std::make_unique<Shard>(Shard{std::move(bytes), std::move(index)});
        return *shards_.emplace(file, std::move(shard)).first->second;
    }

    Shard& shard(const std::string& name) {
        const auto it = where_.find(name);
        if (it == where_.end()) fail(dir_, "no tensor '" + name + "'");
        Shard& s = open_shard(it->second);
        if (!s.index.tensors.count(name))
            fail(path_of(it->second), "no tensor '" + name + "' (the weight_map puts it in this file)");
        return s;
    }

    std::string dir_;
    std::string index_name_;                        // model.safetensors.index.json, when sharded
    std::map<std::string, std::string> where_;      // tensor -> file
    std::map<std::string, std::unique_ptr<Shard>> shards_;
};

namespace {

// One tensor the family expects in layer N.
struct Spec {
    std::string role;  // "attn.c_attn.weight"
    bool required = true;
    Shape shape;       // from the config
    std::string formula;  // "(E, 3E)"
};

std::string layer_stem(Family family, std::size_t n) {
    const std::string i = std::to_string(n) + ".";
    switch (family) {
    case Family::gpt2: case Family::bloom: return "h." + i;
    case Family::bert: return "encoder.layer." + i;
    case Family::llama: case Family::gpt_neox: return "layers." + i;
    }
    return "";
}

// The tensors of one linear layer NAME: weight (OUT, IN) (or Conv1D's (IN, OUT)) and bias (OUT).
void linear_specs(std::vector<Spec>& out, const std::string& name, Shape weight, const std::string& formula,
                  bool bias, std::size_t bias_size, const std::string& bias_formula) {
    out.push_back({name + ".weight", true, std::move(weight), formula});
    if (bias) out.push_back({name + ".bias", true, {bias_size}, bias_formula});
}

std::vector<Spec> layer_specs(const LayerConfig& c) {
    const std::size_t e = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
    std::vector<Spec> s;
    switch (c.family) {
    case Family::gpt2:
        linear_specs(s, "ln_1", {e}, "(E)", true, e, "(E)");
        linear_specs(s, "attn.c_attn", {e, 3 * e}, "(E, 3E)", true, 3 * e, "(3E)");
        linear_specs(s, "attn.c_proj", {e, e}, "(E, E)", true, e, "(E)");
        break;
    case Family::bert:
        for (const char* n : {"query", "key", "value"})
            linear_specs(s, std::string("attention.self.") + n, {e, e}, "(E, E)", true, e, "(E)");
        linear_specs(s, "attention.output.dense", {e, e}, "(E, E)", true, e, "(E)");
        break;
    case Family::llama:
        s.push_back({"input_layernorm.weight", true, {e}, "(E)"});
        linear_specs(s, "self_attn.q_proj", {q, e}, "(H*P, E)", c.qkv_bias, q, "(H*P)");
        linear_specs(s, "self_attn.k_proj", {kv, e}, "(G*P, E)", c.qkv_bias, kv, "(G*P)");
        linear_specs(s, "self_attn.v_proj", {kv, e}, "(G*P, E)", c.qkv_bias, kv, "(G*P)");
        linear_specs(s, "self_attn.o_proj", {e, q}, "(E, H*P)", c.o_bias, e, "(E)");
        if (c.qk_norm) {
            s.push_back({"self_attn.q_norm.weight", true, {c.head_dim}, "(P)"});
            s.push_back({"self_attn.k_norm.weight", true, {c.head_dim}, "(P)"});
        }
        break;
    case Family::gpt_neox: case Family::bloom: {
        const std::string a = c.family == Family::bloom ? "self_attention." : "attention.";
        linear_specs(s, "input_layernorm", {e}, "(E)", true, e, "(E)");
        linear_specs(s, a + "query_key_value", {3 * e, e}, "(3E, E)", c.qkv_bias, 3 * e, "(3E)");
        linear_specs(s, a + "dense", {e, e}, "(E, E)", c.o_bias, e, "(E)");
        break;
    }
    }
    return s;
}

// The model's prefix ("transformer.", "model.", "" ...): what comes before STEM + ROLE in NAMES.
std::optional<std::string> find_prefix(const std::map<std::string, std::string>& names, const std::string& tail) {
    for (const auto& [name, file] : names) {
        if (name.size() < tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail) != 0) continue;
        const std::string prefix = name.substr(0, name.size() - tail.size());
        if (prefix.empty() || prefix.back() == '.') return prefix;
    }
    return std::nullopt;
}

}  // namespace

namespace {

json read_config(const std::string& dir) {
    const std::string config_path = (fs::path(dir) / "config.json").string();
    if (!fs::is_directory(dir)) fail(dir, "not a checkpoint folder (config.json and model.safetensors)");
    const FileBytes config_bytes = FileBytes::open(config_path);
    try {
        return json::parse(config_bytes.bytes());
    } catch (const json::exception& e) {
        fail(config_path, std::string("not valid JSON: ") + e.what());
    }
}

// Layer N of an opened checkpoint: its tensors found and their shapes checked.
CheckpointLayer resolve_layer(const std::string& dir, const json& config, std::shared_ptr<CheckpointFiles> files,
                              std::size_t layer) {
    CheckpointLayer out;
    out.dir = dir;
    out.config = read_layer_config(config, (fs::path(dir) / "config.json").string(), layer);
    out.files = std::move(files);
    const std::vector<Spec> specs = layer_specs(out.config);
    const std::string stem = layer_stem(out.config.family, layer);
    const auto prefix = find_prefix(out.files->names(), stem + specs.front().role);
    if (!prefix)
        fail(dir, "no tensor '" + stem + specs.front().role + "' (with any prefix) for layer " + std::to_string(layer) +
                      " of this " + out.config.model_type + " checkpoint");
    for (const Spec& spec : specs) {
        const std::string name = *prefix + stem + spec.role;
        if (!out.files->names().count(name)) {
            if (!spec.required) continue;
            fail(dir, "missing tensor '" + name + "' " + spec.formula);
        }
        const SafetensorsIndex::Tensor& t = out.files->meta(name);
        if (t.shape != spec.shape)
            throw ShapeError(dir + ": " + name + " has shape " + shape_string(t.shape) + " but config.json gives " +
                             spec.formula + " = " + shape_string(spec.shape));
        out.tensors.push_back({spec.role, name, out.files->names().at(name), t.dtype, t.shape});
    }
    return out;
}

const char* norm_name(NormKind n) {
    switch (n) {
    case NormKind::none: return "none";
    case NormKind::layer_norm: return "LayerNorm";
    case NormKind::rms_norm: return "RMSNorm";
    }
    return "";
}

}  // namespace

std::string describe_layer(const LayerConfig& c) {
    std::ostringstream o;
    if (c.norm != NormKind::none) o << norm_name(c.norm) << " (eps " << format_number(c.norm_eps) << ") -> ";
    o << "q/k/v projections";
    if (c.family == Family::gpt2) o << " (Conv1D c_attn, transposed)";
    if (c.family == Family::gpt_neox || c.family == Family::bloom) o << " (fused query_key_value, per head)";
    o << " -> " << c.heads << " heads of " << c.head_dim;
    if (c.kv_heads != c.heads) o << " sharing " << c.kv_heads << " kv heads";
    if (c.qk_norm) o << " -> q_norm/k_norm RMSNorm per head";
    if (c.rotary) o << " -> rotary on " << c.rotary->dims << " of " << c.head_dim << " dims";
    o << " -> softmax(q k^T * " << format_number(c.scale);
    if (c.alibi) o << " + ALiBi";
    o << ")";
    if (c.causal) o << ", causal";
    if (c.window) o << ", sliding window " << *c.window;
    o << " -> output projection";
    return o.str();
}

CheckpointLayer open_checkpoint_layer(const std::string& dir, std::size_t layer) {
    const json config = read_config(dir);
    read_layer_config(config, (fs::path(dir) / "config.json").string(), layer);  // config errors first
    return resolve_layer(dir, config, CheckpointFiles::open(dir), layer);
}

bool is_checkpoint_path(const std::string& path) {
    const fs::path p(path);
    return (fs::is_directory(p) && fs::exists(p / "config.json")) || p.extension() == ".safetensors";
}

json checkpoint_info_json(const std::string& path) {
    auto tensor_json = [](const std::string& name, const std::string& dtype, const Shape& shape, const std::string& file) {
        return json{{"name", name}, {"dtype", dtype}, {"shape", shape}, {"file", file}};
    };
    json out{{"path", path}};
    if (!fs::is_directory(path)) {  // one .safetensors file, no config: its tensors
        const auto files = CheckpointFiles::open(path);
        out["tensors"] = json::array();
        for (const auto& [name, file] : files->names()) {
            const auto& t = files->meta(name);
            out["tensors"].push_back(tensor_json(name, t.dtype, t.shape, file));
        }
        return out;
    }
    const json config = read_config(path);
    const LayerConfig first = read_layer_config(config, (fs::path(path) / "config.json").string(), 0);
    const auto files = CheckpointFiles::open(path);
    out.update({{"model_type", first.model_type}, {"layers", first.layers}, {"hidden", first.hidden},
                {"heads", first.heads}, {"kv_heads", first.kv_heads}, {"head_dim", first.head_dim},
                {"config", first.values}, {"layer", json::array()}});
    for (std::size_t n = 0; n < first.layers; ++n) {
        const CheckpointLayer layer = resolve_layer(path, config, files, n);
        json tensors = json::array();
        for (const StoredTensor& t : layer.tensors) tensors.push_back(tensor_json(t.name, t.dtype, t.shape, t.file));
        out["layer"].push_back({{"index", n}, {"tensors", tensors}, {"model_plan", describe_layer(layer.config)}});
    }
    return out;
}

std::string checkpoint_info(const std::string& path) {
    const json info = checkpoint_info_json(path);
    std::ostringstream o;
    auto tensor_line = [&](const json& t, bool file) {
        o << "  " << t["name"].get<std::string>() << "  " << t["dtype"].get<std::string>() << " "
          << shape_string(t["shape"].get<Shape>());
        if (file) o << "  (" << t["file"].get<std::string>() << ")";
        o << "\n";
    };
    if (!info.contains("layer")) {
        o << path << ": safetensors, " << info["tensors"].size() << " tensors (no config.json: a checkpoint is read from its folder)\n";
        for (const json& t : info["tensors"]) tensor_line(t, false);
        return o.str();
    }
    o << path << ": " << info["model_type"].get<std::string>() << ", " << info["layers"] << " layers, hidden "
      << info["hidden"] << ", " << info["heads"] << " heads, " << info["kv_heads"] << " kv heads, head dim "
      << info["head_dim"] << "\n";
    o << "  config: " << info["config"].dump() << "\n";
    for (const json& layer : info["layer"]) {
        o << "layer " << layer["index"] << ":\n";
        for (const json& t : layer["tensors"]) tensor_line(t, true);
        o << "  plan of layer " << layer["index"] << ": " << layer["model_plan"].get<std::string>() << "\n";
    }
    return o.str();
}

// ---- layout ---------------------------------------------------------------------------------

namespace {

// Columns [C0, C1) of W (R, C), transposed: (C1 - C0, R). GPT-2's Conv1D stores (in, out).
template <class T>
Array<T> columns_transposed(const Array<T>& w, std::size_t c0, std::size_t c1) {
    const std::size_t rows = w.shape()[0], cols = w.shape()[1];
    Array<T> out = Array<T>::from_shape({c1 - c0, rows});
    for (std::size_t c = c0; c < c1; ++c)
        for (std::size_t r = 0; r < rows; ++r) out(c - c0, r) = w.data()[r * cols + c];
    return out;
}

// Elements [B, E) of a 1-D bias.
template <class T>
Array<T> slice(const Array<T>& b, std::size_t begin, std::size_t end) {
    Array<T> out = Array<T>::from_shape({end - begin});
    std::copy(b.begin() + static_cast<std::ptrdiff_t>(begin), b.begin() + static_cast<std::ptrdiff_t>(end), out.begin());
    return out;
}

// NeoX / BLOOM fused rows (3E, ...) laid out per head as [q_h; k_h; v_h], each P rows: the
// WHICH-th (0 q, 1 k, 2 v) block of every head, stacked: (H*P, ...). Works for the weight
// (3E, E) and the bias (3E).
template <class T>
Array<T> head_interleaved(const Array<T>& fused, std::size_t heads, std::size_t p, std::size_t which) {
    const std::size_t row = fused.dimension() == 2 ? fused.shape()[1] : 1;
    Shape shape(fused.shape().begin(), fused.shape().end());
    shape[0] = heads * p;
    Array<T> out = Array<T>::from_shape(shape);
    for (std::size_t h = 0; h < heads; ++h) {
        const T* src = fused.data() + (h * 3 * p + which * p) * row;
        std::copy(src, src + p * row, out.data() + h * p * row);
    }
    return out;
}

// Reads the checkpoint's tensors by role.
template <class T>
struct RoleReader {
    const CheckpointLayer& layer;
    std::vector<std::string>& names;

    const StoredTensor* find(const std::string& role) const {
        for (const StoredTensor& t : layer.tensors)
            if (t.role == role) return &t;
        return nullptr;
    }
    Array<T> get(const std::string& role) const {
        const StoredTensor* t = find(role);
        names.push_back(t->name);
        return layer.files->template read<T>(t->name);
    }
    std::optional<Array<T>> maybe(const std::string& role) const {
        if (!find(role)) return std::nullopt;
        return get(role);
    }
};

template <class T>
void load_gpt2(const RoleReader<T>& r, const LayerConfig& c, LayerWeights<T>& w) {
    const std::size_t e = c.hidden;
    const Array<T> qkv = r.get("attn.c_attn.weight");  // Conv1D (E, 3E): y = x W + b
    const Array<T> bias = r.get("attn.c_attn.bias");
    w.attn.w_q = columns_transposed(qkv, 0, e);
    w.attn.w_k = columns_transposed(qkv, e, 2 * e);
    w.attn.w_v = columns_transposed(qkv, 2 * e, 3 * e);
    w.attn.b_q = slice(bias, 0, e), w.attn.b_k = slice(bias, e, 2 * e), w.attn.b_v = slice(bias, 2 * e, 3 * e);
    const Array<T> proj = r.get("attn.c_proj.weight");
    w.attn.w_o = columns_transposed(proj, 0, e);
    w.attn.b_o = r.get("attn.c_proj.bias");
    w.norm_weight = r.get("ln_1.weight");
    w.norm_bias = r.get("ln_1.bias");
}

template <class T>
void load_fused_per_head(const RoleReader<T>& r, const LayerConfig& c, LayerWeights<T>& w) {
    const std::string a = c.family == Family::bloom ? "self_attention." : "attention.";
    const Array<T> fused = r.get(a + "query_key_value.weight");
    w.attn.w_q = head_interleaved(fused, c.heads, c.head_dim, 0);
    w.attn.w_k = head_interleaved(fused, c.heads, c.head_dim, 1);
    w.attn.w_v = head_interleaved(fused, c.heads, c.head_dim, 2);
    if (const auto bias = r.maybe(a + "query_key_value.bias")) {
        w.attn.b_q = head_interleaved(*bias, c.heads, c.head_dim, 0);
        w.attn.b_k = head_interleaved(*bias, c.heads, c.head_dim, 1);
        w.attn.b_v = head_interleaved(*bias, c.heads, c.head_dim, 2);
    }
    w.attn.w_o = r.get(a + "dense.weight");
    w.attn.b_o = r.maybe(a + "dense.bias");
    w.norm_weight = r.get("input_layernorm.weight");
    w.norm_bias = r.get("input_layernorm.bias");
}

template <class T>
void load_separate(const RoleReader<T>& r, const LayerConfig& c, LayerWeights<T>& w) {
    const bool bert = c.family == Family::bert;
    const std::string q = bert ? "attention.self.query" : "self_attn.q_proj";
    const std::string k = bert ? "attention.self.key" : "self_attn.k_proj";
    const std::string v = bert ? "attention.self.value" : "self_attn.v_proj";
    const std::string o = bert ? "attention.output.dense" : "self_attn.o_proj";
    w.attn.w_q = r.get(q + ".weight"), w.attn.b_q = r.maybe(q + ".bias");
    w.attn.w_k = r.get(k + ".weight"), w.attn.b_k = r.maybe(k + ".bias");
    w.attn.w_v = r.get(v + ".weight"), w.attn.b_v = r.maybe(v + ".bias");
    w.attn.w_o = r.get(o + ".weight"), w.attn.b_o = r.maybe(o + ".bias");
    if (bert) return;
    w.norm_weight = r.get("input_layernorm.weight");
    w.q_norm = r.maybe("self_attn.q_norm.weight");
    w.k_norm = r.maybe("self_attn.k_norm.weight");
}

}  // namespace

template <class T>
LayerWeights<T> load_layer_weights(const CheckpointLayer& layer) {
    LayerWeights<T> w;
    w.attn.scheme = layer.config.model_type;
    w.attn.source = layer.dir;
    const RoleReader<T> r{layer, w.attn.names};
    switch (layer.config.family) {
    case Family::gpt2: load_gpt2(r, layer.config, w); break;
    case Family::bert: case Family::llama: load_separate(r, layer.config, w); break;
    case Family::gpt_neox: case Family::bloom: load_fused_per_head(r, layer.config, w); break;
    }
    return w;
}

template <class T>
PositionStages<T> positions_for_layer(const LayerConfig& c, const LayerWeights<T>& w, bool input_normed) {
    PositionStages<T> p;
    if (!input_normed && c.norm != NormKind::none) {
        p.norm = c.norm;
        p.norm_weight = w.norm_weight->data();
        p.norm_bias = w.norm_bias ? w.norm_bias->data() : nullptr;
        p.norm_eps = c.norm_eps;
    }
    if (w.q_norm && w.k_norm) {
        p.q_norm = w.q_norm->data();
        p.k_norm = w.k_norm->data();
        p.qk_norm_eps = c.norm_eps;
    }
    p.rotary = c.rotary;
    if (c.alibi) p.alibi = alibi_slopes(c.heads);
    p.visibility.causal = c.causal;
    p.visibility.window = c.window;
    p.description = c.model_type + " layer " + std::to_string(c.layer) + " of " + std::to_string(c.layers) + ": " +
                    describe_layer(c) + (input_normed ? " (input already normed)" : "");
    return p;
}

template PositionStages<float> positions_for_layer<float>(const LayerConfig&, const LayerWeights<float>&, bool);
template PositionStages<double> positions_for_layer<double>(const LayerConfig&, const LayerWeights<double>&, bool);
template LayerWeights<float> load_layer_weights<float>(const CheckpointLayer&);
template LayerWeights<double> load_layer_weights<double>(const CheckpointLayer&);

}  // namespace attntrace
