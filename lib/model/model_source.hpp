#pragma once
// Where a model's tensors are stored: a source. A Hugging Face checkpoint folder (config.json and
// its safetensors files, safetensors_source.hpp) or a GGUF file (gguf_source.hpp). A source
// answers a tensor by the name it has there (its dtype, shape, and its values: read converted to
// float or double, read in place when the file already holds them so, their pages dropped once
// read) and its configuration values, as config.json keys (a GGUF file's metadata through the
// family's table). What a family calls its tensors, and how they are found in a source, is
// resolve.hpp's; the forward pass sees neither. Internal to lib/model.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "attntrace/io/ggml_matmul.hpp"
#include "attntrace/model/checkpoint.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class GgufFiles;

// One tensor as a source stores it.
struct TensorMeta {
    std::string dtype;  // as the file spells it: "BF16" (safetensors), "q4_K" (GGUF)
    Shape shape;        // numpy order
};

class ModelSource {
public:
    virtual ~ModelSource() = default;

    // The folder or file, for messages.
    virtual const std::string& path() const = 0;
    // Every tensor's name and the file holding it.
    virtual const std::map<std::string, std::string>& names() = 0;
    virtual TensorMeta meta(const std::string& name) = 0;

    // The configuration as config.json's keys (InputError when it cannot be read), where it comes
    // from ("DIR/config.json", "FILE.gguf"), and what the shape errors call it ("config.json",
    // "its metadata").
    virtual const nlohmann::json& config() = 0;
    virtual const std::string& config_name() const = 0;
    virtual std::string config_word() const = 0;
    // How config.json's keys are spelt in the source, for messages ({} when as themselves).
    virtual const std::map<std::string, std::string>& key_names() const = 0;
    // A GGUF source's files (the family's GGUF table names its tensors), else null.
    virtual const GgufFiles* gguf() const { return nullptr; }
    // What the source adds to layer C's configuration (a GGUF file's rope frequency factors).
    virtual void adjust(LayerConfig& c) { (void)c; }

    // Rows [R0, R1) of NAME (along its first dim; a 1-D tensor's rows are its elements) into OUT.
    template <class T>
    void read_rows(const std::string& name, std::size_t r0, std::size_t r1, T* out) {
        static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
        rows(name, r0, r1, out);
    }
    // All of NAME into OUT (its element count), its pages dropped once read.
    template <class T>
    void read_into(const std::string& name, T* out) {
        read_rows(name, 0, row_count(name), out);
        release(name);
    }
    template <class T>
    Array<T> read(const std::string& name) {
        Array<T> out = Array<T>::from_shape(meta(name).shape);
        read_into(name, out.data());
        return out;
    }
    // NAME's values read in place when the file already holds them as T (aligned, on a
    // little-endian machine): rows [R0, R1) mapped, a pointer to row R0 valid while the source
    // lives; nullptr when they need converting (read_into them instead). release() drops the pages.
    template <class T>
    const T* in_place(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) {
        static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
        return static_cast<const T*>(resident(name, r0, r1, sizeof(T)));
    }
    // NAME, a 2-D weight (out, in) that a float32 forward multiplies by as its quantized bytes,
    // where they lie (mapped, their pages read in; valid while the source lives): a GGUF tensor of
    // a type quantized_gemm takes, unless gguf_products() is float32; nullopt otherwise (read it
    // converted). release() drops the pages.
    virtual std::optional<QuantizedMatrix> quantized(const std::string& name) {
        (void)name;
        return std::nullopt;
    }
    // Whether in_place(NAME) copies the rows into buffers of the source (WeightPages::read,
    // file_bytes.hpp) rather than pointing into the file's mapping: a caller that reads rows into
    // buffers of its own as it goes (the head's blocks, the chosen experts) should then do so.
    virtual bool copies_in_place(const std::string& name) {
        (void)name;
        return false;
    }
    // Drops the pages of rows [R0, R1) of NAME (all of it by default) from memory, when mapped.
    virtual void release(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) = 0;
    // With nothing in_place'd left unreleased: the source's own buffers for such copies go back to
    // the allocator (tensor/buffer.hpp), whose pool then serves the next large requests with pages
    // already made (after the layers, the head's buffers) instead of fresh ones.
    virtual void free_copies() {}
    // The memory of the source's own buffers that in_place copies of tensors of LENGTHS bytes, in
    // this order and with none staged before, would take (0 where in_place copies nothing).
    virtual std::size_t copies_bytes(const std::vector<std::size_t>& lengths) const {
        (void)lengths;
        return 0;
    }

protected:
    std::size_t row_count(const std::string& name) {
        const Shape shape = meta(name).shape;
        return shape.empty() ? 1 : shape[0];
    }
    virtual void rows(const std::string& name, std::size_t r0, std::size_t r1, float* out) = 0;
    virtual void rows(const std::string& name, std::size_t r0, std::size_t r1, double* out) = 0;
    // In-place values of ELEMENT bytes each (4: float, 8: double), or nullptr.
    virtual const void* resident(const std::string& name, std::size_t r0, std::size_t r1, std::size_t element) = 0;
};

// PATH's source: a .gguf file (or the first of a split one: its header read), else a checkpoint
// folder or a lone .safetensors file (nothing read yet).
std::shared_ptr<ModelSource> open_source(const std::string& path);

// Layer N's configuration in SOURCE (read_layer_config, then ModelSource::adjust), and the whole
// model's (read_model_config, each layer adjusted).
LayerConfig layer_config(ModelSource& source, std::size_t layer);
ModelConfig model_config(ModelSource& source);

}  // namespace attntrace
