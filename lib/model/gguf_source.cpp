// A GGUF file as a model source (gguf_source.hpp).
#include "gguf_source.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <system_error>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/ggml_types.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"

namespace attntrace {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw InputError(file + ": " + what); }

// The family whose GGUF table reads architecture ARCH, and its entry; or nulls.
std::pair<const Family*, const GgufTable::Architecture*> family_of(std::string_view arch) {
    for (const Family* f : families())
        if (const GgufTable* t = f->gguf())
            if (const GgufTable::Architecture* a = t->architecture(arch)) return {f, a};
    return {nullptr, nullptr};
}

std::string gguf_architectures() {
    std::string out;
    for (const Family* f : families())
        if (const GgufTable* t = f->gguf())
            for (const GgufTable::Architecture& a : t->architectures) out += (out.empty() ? "" : ", ") + std::string(a.name);
    return out;
}

std::atomic<GgufProducts> products{GgufProducts::quantized};

}  // namespace

void set_gguf_products(GgufProducts p) { products = p; }
GgufProducts gguf_products() { return products; }

GgufSource::GgufSource(const std::string& path) : files_(GgufFiles::open(path)) {
    for (const GgufTensor& t : files_->tensors())
        names_.emplace(t.name, std::filesystem::path(files_->file_of(t)).filename().string());
    const auto arch = files_->string("general.architecture");
    if (!arch) fail(path, "no general.architecture: not a model (a vocabulary-only file?)");
    const auto [family, entry] = family_of(*arch);
    if (!family)
        fail(path, "architecture '" + std::string(*arch) + "' is not read (attntrace reads " + gguf_architectures() + ")");
    read_config(*family, *arch, entry->model_type);
    if (const GgufTensor* t = files_->tensor("rope_freqs.weight")) {
        rope_factors_.resize(*checked_element_count(t->shape));
        rows(t->name, 0, t->shape.empty() ? 1 : t->shape[0], rope_factors_.data());
    }
}

// config.json's keys from the metadata, through FAMILY's table (gguf_source.hpp).
void GgufSource::read_config(const Family& family, std::string_view arch, std::string_view model_type) {
    const GgufTable& table = *family.gguf();
    config_ = {{"model_type", model_type}};
    auto put = [&](const std::string& key, const std::string& config) {
        key_names_[config] = key;  // so that a missing key is named as the file would spell it
        if (const GgufValue* v = files_->find(key)) config_[config] = GgufFiles::to_json(*v, 64);
    };
    const std::string prefix = std::string(arch) + ".";
    for (const GgufTable::Key& k : table.keys) put(prefix + std::string(k.key), std::string(k.config));
    for (const char* id : {"bos", "eos", "unk", "sep", "pad", "cls", "mask"})
        put("tokenizer.ggml." + std::string(id) + "_token_id", std::string(id) + "_token_id");
    if (const auto type = files_->string(prefix + "rope.scaling.type"); type && *type != "none") {
        config_["rope_scaling"] = {{"rope_type", *type}, {"factor", files_->number(prefix + "rope.scaling.factor").value_or(1.0)}};
        key_names_["rope_scaling"] = prefix + "rope.scaling.type";
    }
    for (const GgufTable::Flag& f : table.flags) config_[std::string(f.key)] = (names_.count(std::string(f.tensor)) != 0) != f.negated;
    if (const GgufTensor* t = files_->tensor(table.token_embedding); t && t->shape.size() == 2)
        config_["vocab_size"] = t->shape[0];
    if (table.derive) table.derive(*files_, arch, config_);
}

void GgufSource::adjust(LayerConfig& c) {
    if (rope_factors_.empty() || !c.rotary) return;
    if (rope_factors_.size() != c.rotary->inv_freq.size())
        fail(path(), "rope_freqs.weight holds " + std::to_string(rope_factors_.size()) + " factors but the rotary has " +
                         std::to_string(c.rotary->inv_freq.size()) + " frequencies");
    for (std::size_t i = 0; i < rope_factors_.size(); ++i) c.rotary->inv_freq[i] /= rope_factors_[i];
}

const GgufTensor& GgufSource::tensor(const std::string& name) const {
    const GgufTensor* t = files_->tensor(name);
    if (!t) fail(path(), "no tensor '" + name + "'");
    return *t;
}

TensorMeta GgufSource::meta(const std::string& name) {
    const GgufTensor& t = tensor(name);
    return {gguf_tensor_type_name(t.type), t.shape};
}

void GgufSource::rows(const std::string& name, std::size_t r0, std::size_t r1, float* out) {
    files_->read_rows(tensor(name), r0, r1, out);
}
void GgufSource::rows(const std::string& name, std::size_t r0, std::size_t r1, double* out) {
    files_->read_rows(tensor(name), r0, r1, out);
}

