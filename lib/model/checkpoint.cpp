// Hugging Face checkpoints (checkpoint.hpp): config.json, the single or sharded safetensors
// files, layer N's tensors in the library's canonical layout. What differs from family to family
// is in its description (family.hpp, family_*.cpp); this file reads any of them through it.
#include "attntrace/model/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/numbers.hpp"
#include "attntrace/tensor/threads.hpp"
#include "family.hpp"
#include "model_tensors.hpp"
#include "resolve.hpp"
#include "model_source.hpp"

namespace attntrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

// The family whose description reads MODEL_TYPE, or null.
const Family* family_for(const std::string& model_type) {
    for (const Family* f : families()) {
        const auto types = f->model_types();
        if (std::find(types.begin(), types.end(), model_type) != types.end()) return f;
    }
    return nullptr;
}

}  // namespace

std::string supported_model_types() {
    std::string out;
    for (const Family* f : families())
        for (std::string_view type : f->model_types()) out += (out.empty() ? "" : ", ") + std::string(type);
    return out;
}

LayerConfig read_layer_config(const json& config, const std::string& source, std::size_t layer,
                              const std::map<std::string, std::string>* key_names) {
    if (!config.is_object()) fail(source, "config is not a JSON object");
    LayerConfig c;
    c.layer = layer;
    const auto type = config.find("model_type");
    if (type == config.end() || !type->is_string()) fail(source, "missing config key 'model_type'");
    c.model_type = type->get<std::string>();
    c.family = family_for(c.model_type);
    if (!c.family)
        fail(source, "model_type '" + c.model_type + "' is not supported (supported: " + supported_model_types() + ")");
    c.values["model_type"] = c.model_type;
    c.family->read_layer(ConfigReader{config, source, c.values, key_names}, c);
    if (c.heads % c.kv_heads != 0)
        fail(source, std::to_string(c.heads) + " heads cannot share " + std::to_string(c.kv_heads) + " key/value heads");
    if (c.scale == 0) c.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    if (layer >= c.layers)
        fail(source, "layer " + std::to_string(layer) + " does not exist (the model has " + std::to_string(c.layers) +
                         " layers, 0 to " + std::to_string(c.layers - 1) + ")");
    return c;
}

namespace {

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
    if (c.norm != NormKind::none)
        o << norm_name(c.norm) << (c.norm_offset != 0 ? " x (1 + w)" : "") << " (eps " << format_number(c.norm_eps)
          << ") -> ";
    o << "q/k/v projections";
    o << c.family->projections_note();
    o << " -> " << c.heads << " heads of " << c.head_dim;
    if (c.kv_heads != c.heads) o << " sharing " << c.kv_heads << " kv heads";
    if (c.qk_norm) o << " -> q_norm/k_norm RMSNorm " << (c.qk_norm_whole ? "over the projection" : "per head");
    if (c.rotary) o << " -> rotary on " << c.rotary->dims << " of " << c.head_dim << " dims";
    if (c.rotary && !c.rotary->long_inv_freq.empty()) o << " (LongRoPE)";
    o << " -> softmax(";
    if (c.softcap) o << "tanh(";
    o << "q k^T * " << format_number(c.scale);
    if (c.softcap) o << " / " << format_number(*c.softcap) << ") * " << format_number(*c.softcap);
    if (c.alibi) o << " + ALiBi";
    o << ")";
    if (c.causal) o << ", causal";
    if (c.window) o << ", sliding window " << *c.window;
    o << " -> output projection";
    return o.str();
}

