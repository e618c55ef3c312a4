// The text and JSON forms of an Encoding, or of a text's tokens straight from the tokenizer
// (app/cmd_tokenize.cpp chooses one), written into one buffer flushed as it fills: a 1 MB text is
// 250k tokens, three numbers and two strings each.
#include <algorithm>
#include <array>
#include <cstring>
#include <ostream>
#include <vector>

#include "attntrace/tensor/threads.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "tokenizer_impl.hpp"

namespace attntrace {
namespace {

// An output buffer written through a pointer: room(N) makes N bytes writable at the end, advance(P)
// says where the writing stopped. With a SINK it is flushed there every 256 KiB (a 1 MB text's JSON
// is 7 MB: never held whole), else it grows and take() gives it all.
class alignas(64) Out {  // a cache line of its own: two workers write two side by side
public:
    explicit Out(std::ostream* sink = nullptr) : sink_(sink) {}
    char* room(std::size_t n) {
        if (used_ + n > buf_.size()) {
            if (sink_ && used_ > 0) {
                sink_->write(buf_.data(), static_cast<std::streamsize>(used_));
                used_ = 0;
            }
            if (used_ + n > buf_.size()) buf_.resize(std::max(sink_ ? kChunk : buf_.size() * 2, used_ + n + 4096));
        }
        return buf_.data() + used_;
    }
    void advance(char* end) { used_ = static_cast<std::size_t>(end - buf_.data()); }
    std::string take() {
        buf_.resize(used_);
        return std::move(buf_);
    }
    void flush() {
        if (sink_ && used_ > 0) sink_->write(buf_.data(), static_cast<std::streamsize>(used_));
        used_ = 0;
    }
    void clear() { used_ = 0; }
    std::string_view view() const { return {buf_.data(), used_}; }
    // BYTES written after what is here: straight to the sink (once this buffer's are) when they
    // would not fit.
    void append(std::string_view bytes) {
        if (sink_ && used_ + bytes.size() > kChunk) {
            flush();
            sink_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
            return;
        }
        char* p = room(bytes.size());
        std::memcpy(p, bytes.data(), bytes.size());
        advance(p + bytes.size());
    }

private:
    static constexpr std::size_t kChunk = 256 * 1024;
    std::ostream* sink_;
    std::string buf_;
    std::size_t used_ = 0;
};

constexpr char kPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// X (below 10^8) in decimal as one word, its first digit in the lowest byte, and their count in
// LEN: written with one 8-byte store, kept in a register (not read back from what was written).
std::uint64_t digits8(std::uint32_t x, std::size_t& len) {
    len = x < 10 ? 1 : x < 100 ? 2 : x < 1000 ? 3 : x < 10000 ? 4 : x < 100000 ? 5 : x < 1000000 ? 6 : x < 10000000 ? 7 : 8;
    auto pair = [](std::uint32_t v) {
        std::uint16_t t;
        std::memcpy(&t, kPairs + 2 * v, 2);
        return std::uint64_t(t);
    };
    const std::uint32_t hi = x / 10000, lo = x % 10000;
    const std::uint64_t w = pair(hi / 100) | pair(hi % 100) << 16 | pair(lo / 100) << 32 | pair(lo % 100) << 48;
    return w >> (8 * (8 - len));
}

// V in decimal, two digits at a time from the right (ids and offsets fit 32 bits: no 64-bit division).
char* put_number(char* p, std::uint64_t v) {
    if (v > 0xFFFFFFFFu) {  // never for a tokenizer's numbers; kept correct anyway
        p = put_number(p, v / 1000000000);
        const auto low = static_cast<std::uint32_t>(v % 1000000000);
        for (std::uint32_t scale = 100000000; scale > 0; scale /= 10) *p++ = static_cast<char>('0' + low / scale % 10);
        return p;
    }
    auto x = static_cast<std::uint32_t>(v);
    const int len = x < 10 ? 1 : x < 100 ? 2 : x < 1000 ? 3 : x < 10000 ? 4 : x < 100000 ? 5 : x < 1000000 ? 6 :
                    x < 10000000 ? 7 : x < 100000000 ? 8 : x < 1000000000 ? 9 : 10;
    char* q = p + len;
    while (x >= 100) {
        const std::uint32_t r = x % 100;
        x /= 100;
        q -= 2, q[0] = kPairs[2 * r], q[1] = kPairs[2 * r + 1];
    }
    if (x >= 10) q -= 2, q[0] = kPairs[2 * x], q[1] = kPairs[2 * x + 1];
    else *--q = static_cast<char>('0' + x);
    return p + len;
}

char* put_text(char* p, std::string_view s) {
    std::copy(s.begin(), s.end(), p);
    return p + s.size();
}

enum class Escapes { c, json };
constexpr std::size_t kMaxEscape = 6;  // bytes one input byte may become (\u00XX)

// Which bytes each style writes as they are: printable ASCII and every byte of a multi-byte UTF-8
// character; not the quote in JSON, not the backslash in either.
constexpr std::array<bool, 256> plain_bytes(Escapes style) {
    std::array<bool, 256> plain{};
    for (int b = 0; b < 256; ++b) plain[b] = b >= 0x20 && b != 0x7F && b != '\\' && !(style == Escapes::json && b == '"');
    return plain;
}
constexpr std::array<bool, 256> kPlainC = plain_bytes(Escapes::c), kPlainJson = plain_bytes(Escapes::json);

// S with C-style escapes (\t \n \r \\ \xNN) or JSON's (\t \n \r \\ \" \u00NN).
char* put_escaped(char* p, std::string_view s, Escapes style) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const std::array<bool, 256>& plain = style == Escapes::c ? kPlainC : kPlainJson;
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (plain[b]) {
            *p++ = c;
            continue;
        }
        *p++ = '\\';
        if (c == '\t') *p++ = 't';
        else if (c == '\n') *p++ = 'n';
        else if (c == '\r') *p++ = 'r';
        else if (c == '\\' || c == '"') *p++ = c;
        else if (style == Escapes::c) *p++ = 'x', *p++ = hex[b >> 4], *p++ = hex[b & 15];
        else p = put_text(p, "u00"), *p++ = hex[b >> 4], *p++ = hex[b & 15];
    }
    return p;
}

