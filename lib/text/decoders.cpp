// Decoders (the library's decoders/): ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse, Strip,
// Replace, Sequence. Each rewrites the list of token strings; the tokenizer joins what is left.
#include "attntrace/tensor/errors.hpp"
#include "components.hpp"

namespace attntrace::text {
namespace {

constexpr const char* kSupported = "ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse, Strip, Replace, Sequence";

std::string replace_text(std::string s, std::string_view what, std::string_view with) {
    if (what.empty()) return s;
    std::string out;
    std::size_t at = 0;
    for (std::size_t hit; (hit = s.find(what, at)) != std::string::npos; at = hit + what.size()) out.append(s, at, hit - at).append(with);
    return out.append(s, at);
}

// Bytes to text as Rust's String::from_utf8_lossy: each maximal invalid sequence becomes U+FFFD.
std::string lossy_utf8(std::string_view bytes) {
    std::string out;
    for (std::size_t i = 0; i < bytes.size();) {
        const auto bad = first_invalid_utf8(bytes.substr(i));
        if (!bad) return out.append(bytes.substr(i));
        out.append(bytes.substr(i, *bad));
        i += *bad;
        // The invalid sequence: the longest prefix of a valid sequence, at least one byte.
        const auto b = static_cast<unsigned char>(bytes[i]);
        std::size_t len = 1;
        const std::size_t want = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 1;
        // second byte ranges that cannot continue (E0 80, ED A0, F0 80, F4 90) end the sequence at once
        auto second_ok = [&](unsigned char c) {
            if ((c & 0xC0) != 0x80) return false;
            if (b == 0xE0) return c >= 0xA0;
            if (b == 0xED) return c < 0xA0;
            if (b == 0xF0) return c >= 0x90;
            if (b == 0xF4) return c < 0x90;
            return true;
        };
        if (want > 1 && i + 1 < bytes.size() && second_ok(static_cast<unsigned char>(bytes[i + 1]))) {
            len = 2;
            while (len < want && i + len < bytes.size() && (static_cast<unsigned char>(bytes[i + len]) & 0xC0) == 0x80) ++len;
        }
        out += "\xEF\xBF\xBD";
        i += len;
    }
    return out;
}

struct ByteLevel final : Decoder {
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::string bytes;
        for (const std::string& t : tokens) {
            const std::size_t start = bytes.size();
            bool all = true;
            for (std::size_t i = 0; i < t.size() && all;) {
                const auto [c, len] = decode_utf8(t, i);
                const int b = byte_level_byte(c);
                if (b < 0) all = false;
                else bytes += static_cast<char>(b);
                i += len;
            }
            if (!all) bytes.resize(start), bytes += t;
        }
        tokens.assign(1, lossy_utf8(bytes));
    }
};

struct Metaspace final : Decoder {
    std::string replacement;
    bool prepend = true;
    explicit Metaspace(Json n) : replacement(n.get("replacement").str("decoder.replacement")) {
        Json s = n.get("prepend_scheme"), a = n.get("add_prefix_space");
        if (!s.is_null()) prepend = s.str("decoder.prepend_scheme") != "never";
        if (!a.is_null() && !a.boolean("add_prefix_space")) prepend = false;
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (std::size_t i = 0; i < tokens.size(); ++i)
            tokens[i] = replace_text(tokens[i], replacement, i == 0 && prepend ? "" : " ");
    }
};

struct WordPiece final : Decoder {
    std::string prefix = "##";
    bool cleanup = true;
    explicit WordPiece(Json n) {
        if (Json p = n.get("prefix"); !p.is_null()) prefix = p.str("decoder.prefix");
        if (Json c = n.get("cleanup"); !c.is_null()) cleanup = c.boolean("decoder.cleanup");
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            std::string& t = tokens[i];
            if (i != 0) t = t.compare(0, prefix.size(), prefix) == 0 ? t.substr(prefix.size()) : " " + t;
            if (cleanup) t = clean_up_tokenization(std::move(t), true);
        }
    }
};

