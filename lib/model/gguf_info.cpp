// `attntrace info` on a GGUF file (checkpoint.hpp gguf_info): what the metadata says of the model
// whatever its architecture, and for one attntrace runs, each layer's plan.
#include <array>
#include <map>
#include <sstream>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/model/checkpoint.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/errors.hpp"
#include "model_source.hpp"

namespace attntrace {

using json = nlohmann::json;

namespace {

// The sizes <arch>.<key> gives, under the names info uses.
json gguf_sizes(const GgufFiles& g, const std::string& arch) {
    json out = json::object();
    for (const auto& [key, name] : std::initializer_list<std::pair<const char*, const char*>>{
             {"block_count", "layers"}, {"embedding_length", "hidden"}, {"attention.head_count", "heads"},
             {"attention.head_count_kv", "kv_heads"}, {"attention.key_length", "head_dim"},
             {"feed_forward_length", "intermediate"}, {"context_length", "context_length"}})
        if (const GgufValue* v = g.find(arch + "." + key)) out[name] = GgufFiles::to_json(*v, 8);
    return out;
}

// Each ggml type's tensor count, parameters and bytes, and whether attntrace reads it.
json gguf_types(const GgufFiles& g) {
    std::map<std::uint32_t, std::array<std::size_t, 3>> by_type;
    for (const GgufTensor& t : g.tensors()) {
        auto& [count, parameters, bytes] = by_type[t.type];
        ++count, parameters += *checked_element_count(t.shape), bytes += t.nbytes;
    }
    json out = json::array();
    for (const auto& [type, n] : by_type)
        out.push_back({{"type", gguf_tensor_type_name(type)}, {"tensors", n[0]}, {"parameters", n[1]}, {"bytes", n[2]},
                       {"read", GgufFiles::readable(type)}});
    return out;
}

json gguf_tokenizer(const GgufFiles& g) {
    json out = json::object();
    if (const auto model = g.string("tokenizer.ggml.model")) out["model"] = std::string(*model);
    if (const auto pre = g.string("tokenizer.ggml.pre")) out["pre"] = std::string(*pre);
    if (const auto n = g.array_size("tokenizer.ggml.tokens")) out["tokens"] = *n;
    if (const auto n = g.array_size("tokenizer.ggml.merges")) out["merges"] = *n;
    for (const char* id : {"bos", "eos"})
        if (const GgufValue* v = g.find("tokenizer.ggml." + std::string(id) + "_token_id"))
            out[std::string(id) + "_token_id"] = GgufFiles::to_json(*v, 1);
    return out;
}

}  // namespace

json gguf_info_json(const std::string& path) {
    const std::shared_ptr<GgufFiles> g = GgufFiles::open(path);
    const std::string arch(g->string("general.architecture").value_or(""));
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < g->file_count(); ++i) bytes += g->bytes(i).bytes().size();
    json out{{"path", path}, {"format", "gguf"}, {"version", g->header().version}, {"files", g->file_count()},
             {"bytes", bytes}, {"architecture", arch}, {"name", std::string(g->string("general.name").value_or(""))},
             {"sizes", gguf_sizes(*g, arch)}, {"tensors", g->tensors().size()}, {"tensor_types", gguf_types(*g)},
             {"tokenizer", gguf_tokenizer(*g)}, {"metadata_keys", g->header().metadata.size()}};
    try {
        const std::shared_ptr<ModelSource> source = open_source(path);
        const ModelConfig m = model_config(*source);
        out["model"] = describe_model(m);
        out["layer"] = json::array();
        for (const LayerConfig& c : m.layers) out["layer"].push_back({{"index", c.layer}, {"model_plan", describe_layer(c)}});
    } catch (const InputError& e) {
        out["model"] = nullptr;
        out["not_run"] = e.what();
    }
    return out;
}

std::string gguf_info(const std::string& path) {
    const json info = gguf_info_json(path);
    std::ostringstream o;
    o << path << ": GGUF v" << info["version"] << ", " << info["architecture"].get<std::string>() << ", "
      << info["tensors"] << " tensors, " << info["bytes"] << " bytes";
    if (info["files"] != 1) o << " in " << info["files"] << " files";
    o << "\n  sizes:";
    for (const char* name : {"layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "context_length"})
        if (info["sizes"].contains(name)) o << " " << name << " " << info["sizes"][name].dump();
    o << "\n  tensor types:";
    for (const json& t : info["tensor_types"])
        o << " " << t["type"].get<std::string>() << " " << t["tensors"] << (t["read"] ? "" : " (not read)");
    o << "\n  tokenizer:";
    const json& tok = info["tokenizer"];
    if (tok.empty()) o << " none";
    for (const char* name : {"model", "pre", "tokens", "merges", "bos_token_id", "eos_token_id"})
        if (tok.contains(name)) o << " " << name << " " << (tok[name].is_string() ? tok[name].get<std::string>() : tok[name].dump());
    o << "\n";
    if (info["model"].is_null()) {
        o << "  not run: " << info["not_run"].get<std::string>() << "\n";
        return o.str();
    }
    o << "  model: " << info["model"].get<std::string>() << "\n";
    for (const json& layer : info["layer"])
        o << "  plan of layer " << layer["index"] << ": " << layer["model_plan"].get<std::string>() << "\n";
    return o.str();
}

}  // namespace attntrace