// The tokens to write, from an Encoding or straight from the tokenizer's own tokens (no Encoding's
// arrays in between): size(), id(i), token(i) (its vocabulary string), begin(i) and end(i).
struct EncodingView {
    const Encoding& e;
    std::size_t size() const { return e.ids.size(); }
    std::uint32_t id(std::size_t i) const { return e.ids[i]; }
    std::string_view token(std::size_t i) const { return e.tokens[i]; }
    std::size_t begin(std::size_t i) const { return e.offsets[i].first; }
    std::size_t end(std::size_t i) const { return e.offsets[i].second; }
};
struct TokensView {
    const text::Tokens& t;
    const text::Vocab& vocab;
    std::size_t size() const { return t.size(); }
    std::uint32_t id(std::size_t i) const { return t[i].id; }
    std::string_view token(std::size_t i) const { return vocab.token(t[i].id).value_or(std::string_view()); }
    std::size_t begin(std::size_t i) const { return t[i].offsets.begin; }
    std::size_t end(std::size_t i) const { return t[i].offsets.end; }
};

// Tokens a chunk when two workers write a list: a chunk's text (100-400 KB) stays in L2.
constexpr std::size_t kChunkTokens = 16384;

// PUT(out, from, to, worker) for tokens [0, N) into OUT, in order: with THREADS >= 2 and more than
// two chunks, two workers write chunks side by side into buffers of their own, which OUT then
// takes in order (the same bytes as one thread writes): 1 MB of mixed scripts' JSON (620k GPT-2
// tokens) in 9.5 ms against 14.6 on one thread (Xeon, 2 cores). Each Out and IdTexts fills a cache
// line of its own: side by side in one line, the two workers' writes made it slower than one thread.
template <class Put>
void put_in_chunks(Out& out, std::size_t n, std::size_t threads, std::array<Out, 2>& buffers, const Put& put) {
    if (threads < 2 || n <= 2 * kChunkTokens) return put(out, 0, n, 0);
    for (std::size_t r0 = 0; r0 < n; r0 += 2 * kChunkTokens) {
        parallel_for(2, 2, [&](std::size_t task, std::size_t) {
            const std::size_t from = std::min(n, r0 + task * kChunkTokens), to = std::min(n, from + kChunkTokens);
            buffers[task].clear();
            put(buffers[task], from, to, task);
        });
        for (Out& b : buffers) out.append(b.view());
    }
}

// The text form's lines of tokens [FROM, TO): index, id, the vocabulary string, the text it covers.
template <class View>
void put_lines(Out& out, const View& e, std::string_view input, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
        const std::size_t begin = e.begin(i), end = e.end(i);
        const std::string_view token = e.token(i);
        const std::string_view covered = input.substr(std::min(begin, input.size()), end > begin ? end - begin : 0);
        char* p = out.room(48 + (token.size() + covered.size()) * kMaxEscape);
        p = put_number(p, i);
        *p++ = '\t';
        p = put_number(p, e.id(i));
        *p++ = '\t';
        p = put_escaped(p, token, Escapes::c);
        *p++ = '\t';
        p = put_escaped(p, covered, Escapes::c);
        *p++ = '\n';
        out.advance(p);
    }
}

template <class View>
void put_encoding_text(Out& out, const View& e, std::string_view input, std::size_t threads = 1) {
    std::array<Out, 2> buffers;
    put_in_chunks(out, e.size(), threads, buffers,
                  [&](Out& o, std::size_t from, std::size_t to, std::size_t) { put_lines(o, e, input, from, to); });
    char* p = put_number(out.room(32), e.size());
    out.advance(put_text(p, e.size() == 1 ? " token\n" : " tokens\n"));
}

