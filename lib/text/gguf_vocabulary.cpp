// A GGUF vocabulary read as llama.cpp's llama_vocab::impl::load reads it (src/llama-vocab.cpp at
// 80fb11ac): the model's kind and defaults, the pre-tokenizer's, the tokens and their attributes
// (token types, then the attributes llama.cpp gives tokens by their text: end-of-generation and
// fill-in-the-middle tokens become control tokens, gpt-oss's channel tokens user-defined, Phi-3's
// special tokens rstrip), the special token ids and the add_bos / add_eos flags.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <unordered_map>

#include "attntrace/io/gguf.hpp"
#include "attntrace/tensor/errors.hpp"
#include "gguf_tokenizer.hpp"
#include "tokenizer_impl.hpp"

namespace attntrace::text {
namespace {

std::uint32_t attr_of_type(std::int32_t type) {
    switch (static_cast<GgufTokenType>(type)) {
        case GgufTokenType::unknown: return kAttrUnknown;
        case GgufTokenType::unused: return kAttrUnused;
        case GgufTokenType::normal: return kAttrNormal;
        case GgufTokenType::control: return kAttrControl;
        case GgufTokenType::user_defined: return kAttrUserDefined;
        case GgufTokenType::byte: return kAttrByte;
        default: return 0;  // undefined, or a type llama.cpp does not know
    }
}

// llama.cpp's special ids: the model's default DEFLT (cleared when past the N tokens), replaced by
// the file's GIVEN when that is in range.
std::optional<std::uint32_t> special_id(std::optional<std::uint32_t> deflt, std::optional<std::uint32_t> given, std::size_t n) {
    if (deflt && *deflt >= n) deflt.reset();
    return given && *given < n ? given : deflt;
}

bool contains_any(const std::string& s, std::initializer_list<std::string_view> parts) {
    for (std::string_view p : parts)
        if (s.find(p) != std::string::npos) return true;
    return false;
}

std::string in_quotes(std::string_view s) {
    std::string q(1, '"');
    q += c_escape(s);
    q += '"';
    return q;
}

// The fill-in-the-middle tokens llama.cpp finds by their text when the file names none: of each
// kind the first its token_to_id map (an std::unordered_map) yields becomes a control token.
void find_fim_tokens(const std::vector<std::string>& tokens, const Vocab& vocab, std::vector<std::uint32_t>& attrs,
                     const std::array<std::optional<std::uint32_t>, 6>& ids) {
    static const std::vector<std::vector<std::string_view>> kinds = {
        {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"},
        {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>", "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"},
        {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>", "<|code_middle|>", "<|middle|>"},
        {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
        {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
        {"<|file_sep|>"},
    };
    std::unique_ptr<std::unordered_map<std::string, std::int32_t>> order;  // llama.cpp's map, made only for a tie
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        if (ids[k]) continue;
        std::vector<std::uint32_t> found;
        for (std::string_view text : kinds[k])
            if (const auto id = vocab.find(text)) found.push_back(*id);
        if (found.empty()) continue;
        std::uint32_t pick = found[0];
        if (found.size() > 1) {
            if (!order) {
                order = std::make_unique<std::unordered_map<std::string, std::int32_t>>();
                for (std::size_t i = 0; i < tokens.size(); ++i) (*order)[tokens[i]] = static_cast<std::int32_t>(i);
            }
            for (const auto& [text, id] : *order)
                if (std::find(found.begin(), found.end(), static_cast<std::uint32_t>(id)) != found.end()) {
                    pick = static_cast<std::uint32_t>(id);
                    break;
                }
        }
        attrs[pick] |= kAttrControl;
    }
}

}  // namespace

GgufTokenizer::~GgufTokenizer() = default;

GgufTokenizer::GgufTokenizer(GgufVocabulary v, const std::string& file, Vocab& vocab) : file_(file), vocab_(vocab) {
    if (v.model == "llama") spm_ = true;
    else if (v.model != "gpt2")
        throw InputError(file + ": tokenizer.ggml.model " + in_quotes(v.model) + " is not supported (supported: gpt2, llama)");
    if (!spm_) pre_ = gguf_pre(v.pre, file);
    const std::size_t n = v.tokens.size();
    if (n > 0x7FFFFFFF) throw InputError(file + ": tokenizer.ggml.tokens: " + std::to_string(n) + " tokens, more than llama.cpp's ids hold");
    if (!v.scores.empty() && v.scores.size() < n)
        throw InputError(file + ": tokenizer.ggml.scores: " + std::to_string(v.scores.size()) + " scores for " + std::to_string(n) + " tokens");
    if (!v.token_type.empty() && v.token_type.size() < n)
        throw InputError(file + ": tokenizer.ggml.token_type: " + std::to_string(v.token_type.size()) + " types for " + std::to_string(n) + " tokens");
    tokens_ = std::move(v.tokens);
    for (std::size_t i = 0; i < n; ++i)
        if (tokens_[i].empty()) tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    scores_ = std::move(v.scores);
    scores_.resize(n, 0.0f);
    attrs_.resize(n, kAttrNormal);
    for (std::size_t i = 0; i < n && !v.token_type.empty(); ++i) attrs_[i] = attr_of_type(v.token_type[i]);
    vocab_.assign(std::vector<std::string_view>(tokens_.begin(), tokens_.end()));
    for (std::uint32_t i = 0; i < n; ++i)
        if (const auto first = vocab_.find(tokens_[i]); first != i)
            throw InputError(file + ": tokenizer.ggml.tokens: token " + std::to_string(i) + " " + in_quotes(tokens_[i]) + " repeats token " +
                             std::to_string(*first) + " (llama.cpp refuses the file too)");

    bos_ = special_id(spm_ ? std::optional<std::uint32_t>(1) : pre_.no_bos ? std::nullopt : std::optional<std::uint32_t>(11), v.bos_id, n);
    eos_ = special_id(spm_ ? 2u : 11u, v.eos_id, n);
    add_bos_ = v.add_bos_token.value_or(spm_ || pre_.add_bos);
    add_eos_ = v.add_eos_token.value_or(false);
    add_space_prefix_ = v.add_space_prefix.value_or(spm_);
    if (spm_) pre_.clean_spaces = false;
    build_attributes(v);

    for (std::uint32_t i = 0; i < n; ++i)  // the special tokens for display and token_to_id
        if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
            vocab_.added.push_back({tokens_[i], i, false, false, false, false, (attrs_[i] & (kAttrControl | kAttrUnknown)) != 0});
    vocab_.index_all(file);
    if (!spm_) bpe_ = std::make_unique<GgufBpe>(v.merges, vocab_, pre_.ignore_merges);
    validate_pieces();
}

// llama.cpp makes every token's piece at load (its token-to-piece cache) and refuses a vocabulary
// where one throws: a byte token shorter than "<0x", a BPE token whose bytes decode past U+10FFFF.
void GgufTokenizer::validate_pieces() const {
    for (std::uint32_t i = 0; i < tokens_.size(); ++i) {
        const std::uint32_t a = attrs_[i];
        if (a & (kAttrControl | kAttrUnknown | kAttrUserDefined)) continue;
        if (!(a & kAttrNormal) && (a & kAttrByte) && tokens_[i].size() < 3)
            throw InputError(file_ + ": tokenizer.ggml.tokens: token " + std::to_string(i) + " " + in_quotes(tokens_[i]) +
                             " is a byte token but not <0xNN> (llama.cpp refuses the file too)");
        if (spm_ || !(a & kAttrNormal)) continue;
        const bool high = std::any_of(tokens_[i].begin(), tokens_[i].end(), [](char c) { return static_cast<unsigned char>(c) >= 0xF4; });
        if (!high) continue;
        for (const char32_t c : llama_cpts_from_utf8(tokens_[i]))
            if (c > 0x10FFFF)
                throw InputError(file_ + ": tokenizer.ggml.tokens: token " + std::to_string(i) + " " + in_quotes(tokens_[i]) +
                                 " holds a code point past U+10FFFF (llama.cpp refuses the file too)");
    }
}

void GgufTokenizer::build_attributes(const GgufVocabulary& v) {
    const std::size_t n = tokens_.size();
    auto id_of = [&](std::string_view text) { return vocab_.find(text); };
    find_fim_tokens(tokens_, vocab_, attrs_,
                    {special_id(special_id(std::nullopt, v.fim_pre_id, n), v.prefix_id, n), special_id(special_id(std::nullopt, v.fim_suf_id, n), v.suffix_id, n),
                     special_id(special_id(std::nullopt, v.fim_mid_id, n), v.middle_id, n), special_id(std::nullopt, v.fim_pad_id, n),
                     special_id(std::nullopt, v.fim_rep_id, n), special_id(std::nullopt, v.fim_sep_id, n)});
    for (std::string_view text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
                                  "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                  "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~["})
        if (const auto id = id_of(text)) attrs_[*id] |= kAttrControl;  // end-of-generation tokens
    for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})  // gpt-oss
        if (const auto id = id_of(text)) attrs_[*id] = kAttrUserDefined;
    const bool call = id_of("<|call|>") || id_of("<|calls|>");
    if (const auto end = id_of("<|end|>"); end && call && (id_of("<|return|>") || id_of("<|flush|>")))
        attrs_[*end] = kAttrUserDefined;  // o200k_harmony, solar-open: <|end|> is no end of generation
    if (const auto s = id_of("</s>"); s && id_of("<|tool_response>")) attrs_[*s] = kAttrNormal;  // gemma4, paddleocr

    std::vector<std::uint32_t> special;  // cache_special_tokens, sorted as llama.cpp sorts it
    for (std::uint32_t i = 0; i < n; ++i)
        if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special.push_back(i);
    std::sort(special.begin(), special.end(), [&](std::uint32_t a, std::uint32_t b) { return tokens_[a].size() > tokens_[b].size(); });

    std::string name = v.general_name;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto set = [&](std::string_view text, std::uint32_t attr, bool on) {
        const auto id = id_of(text);
        if (!id) throw InputError(file_ + ": general.name " + in_quotes(v.general_name) + " is Phi-3's, whose tokenizer llama.cpp reads only with a token " +
                                  in_quotes(text) + ", and the vocabulary has none (llama.cpp refuses the file too)");
        attrs_[*id] = on ? attrs_[*id] | attr : attrs_[*id] & ~attr;
    };
    if (contains_any(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) || contains_any(v.architecture, {"nomic-bert-moe", "jina-bert-v3"})) {
        if (const auto mask = id_of("<mask>")) attrs_[*mask] |= kAttrLstrip;
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        for (const std::uint32_t id : special) attrs_[id] |= kAttrRstrip;
        set("</s>", kAttrRstrip, true);
        for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) set(text, kAttrRstrip, false);
    } else if (contains_any(name, {"modern-bert"})) {
        if (const auto mask = id_of("[MASK]")) attrs_[*mask] |= kAttrLstrip;
    }
    for (const std::uint32_t id : special)  // parse_special false: control and unknown tokens stay text
        if (!(attrs_[id] & (kAttrControl | kAttrUnknown))) specials_.push_back(id);
}

TokenStyle GgufTokenizer::style() const {
    TokenStyle s;
    s.scheme = spm_ ? TokenScheme::metaspace : TokenScheme::byte_level;
    s.byte_fallback = spm_;
    return s;
}

}  // namespace attntrace::text

namespace attntrace {
namespace {

// KEY's value when FILE has it, refused unless of TYPE (llama_model_loader's get_key checks the type).
const GgufValue* typed_key(const GgufFiles& file, const std::string& key, GgufType type) {
    const GgufValue* v = file.find(key);
    if (v && v->type != type)
        throw InputError(file.path() + ": " + key + " is of type " + std::string(gguf_type_name(v->type)) + "; llama.cpp reads it only as " +
                         std::string(gguf_type_name(type)));
    return v;
}

// An array KEY of FILE, refused unless its elements are one of ELEMENTS.
const GgufValue* typed_array(const GgufFiles& file, const std::string& key, std::initializer_list<GgufType> elements) {
    const GgufValue* v = typed_key(file, key, GgufType::array);
    if (v && std::find(elements.begin(), elements.end(), v->element) == elements.end())
        throw InputError(file.path() + ": " + key + " is an array of " + std::string(gguf_type_name(v->element)) +
                         ", which llama.cpp does not read there");
    return v;
}

void read_ids(const GgufFiles& file, GgufVocabulary& v) {
    const std::pair<const char*, std::optional<std::uint32_t>*> ids[] = {
        {"bos", &v.bos_id}, {"eos", &v.eos_id}, {"unknown", &v.unk_id}, {"seperator", &v.sep_id}, {"padding", &v.pad_id},
        {"mask", &v.mask_id}, {"eot", &v.eot_id}, {"eom", &v.eom_id}, {"fim_pre", &v.fim_pre_id}, {"fim_suf", &v.fim_suf_id},
        {"fim_mid", &v.fim_mid_id}, {"fim_pad", &v.fim_pad_id}, {"fim_rep", &v.fim_rep_id}, {"fim_sep", &v.fim_sep_id},
        {"prefix", &v.prefix_id}, {"suffix", &v.suffix_id}, {"middle", &v.middle_id}};
    for (const auto& [name, id] : ids) {
        const std::string key = std::string("tokenizer.ggml.") + name + "_token_id";
        if (typed_key(file, key, GgufType::uint32)) *id = static_cast<std::uint32_t>(*file.count(key));
    }
    const std::pair<const char*, std::optional<bool>*> flags[] = {{"add_bos_token", &v.add_bos_token}, {"add_eos_token", &v.add_eos_token},
                                                                  {"add_space_prefix", &v.add_space_prefix},
                                                                  {"remove_extra_whitespaces", &v.remove_extra_whitespaces}};
    for (const auto& [name, flag] : flags) {
        const std::string key = std::string("tokenizer.ggml.") + name;
        if (typed_key(file, key, GgufType::boolean)) *flag = *file.flag(key);
    }
}

std::string string_key(const GgufFiles& file, const std::string& key) {
    return typed_key(file, key, GgufType::string) ? std::string(*file.string(key)) : std::string();
}

}  // namespace

GgufVocabulary read_gguf_vocabulary(const GgufFiles& file) {
    GgufVocabulary v;
    if (!typed_key(file, "tokenizer.ggml.model", GgufType::string))
        throw InputError(file.path() + ": no tokenizer.ggml.model: the file holds no tokenizer");
    v.model = string_key(file, "tokenizer.ggml.model");
    v.pre = string_key(file, "tokenizer.ggml.pre");
    v.general_name = string_key(file, "general.name");
    v.architecture = string_key(file, "general.architecture");
    if (!typed_array(file, "tokenizer.ggml.tokens", {GgufType::string}))
        throw InputError(file.path() + ": no tokenizer.ggml.tokens: the file's tokenizer has no vocabulary");
    for (const std::string_view t : file.strings("tokenizer.ggml.tokens")) v.tokens.emplace_back(t);
    if (typed_array(file, "tokenizer.ggml.scores", {GgufType::float32, GgufType::int32}))
        for (const double s : file.numbers("tokenizer.ggml.scores")) v.scores.push_back(static_cast<float>(s));
    if (typed_array(file, "tokenizer.ggml.token_type", {GgufType::int32}))
        for (const std::int64_t t : file.integers("tokenizer.ggml.token_type")) v.token_type.push_back(static_cast<std::int32_t>(t));
    if (typed_array(file, "tokenizer.ggml.merges", {GgufType::string})) {
        for (const std::string_view m : file.strings("tokenizer.ggml.merges")) v.merges.emplace_back(m);
    } else if (v.model == "gpt2") {
        throw InputError(file.path() + ": no tokenizer.ggml.merges, which a \"gpt2\" tokenizer needs (llama.cpp refuses the file too)");
    }
    read_ids(file, v);
    return v;
}

Tokenizer Tokenizer::from_gguf(GgufVocabulary vocabulary, const std::string& file) {
    auto impl = std::make_unique<Impl>(file, std::string("null"));
    impl->gguf = std::make_unique<text::GgufTokenizer>(std::move(vocabulary), file, impl->vocab);
    impl->style = impl->gguf->style();
    return Tokenizer(std::move(impl));
}

}  // namespace attntrace
