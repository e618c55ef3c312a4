#pragma once
// The source of a GGUF file (model_source.hpp; the format is io/gguf.hpp): a model written by
// llama.cpp's convert_hf_to_gguf.py (and quantized by llama-quantize), or the first file of a
// split one. Its configuration is its metadata put into config.json's keys by the table of the
// family that reads general.architecture (family.hpp GgufTable):
//   <arch>.<key> per the table                     "llama.attention.head_count" -> num_attention_heads
//   <arch>.rope.scaling.type / .factor             rope_scaling {rope_type, factor}
//   tokenizer.ggml.<bos|eos|unk|sep|pad|cls|mask>_token_id   <...>_token_id
//   the table's flags (tensors present or not)     tie_word_embeddings (no output.weight), biases
//   the token embedding's rows                     vocab_size
// and what llama.cpp adds with a tensor: rope_freqs.weight, the frequency factors of Llama 3's
// rope scaling (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors), divides each
// layer's rotary frequencies (adjust), as llama.cpp's rope does with freq_factors.
// A tensor reads dequantized as ggml dequantizes it, one layer at a time from the mapping; a type
// it cannot read is an InputError naming the tensor and its type when the model is opened.
// Internal to lib/model.
#include <map>
#include <memory>
#include <string>

#include "attntrace/io/gguf.hpp"
#include "family.hpp"
#include "model_source.hpp"

namespace attntrace {

class GgufSource final : public ModelSource {
public:
    explicit GgufSource(const std::string& path);

    const std::string& path() const override { return files_->path(); }
    const std::map<std::string, std::string>& names() override { return names_; }
    TensorMeta meta(const std::string& name) override;
    const nlohmann::json& config() override { return config_; }
    const std::string& config_name() const override { return files_->path(); }
    std::string config_word() const override { return "its metadata"; }
    const std::map<std::string, std::string>& key_names() const override { return key_names_; }
    const GgufFiles* gguf() const override { return files_.get(); }
    void adjust(LayerConfig& c) override;
    void release(const std::string& name, std::size_t r0 = 0, std::size_t r1 = SIZE_MAX) override;
    std::optional<QuantizedMatrix> quantized(const std::string& name) override;

private:
    const GgufTensor& tensor(const std::string& name) const;
    void rows(const std::string& name, std::size_t r0, std::size_t r1, float* out) override;
    void rows(const std::string& name, std::size_t r0, std::size_t r1, double* out) override;
    const void* resident(const std::string& name, std::size_t r0, std::size_t r1, std::size_t element) override;
    void read_config(const Family& family, std::string_view arch, std::string_view model_type);

    std::shared_ptr<GgufFiles> files_;
    std::map<std::string, std::string> names_;      // tensor -> file
    nlohmann::json config_;
    std::map<std::string, std::string> key_names_;  // config.json key -> metadata key
    std::vector<double> rope_factors_;              // rope_freqs.weight, (R/2), or empty
};

}  // namespace attntrace
