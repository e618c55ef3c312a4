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
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attntrace/io/gguf.hpp"
#include "family.hpp"
#include "model_source.hpp"

namespace attntrace {

// The weights' pages paged by a side thread at the least priority (threads.hpp
// lower_thread_priority) instead of by the main thread, where the second worker waited for it
// (docs/performance.md "## GGUF weights"): those of a layer that is done, dropped
// (GgufFiles::release, MADV_DONTNEED; ~4.5 ms of the Q8_0 bench's ~140), and those of the
// tensors that follow one in the file, kAhead bytes of them, mapped ahead (MADV_POPULATE_READ;
// ~6 ms) so that the products' resident() finds them mapped. At most kBehind bytes wait to be
// dropped; past them, or with no thread (--threads 1 starts none: set_read_threads), the caller
// drops its own. The thread is not waited for when the pager goes (a busy machine may leave it
// unscheduled for a while): it holds the files and its queue, pages nothing more, and ends when
// it next runs.
class PageDropper {
public:
    explicit PageDropper(std::shared_ptr<GgufFiles> files);
    ~PageDropper();
    PageDropper(const PageDropper&) = delete;
    PageDropper& operator=(const PageDropper&) = delete;
    void drop(const GgufTensor& t, std::size_t r0, std::size_t r1);
    void ahead_of(const GgufTensor& t);  // maps the tensors after T in the file, kAhead bytes

private:
    struct Range {
        const GgufTensor* tensor;
        std::size_t r0, r1, bytes;
        bool drop;  // else mapped ahead
    };
    struct Queue {  // shared with the thread
        std::shared_ptr<GgufFiles> files;
        std::vector<const GgufTensor*> order;  // the tensors by file and offset
        std::size_t ahead = 0;                 // order[.. ahead) were mapped ahead or asked for
        std::pair<std::size_t, std::size_t> in_use{0, 0};  // (file, offset) of the tensor the products last asked for
        std::mutex mutex;
        std::condition_variable wake;
        std::deque<Range> ranges;
        std::size_t bytes = 0;  // to drop
        bool stop = false, started = false, running = false;
    };
    static constexpr std::size_t kBehind = std::size_t{64} << 20, kAhead = std::size_t{16} << 20;
    bool start(std::unique_lock<std::mutex>& lock);
    static void serve(const std::shared_ptr<Queue>& q);

    std::shared_ptr<Queue> queue_;
};

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
    PageDropper dropper_{files_};                   // after files_, which it shares
};

}  // namespace attntrace