const void* GgufSource::resident(const std::string& name, std::size_t r0, std::size_t r1, std::size_t element) {
    return element == sizeof(float) ? files_->in_place(tensor(name), r0, r1) : nullptr;
}

std::optional<QuantizedMatrix> GgufSource::quantized(const std::string& name) {
    const GgufTensor& t = tensor(name);
    if (gguf_products() != GgufProducts::quantized || t.shape.size() != 2 || !quantized_gemm_supported(t.type) ||
        t.shape[1] % ggml_block_size(t.type) != 0)
        return std::nullopt;
    const char* at = files_->bytes(t).resident(t.offset, t.nbytes);
    dropper_.ahead_of(t);  // the next tensors' pages mapped while this one is multiplied
    return QuantizedMatrix{t.type, std::string_view(at, t.nbytes), t.shape[0], t.shape[1]};
}

void GgufSource::release(const std::string& name, std::size_t r0, std::size_t r1) { dropper_.drop(tensor(name), r0, r1); }

// ---- PageDropper ----------------------------------------------------------------------------

PageDropper::PageDropper(std::shared_ptr<GgufFiles> files) : queue_(std::make_shared<Queue>()) {
    queue_->files = std::move(files);
    for (const GgufTensor& t : queue_->files->tensors()) queue_->order.push_back(&t);
    std::sort(queue_->order.begin(), queue_->order.end(), [](const GgufTensor* a, const GgufTensor* b) {
        return std::pair(a->file, a->offset) < std::pair(b->file, b->offset);
    });
}

PageDropper::~PageDropper() {
    {
        const std::lock_guard<std::mutex> lock(queue_->mutex);
        queue_->stop = true;
    }
    queue_->wake.notify_one();
}

// The thread, on the first call (--threads 1 starts none); whether it runs.
bool PageDropper::start(std::unique_lock<std::mutex>&) {
    Queue& q = *queue_;
    if (!q.started && read_threads() > 1) {
        q.started = true;
        try {
            std::thread([q = queue_] { serve(q); }).detach();
            q.running = true;
        } catch (const std::system_error&) {  // no thread (ulimit -u): the caller pages its own
        }
    }
    return q.running;
}

void PageDropper::drop(const GgufTensor& t, std::size_t r0, std::size_t r1) {
    Queue& q = *queue_;
    std::unique_lock<std::mutex> lock(q.mutex);
    const std::size_t bytes = t.nbytes;  // at most: a range of rows is less
    if (!start(lock) || q.bytes + bytes > kBehind) {
        lock.unlock();
        return q.files->release(t, r0, r1);
    }
    q.ranges.push_back({&t, r0, r1, bytes, true});
    q.bytes += bytes;
    lock.unlock();
    q.wake.notify_one();
}

void PageDropper::ahead_of(const GgufTensor& t) {
    Queue& q = *queue_;
    std::unique_lock<std::mutex> lock(q.mutex);
    if (!start(lock)) return;
    const auto at = std::lower_bound(q.order.begin(), q.order.end(), &t, [](const GgufTensor* a, const GgufTensor* b) {
        return std::pair(a->file, a->offset) < std::pair(b->file, b->offset);
    });
    q.in_use = std::max(q.in_use, std::pair(t.file, t.offset));
    std::size_t i = std::max<std::size_t>(q.ahead, std::size_t(at - q.order.begin()) + 1), bytes = 0;
    for (; i < q.order.size() && bytes < kAhead && q.order[i]->file == t.file; ++i) {
        if (q.order[i]->offset >= t.offset + t.nbytes + kAhead) break;
        q.ranges.push_back({q.order[i], 0, 0, 0, false});
        bytes += q.order[i]->nbytes;
    }
    q.ahead = std::max(q.ahead, i);
    lock.unlock();
    q.wake.notify_one();
}

void PageDropper::serve(const std::shared_ptr<Queue>& queue) {
    lower_thread_priority();
    Queue& q = *queue;
    std::unique_lock<std::mutex> lock(q.mutex);
    for (;;) {
        q.wake.wait(lock, [&] { return q.stop || !q.ranges.empty(); });
        if (q.stop) return;
        const Range r = q.ranges.front();
        q.ranges.pop_front();
        // A tensor the products have reached is no longer ahead: mapping it now (the thread starved
        // by other processes' load) would bring back pages its caller may have dropped itself.
        if (!r.drop && std::pair(r.tensor->file, r.tensor->offset) <= q.in_use) continue;
        lock.unlock();
        if (r.drop)
            q.files->release(*r.tensor, r.r0, r.r1);  // a page shared with a neighbour is read again if touched
        else
            q.files->bytes(*r.tensor).prefetch(r.tensor->offset, r.tensor->nbytes);
        lock.lock();
        q.bytes -= r.bytes;
    }
}

}  // namespace attntrace