struct ByteFallback final : Decoder {
    static int byte_of(const std::string& t) {
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
        int v = 0;
        for (int k = 3; k < 5; ++k) {
            const char c = t[static_cast<std::size_t>(k)];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        return v;
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        std::string bytes;
        auto flush = [&] {
            if (bytes.empty()) return;
            if (!first_invalid_utf8(bytes)) out.push_back(bytes);
            else out.insert(out.end(), bytes.size(), "\xEF\xBF\xBD");
            bytes.clear();
        };
        for (std::string& t : tokens) {
            const int b = byte_of(t);
            if (b >= 0) {
                bytes += static_cast<char>(b);
                continue;
            }
            flush();
            out.push_back(std::move(t));
        }
        flush();
        tokens.swap(out);
    }
};

struct Fuse final : Decoder {
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, all);
    }
};

struct Strip final : Decoder {
    char32_t content;
    std::size_t start, stop;
    explicit Strip(Json n) : content(decode_utf8(n.get("content").str("decoder.content"), 0).first),
                             start(static_cast<std::size_t>(n.get("start").integer("decoder.start"))),
                             stop(static_cast<std::size_t>(n.get("stop").integer("decoder.stop"))) {}
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (std::string& t : tokens) {
            std::vector<std::pair<char32_t, std::size_t>> chars;  // (char, byte offset)
            for (std::size_t i = 0; i < t.size(); i += utf8_length(chars.back().first)) chars.emplace_back(decode_utf8(t, i).first, i);
            std::size_t cut = 0, stop_cut = chars.size();
            while (cut < std::min(start, chars.size()) && chars[cut].first == content) ++cut;
            for (std::size_t k = 0; k < stop && stop_cut > cut && chars[stop_cut - 1].first == content; ++k) --stop_cut;
            const std::size_t from = cut < chars.size() ? chars[cut].second : t.size();
            const std::size_t to = stop_cut < chars.size() ? chars[stop_cut].second : t.size();
            t = t.substr(from, to - from);
        }
    }
};

struct Replace final : Decoder {
    std::string what, with;
    explicit Replace(Json n) : with(n.get("content").str("decoder.content")) {
        Json p = n.get("pattern");
        if (!p.has("String")) throw InputError(n.file() + ": decoder Replace: only a String pattern is supported");
        what = p.get("String").str("decoder.pattern.String");
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (std::string& t : tokens) t = replace_text(std::move(t), what, with);
    }
};

struct Sequence final : Decoder {
    std::vector<std::unique_ptr<Decoder>> parts;
    explicit Sequence(Json n) {
        Json list = n.get("decoders");
        for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_decoder(list[i]));
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (const auto& p : parts)
            if (p) p->decode_chain(tokens);
    }
};

}  // namespace

std::string clean_up_tokenization(std::string s, bool do_not) {
    for (auto [from, to] : {std::pair{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                            {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
        if (do_not || std::string_view(from) != " do not") s = replace_text(std::move(s), from, to);
    return s;
}

std::unique_ptr<Decoder> make_decoder(Json n) {
    if (n.is_null()) return nullptr;
    const std::string type = type_of(n, "decoder");
    if (type == "ByteLevel") return std::make_unique<ByteLevel>();
    if (type == "Metaspace") return std::make_unique<Metaspace>(n);
    if (type == "WordPiece") return std::make_unique<WordPiece>(n);
    if (type == "ByteFallback") return std::make_unique<ByteFallback>();
    if (type == "Fuse") return std::make_unique<Fuse>();
    if (type == "Strip") return std::make_unique<Strip>(n);
    if (type == "Replace") return std::make_unique<Replace>(n);
    if (type == "Sequence") return std::make_unique<Sequence>(n);
    unsupported(n, "decoder", kSupported);
}

}  // namespace attntrace::text
