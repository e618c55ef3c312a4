// libFuzzer target: any bytes as a tokenizer.json (the JSON reader, then every component built
// from its node), and when they make a tokenizer, a few texts through it and its ids back through
// decode.
//
// An attntrace::Error is the documented way to reject a file, or an input the file cannot take
// (a regex PCRE2 gives up on, an id a decoder cannot turn back). Anything else is a bug and must
// crash: another exception, a sanitizer report, or an encoding whose ids or offsets are out of range.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"

namespace {

const char* const kTexts[] = {"Hello world", "  don't  stop\t\n", "Café 我想 🚀 1234", "<s> [CLS] <|endoftext|> a"};

void encode_all(const attntrace::Tokenizer& t) {
    for (const std::string_view text : kTexts) {
        for (const bool special : {true, false}) {
            const attntrace::Encoding e = t.encode(text, special, "text");
            if (e.ids.size() != e.tokens.size() || e.ids.size() != e.offsets.size()) __builtin_trap();
            for (std::size_t i = 0; i < e.ids.size(); ++i)
                if (e.ids[i] >= t.vocab_size() || e.offsets[i].first > e.offsets[i].second || e.offsets[i].second > text.size())
                    __builtin_trap();
            try {
                (void)t.decode(e.ids);
            } catch (const attntrace::Error&) {
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const attntrace::Tokenizer t =
            attntrace::Tokenizer::from_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
        encode_all(t);
    } catch (const attntrace::Error&) {
    }
    return 0;
}