// Decimal texts of the ids seen, each made once: a text repeats its common tokens.
class alignas(64) IdTexts {
public:
    char* put(char* p, std::uint32_t id) {
        if (id >= known_.size()) known_.resize(std::max<std::size_t>(id + 1, known_.size() * 2));
        std::uint64_t& k = known_[id];  // up to 7 digits, then their count in the last byte; 0: not made
        if (k == 0) {
            char digits[16];
            const auto n = static_cast<std::size_t>(put_number(digits, id) - digits);
            if (n > 7) return put_number(p, id);
            std::memcpy(&k, digits, n);
            k |= std::uint64_t(n) << 56;
        }
        std::memcpy(p, &k, 8);  // the room asked for covers 8 bytes
        return p + (k >> 56);
    }

private:
    std::vector<std::uint64_t> known_;
};

// The JSON's three lists, each for tokens [FROM, TO) (a comma before every token but the first).
template <class View>
void put_ids(Out& out, const View& e, std::size_t from, std::size_t to, IdTexts& ids) {
    for (std::size_t i = from; i < to; ++i) {
        char* p = out.room(24);
        if (i) p = put_text(p, ", ");
        out.advance(ids.put(p, e.id(i)));
    }
}

template <class View>
void put_tokens(Out& out, const View& e, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
        const std::string_view token = e.token(i);
        char* p = out.room(4 + token.size() * kMaxEscape);
        if (i) p = put_text(p, ", ");
        *p++ = '"';
        p = put_escaped(p, token, Escapes::json);
        *p++ = '"';
        out.advance(p);
    }
}

template <class View>
void put_offsets(Out& out, const View& e, std::size_t from, std::size_t to) {
    std::uint64_t last = 0;  // the previous end's digits (a token mostly begins where one ended)
    std::size_t last_len = 0, last_value = 0;  // last_len 0: none, or 9 digits and more
    auto put = [](char* p, std::size_t v, std::uint64_t& w, std::size_t& len) {
        if (v >= 100000000) return len = 0, put_number(p, v);
        w = digits8(static_cast<std::uint32_t>(v), len);
        std::memcpy(p, &w, 8);
        return p + len;
    };
    for (std::size_t i = from; i < to; ++i) {
        char* p = out.room(64);  // every copy below is of 8 bytes or fewer, fixed sizes
        if (i) std::memcpy(p, ", [", 3), p += 3;
        else *p++ = '[';
        std::uint64_t w;
        std::size_t len;
        if (last_len && e.begin(i) == last_value) std::memcpy(p, &last, 8), p += last_len;
        else p = put(p, e.begin(i), w, len);
        *p++ = ',', *p++ = ' ';
        p = put(p, e.end(i), last, last_len);
        last_value = e.end(i);
        *p++ = ']';
        out.advance(p);
    }
}

template <class View>
void put_encoding_json(Out& out, const View& e, std::size_t threads = 1) {
    std::array<IdTexts, 2> ids;
    std::array<Out, 2> buffers;
    out.advance(put_text(out.room(16), "{\"ids\": ["));
    put_in_chunks(out, e.size(), threads, buffers,
                  [&](Out& o, std::size_t from, std::size_t to, std::size_t w) { put_ids(o, e, from, to, ids[w]); });
    out.advance(put_text(out.room(16), "], \"tokens\": ["));
    put_in_chunks(out, e.size(), threads, buffers,
                  [&](Out& o, std::size_t from, std::size_t to, std::size_t) { put_tokens(o, e, from, to); });
    out.advance(put_text(out.room(16), "], \"offsets\": ["));
    put_in_chunks(out, e.size(), threads, buffers,
                  [&](Out& o, std::size_t from, std::size_t to, std::size_t) { put_offsets(o, e, from, to); });
    out.advance(put_text(out.room(8), "]}\n"));
}

}  // namespace

std::string c_escape(std::string_view s) {
    Out out;
    out.advance(put_escaped(out.room(s.size() * kMaxEscape), s, Escapes::c));
    return out.take();
}

std::string encoding_text(const Encoding& e, std::string_view input) {
    Out out;
    put_encoding_text(out, EncodingView{e}, input);
    return out.take();
}

std::string encoding_json(const Encoding& e) {
    Out out;
    put_encoding_json(out, EncodingView{e});
    return out.take();
}

void write_encoding_text(const Encoding& e, std::string_view input, std::ostream& sink) {
    Out out(&sink);
    put_encoding_text(out, EncodingView{e}, input);
    out.flush();
}

void write_encoding_json(const Encoding& e, std::ostream& sink) {
    Out out(&sink);
    put_encoding_json(out, EncodingView{e});
    out.flush();
}

void Tokenizer::encode_json(std::string_view text, bool add_special_tokens, const std::string& source, std::ostream& sink) const {
    const text::Tokens tokens = impl_->encode_tokens(text, add_special_tokens, source);
    Out out(&sink);
    put_encoding_json(out, TokensView{tokens, impl_->vocab}, thread_count(impl_->threads));
    out.flush();
}

void Tokenizer::encode_text(std::string_view text, bool add_special_tokens, const std::string& source, std::ostream& sink) const {
    const text::Tokens tokens = impl_->encode_tokens(text, add_special_tokens, source);
    Out out(&sink);
    put_encoding_text(out, TokensView{tokens, impl_->vocab}, text, thread_count(impl_->threads));
    out.flush();
}

}  // namespace attntrace