CheckpointLayer open_checkpoint_layer(const std::string& path, std::size_t layer) {
    const std::shared_ptr<ModelSource> source = open_source(path);
    return resolve_layer(source, layer_config(*source, layer));  // config errors first
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
    const std::shared_ptr<ModelSource> source = open_source(path);
    if (!fs::is_directory(path)) {  // one .safetensors file, no config: its tensors
        out["tensors"] = json::array();
        for (const auto& [name, file] : source->names()) {
            const TensorMeta t = source->meta(name);
            out["tensors"].push_back(tensor_json(name, t.dtype, t.shape, file));
        }
        return out;
    }
    const LayerConfig first = layer_config(*source, 0);
    out.update({{"model_type", first.model_type}, {"layers", first.layers}, {"hidden", first.hidden},
                {"heads", first.heads}, {"kv_heads", first.kv_heads}, {"head_dim", first.head_dim},
                {"config", first.values}, {"layer", json::array()}, {"model", describe_model(model_config(*source))}});
    for (std::size_t n = 0; n < first.layers; ++n) {
        const CheckpointLayer layer = resolve_layer(source, layer_config(*source, n));
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
    o << "  model: " << info["model"].get<std::string>() << "\n";
    for (const json& layer : info["layer"]) {
        o << "layer " << layer["index"] << ":\n";
        for (const json& t : layer["tensors"]) tensor_line(t, true);
        o << "  plan of layer " << layer["index"] << ": " << layer["model_plan"].get<std::string>() << "\n";
    }
    return o.str();
}

// ---- layout ---------------------------------------------------------------------------------

namespace {

// The shape of one of the parts of a stored tensor of SHAPE that SPEC splits, in the core's
// (out, in) layout (or (out) for a bias).
Shape part_shape(const Shape& shape, const TensorSpec& spec, std::size_t which) {
    const std::size_t parts = spec.feeds.size();
    if (spec.stored == Stored::conv1d && shape.size() == 2) return {shape[1] / parts, shape[0]};
    Shape s = shape;
    s[0] = spec.split.empty() ? s[0] / parts : spec.split[which];
    return s;
}

// Columns [C0, C1) of W (ROWS, COLS), transposed into OUT (C1 - C0, ROWS), 4 rows at a time
// across the columns (for a 64-column task: 4 cache lines read per row, 64 output rows written
// 16 bytes at a time, all in L1). GPT-2's Conv1D stores (in, out). Floats on x86-64 go 4 x 4
// through SSE registers (_MM_TRANSPOSE4_PS, in every x86-64), 4x faster than one at a time.
template <class T>
void columns_transposed(const T* w, std::size_t rows, std::size_t cols, std::size_t c0, std::size_t c1, T* out) {
    std::size_t r0 = 0;
#if defined(__SSE__)
    if constexpr (std::is_same_v<T, float>) {
        for (; r0 + 4 <= rows; r0 += 4) {
            std::size_t c = c0;
            for (; c + 4 <= c1; c += 4) {
                __m128 a0 = _mm_loadu_ps(w + r0 * cols + c), a1 = _mm_loadu_ps(w + (r0 + 1) * cols + c);
                __m128 a2 = _mm_loadu_ps(w + (r0 + 2) * cols + c), a3 = _mm_loadu_ps(w + (r0 + 3) * cols + c);
                _MM_TRANSPOSE4_PS(a0, a1, a2, a3);
                float* o = out + (c - c0) * rows + r0;
                _mm_storeu_ps(o, a0), _mm_storeu_ps(o + rows, a1), _mm_storeu_ps(o + 2 * rows, a2);
                _mm_storeu_ps(o + 3 * rows, a3);
            }
            for (; c < c1; ++c)
                for (std::size_t r = r0; r < r0 + 4; ++r) out[(c - c0) * rows + r] = w[r * cols + c];
        }
    }
#endif
    for (; r0 < rows; ++r0)
        for (std::size_t c = c0; c < c1; ++c) out[(c - c0) * rows + r0] = w[r0 * cols + c];
}

// The part of STORED that feeds SPEC.feeds[WHICH], in the core's (out, in) layout, into OUT. NeoX /
// BLOOM fused rows (3E, ...) are laid out per head as [q_h; k_h; v_h], each P rows: the WHICH-th
// block of every head, stacked (H*P, ...); Conv1D's columns are transposed; else a block of rows.
template <class T>
void part_into(const T* data, const Shape& shape, const TensorSpec& spec, std::size_t which, const LayerConfig& c,
               T* out) {
    const std::size_t parts = spec.feeds.size();
    const std::size_t row = shape.size() == 2 ? shape[1] : 1;
    if (spec.fused == Fused::per_head) {
        const std::size_t p = c.head_dim;
        for (std::size_t h = 0; h < c.heads; ++h) {
            const T* src = data + (h * 3 * p + which * p) * row;
            std::copy(src, src + p * row, out + h * p * row);
        }
        return;
    }
    if (spec.stored == Stored::conv1d && shape.size() == 2) {  // (in, out): columns, transposed
        const std::size_t part = shape[1] / parts;
        return columns_transposed(data, shape[0], shape[1], which * part, (which + 1) * part, out);
    }
    std::size_t first = which * (shape[0] / parts), rows = shape[0] / parts;  // stacked parts of rows
    if (!spec.split.empty()) {
        first = 0, rows = spec.split[which];
        for (std::size_t i = 0; i < which; ++i) first += spec.split[i];
    }
    std::copy(data + first * row, data + (first + rows) * row, out);
}

// Where PARAM of W is read to: its array when it already has SHAPE (the previous layer's, whose
// pages are present), else a new one.
template <class T>
T* slot(LayerWeights<T>& w, Canonical param, const Shape& shape) {
    auto fit = [&](std::optional<Array<T>>& a) {
        if (!a || shape_of(*a) != shape) a = Array<T>::from_shape(shape);
        return a->data();
    };
    auto fit_array = [&](Array<T>& a) {
        if (shape_of(a) != shape) a = Array<T>::from_shape(shape);
        return a.data();
    };
    switch (param) {
    case Canonical::w_q: return fit_array(w.attn.w_q);
    case Canonical::b_q: return fit(w.attn.b_q);
    case Canonical::w_k: return fit_array(w.attn.w_k);
    case Canonical::b_k: return fit(w.attn.b_k);
    case Canonical::w_v: return fit_array(w.attn.w_v);
    case Canonical::b_v: return fit(w.attn.b_v);
    case Canonical::w_o: return fit(w.attn.w_o);
    case Canonical::b_o: return fit(w.attn.b_o);
    case Canonical::norm_weight: return fit(w.norm_weight);
    case Canonical::norm_bias: return fit(w.norm_bias);
    case Canonical::q_norm: return fit(w.q_norm);
    case Canonical::k_norm: return fit(w.k_norm);
    default: throw std::logic_error("not an attention parameter");  // attention_tensors never feeds one
    }
}

bool is_norm(Canonical p) {
    return p == Canonical::norm_weight || p == Canonical::norm_bias || p == Canonical::q_norm || p == Canonical::k_norm;
}

// W's rows (ROWS, ROW) as convert_hf_to_gguf.py permuted them for llama.cpp's rotary
// (conversion/llama.py LlamaModel.permute: each head's P rows, as (2, P/2), stored as (P/2, 2))
// put back in the Hugging Face order, in place: Hugging Face's row h P + s P/2 + i is the
// stored row h P + 2 i + s.
template <class T>
void unpermute_rotary(T* w, std::size_t rows, std::size_t row, std::size_t heads) {
    const std::size_t p = rows / heads, half = p / 2;
    std::vector<T> head(p * row);
    for (std::size_t h = 0; h < heads; ++h) {
        T* at = w + h * p * row;
        std::copy(at, at + p * row, head.begin());
        for (std::size_t i = 0; i < half; ++i)
            for (std::size_t s = 0; s < 2; ++s) std::copy_n(head.begin() + (2 * i + s) * row, row, at + (s * half + i) * row);
    }
}

// SPEC's tensor, one parameter stored as the core wants it, read into its slot of W.
template <class T>
void read_whole(const CheckpointLayer& layer, const TensorSpec& spec, const StoredTensor& stored, LayerWeights<T>& w) {
    T* out = slot(w, spec.feeds.front(), stored.shape);
    layer.files->read_into(stored.name, out);
    add_offset(spec, out, stored.shape);  // Gemma's norms: 1 + w
    if (!spec.rotary_permuted) return;
    const Canonical p = spec.feeds.front();
    const std::size_t heads = p == Canonical::w_q || p == Canonical::b_q ? layer.config.heads : layer.config.kv_heads;
    unpermute_rotary(out, stored.shape[0], stored.shape.size() == 2 ? stored.shape[1] : 1, heads);
}

// SPEC's tensor, fused (q, k and v) or stored (in, out), split into W's parameters.
template <class T>
void read_parts(const CheckpointLayer& layer, const TensorSpec& spec, const StoredTensor& stored, LayerWeights<T>& w) {
    // Read in place when the file holds T already (a float32 checkpoint), else converted.
    std::optional<Array<T>> converted;
    const T* data = layer.files->template in_place<T>(stored.name);
    if (!data) data = converted.emplace(layer.files->template read<T>(stored.name)).data();
    std::vector<T*> parts;
    for (std::size_t i = 0; i < spec.feeds.size(); ++i)
        parts.push_back(slot(w, spec.feeds[i], part_shape(stored.shape, spec, i)));
    if (spec.stored == Stored::conv1d && stored.shape.size() == 2 && spec.fused != Fused::per_head) {
        // Transposed in blocks of 64 columns, as many tasks as the read workers can share.
        constexpr std::size_t chunk = 64;
        const std::size_t rows = stored.shape[0], part = stored.shape[1] / parts.size();
        const std::size_t per_part = (part + chunk - 1) / chunk;
        parallel_for(parts.size() * per_part, read_threads(), [&](std::size_t task, std::size_t) {
            const std::size_t i = task / per_part, c0 = i * part + task % per_part * chunk;
            const std::size_t c1 = std::min(c0 + chunk, (i + 1) * part);
            columns_transposed(data, rows, stored.shape[1], c0, c1, parts[i] + (c0 - i * part) * rows);
        });
    } else {
        parallel_for(parts.size(), read_threads(), [&](std::size_t i, std::size_t) {
            part_into(data, stored.shape, spec, i, layer.config, parts[i]);  // q, k and v on the read workers
        });
    }
    if (!converted) layer.files->release(stored.name);
}

// SPEC's stacked q, k, v (GPT-2's c_attn (E, 3E), Phi-3's qkv_proj) or its output projection
// pointed at where the file holds them as T, instead of copied: true when it could be.
template <class T>
bool point_in_place(const CheckpointLayer& layer, const TensorSpec& spec, const StoredTensor& stored, LayerWeights<T>& w) {
    if (stored.shape.size() != 2 || spec.fused == Fused::per_head || spec.rotary_permuted || spec.offset != 0) return false;
    const std::vector<Canonical>& f = spec.feeds;
    const bool qkv = f.size() == 3 && f[0] == Canonical::w_q && f[1] == Canonical::w_k && f[2] == Canonical::w_v;
    const bool o = f.size() == 1 && f[0] == Canonical::w_o;
    if (!qkv && !o) return false;
    const T* data = layer.files->template in_place<T>(stored.name);
    if (!data) return false;
    const bool conv1d = spec.stored == Stored::conv1d;
    if (o) {
        const Shape shape = part_shape(stored.shape, spec, 0);  // (out, in)
        w.attn.w_o.reset();
        w.attn.w_o_in_place = WeightInPlace<T>{data, shape[0], shape[1], conv1d};
        return true;
    }
    const Shape q = part_shape(stored.shape, spec, 0), k = part_shape(stored.shape, spec, 1);  // (out, in)
    w.attn.in_proj = StackedInProj<T>{data, q[0], k[0], part_shape(stored.shape, spec, 2)[0], q[1], conv1d, {}};
    w.attn.w_q = Array<T>{}, w.attn.w_k = Array<T>{}, w.attn.w_v = Array<T>{};
    return true;
}

// A stored tensor of the in-projections kept quantized: its rows are columns [COLUMN, COLUMN + rows)
// of the stacked projection, each head's P of them permuted for llama.cpp's rotary when HEADS > 0.
struct QuantizedPart {
    QuantizedMatrix w;
    std::size_t column = 0, heads = 0;
};

// SPEC's weight as its quantized bytes where a float32 forward multiplies by them (ModelSource::quantized).
template <class T>
std::optional<QuantizedMatrix> quantized_weight(const CheckpointLayer& layer, const TensorSpec& spec,
                                                const StoredTensor& stored) {
    if constexpr (!std::is_same_v<T, float>) return std::nullopt;
    if (stored.shape.size() != 2 || spec.fused == Fused::per_head || spec.offset != 0 || spec.stored == Stored::conv1d)
        return std::nullopt;
    return layer.files->quantized(stored.name);
}

bool in_projection(Canonical c) { return c == Canonical::w_q || c == Canonical::w_k || c == Canonical::w_v; }

// Y's columns [C, C + H*P) (ROWS rows at LDY), computed with W_q's (or W_k's) rows as
// convert_hf_to_gguf.py permuted them, put in the Hugging Face order (unpermute_rotary's).
void unpermute_columns(float* y, std::size_t rows, std::size_t ldy, std::size_t c, std::size_t width,
                       std::size_t heads) {
    const std::size_t p = width / heads, half = p / 2;
    std::vector<float> head(p);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t h = 0; h < heads; ++h) {
            float* at = y + r * ldy + c + h * p;
            std::copy_n(at, p, head.begin());
            for (std::size_t i = 0; i < half; ++i)
                for (std::size_t s = 0; s < 2; ++s) at[s * half + i] = head[2 * i + s];
        }
}

// Y (N, q + k + v rows) at LDY := X (N, E) · [W_q; W_k; W_v]ᵀ over PARTS, X quantized once for each dot type.
void quantized_in_projection(const std::vector<QuantizedPart>& parts, const float* x, std::size_t n, float* y,
                             std::size_t ldy, std::size_t threads) {
    std::optional<QuantizedRows> xq;
    for (const QuantizedPart& part : parts) {
        if (!xq || xq->dot_type() != quantized_dot_type(part.w.type))
            xq = quantize_rows(part.w.type, x, n, part.w.cols, threads);
        quantized_product(part.w, *xq, y + part.column, ldy, threads);
        if (part.heads) unpermute_columns(y, n, ldy, part.column, part.w.rows, part.heads);
    }
}

// W's q, k and v as attn.in_proj's product over their quantized bytes when the file holds every
// one of SPECS' in-projections so: true when it could be.
template <class T>
bool quantize_in_projection(const CheckpointLayer& layer, const std::vector<TensorSpec>& specs, LayerWeights<T>& w) {
    std::vector<QuantizedPart> parts;
    std::size_t rows[3] = {};  // H*P, G*P, G*Pv
    for (const TensorSpec& wanted : specs) {
        if (!in_projection(wanted.feeds.front())) continue;
        const TensorSpec spec = as_stored(*layer.files, *layer.config.family, wanted);
        const auto stored = std::find_if(layer.tensors.begin(), layer.tensors.end(),
                                         [&](const StoredTensor& t) { return t.role == spec.role; });
        const auto q = quantized_weight<T>(layer, spec, *stored);
        if (!q || (spec.rotary_permuted && spec.feeds.size() != 1)) return false;
        const std::size_t first = spec.feeds.front() == Canonical::w_q ? 0 : spec.feeds.front() == Canonical::w_k ? 1 : 2;
        for (std::size_t i = 0; i < spec.feeds.size(); ++i) rows[first + i] = part_shape(stored->shape, spec, i)[0];
        const std::size_t heads = !spec.rotary_permuted ? 0 : first == 0 ? layer.config.heads : layer.config.kv_heads;
        parts.push_back({*q, first, heads});  // the column is set below, from the parts' rows
    }
    if (parts.empty()) return false;
    const std::size_t column[3] = {0, rows[0], rows[0] + rows[1]};
    for (QuantizedPart& part : parts) part.column = column[part.column];
    if constexpr (std::is_same_v<T, float>)
        w.attn.in_proj = StackedInProj<T>{nullptr, rows[0], rows[1], rows[2], parts.front().w.cols, false,
                                          [parts](const T* x, std::size_t n, T* y, std::size_t ldy, std::size_t threads) {
                                              quantized_in_projection(parts, x, n, y, ldy, threads);
                                          }};
    w.attn.w_q = Array<T>{}, w.attn.w_k = Array<T>{}, w.attn.w_v = Array<T>{};
    return true;
}

// SPEC's output projection kept as its quantized bytes (LayerWeights::w_o_quantized): true when it could be.
template <class T>
bool quantize_output_projection(const CheckpointLayer& layer, const TensorSpec& spec, const StoredTensor& stored,
                                LayerWeights<T>& w) {
    if (spec.feeds.size() != 1 || spec.feeds.front() != Canonical::w_o) return false;
    const auto q = quantized_weight<T>(layer, spec, stored);
    if (!q) return false;
    w.w_o_quantized = q;
    w.attn.w_o.reset();
    w.attn.w_o_in_place = WeightInPlace<T>{nullptr, q->rows, q->cols, false};
    return true;
}

}  // namespace

