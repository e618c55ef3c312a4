// Opening a source and reading its configuration (model_source.hpp).
#include "model_source.hpp"

#include "attntrace/io/gguf.hpp"
#include "gguf_source.hpp"
#include "safetensors_source.hpp"

namespace attntrace {

std::shared_ptr<ModelSource> open_source(const std::string& path) {
    if (is_gguf_path(path)) return std::make_shared<GgufSource>(path);
    return std::make_shared<SafetensorsSource>(path);
}

LayerConfig layer_config(ModelSource& source, std::size_t layer) {
    const auto& names = source.key_names();
    LayerConfig c = read_layer_config(source.config(), source.config_name(), layer, names.empty() ? nullptr : &names);
    source.adjust(c);
    return c;
}

ModelConfig model_config(ModelSource& source) {
    const auto& names = source.key_names();
    ModelConfig m = read_model_config(source.config(), source.config_name(), names.empty() ? nullptr : &names);
    for (LayerConfig& c : m.layers) source.adjust(c);
    return m;
}

}  // namespace attntrace