template <class T>
void load_layer_weights(const CheckpointLayer& layer, LayerWeights<T>& w, bool in_place) {
    w.attn.scheme = layer.config.model_type;
    w.attn.source = layer.dir;
    w.attn.names.clear();
    w.attn.in_proj.reset(), w.attn.w_o_in_place.reset(), w.w_o_quantized.reset();
    const Family& family = *layer.config.family;
    const std::vector<TensorSpec> specs = family.attention_tensors(layer.config);
    const bool quantized_in = in_place && quantize_in_projection(layer, specs, w);
    // The projections first, then the norms: the order the trace lists the names in.
    for (const bool norms : {false, true})
        for (const TensorSpec& wanted : specs) {
            if (is_norm(wanted.feeds.front()) != norms) continue;
            const TensorSpec spec = as_stored(*layer.files, family, wanted);
            const auto stored = std::find_if(layer.tensors.begin(), layer.tensors.end(),
                                             [&](const StoredTensor& t) { return t.role == spec.role; });
            w.attn.names.push_back(stored->name);
            if (quantized_in && in_projection(spec.feeds.front())) continue;
            if (in_place && quantize_output_projection(layer, spec, *stored, w)) continue;
            if (in_place && point_in_place(layer, spec, *stored, w)) continue;
            if (spec.feeds.size() == 1 && spec.stored == Stored::linear)
                read_whole(layer, spec, *stored, w);
            else
                read_parts(layer, spec, *stored, w);
        }
}

template <class T>
LayerWeights<T> load_layer_weights(const CheckpointLayer& layer) {
    LayerWeights<T> w;
    load_layer_weights(layer, w);
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
        p.qk_norm_whole = c.qk_norm_whole;
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
template void load_layer_weights<float>(const CheckpointLayer&, LayerWeights<float>&, bool);
template void load_layer_weights<double>(const CheckpointLayer&, LayerWeights<double>&, bool);

}  // namespace attntrace
