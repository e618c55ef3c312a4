// Tokens as a reader sees them (token_display.hpp): each kind of vocabulary string, the style read
// from a tokenizer.json's decoder, and whole encodings of the checkpoints' own tokenizers.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attntrace/text/token_display.hpp"
#include "attntrace/text/tokenizer.hpp"

namespace {

using attntrace::display_token;
using attntrace::TokenScheme;
using attntrace::TokenStyle;

const std::string kTiny = std::string(ATTNTRACE_FIXTURES) + "/tokenizers/tiny/";
const std::string kModels = std::string(ATTNTRACE_FIXTURES) + "/models/";

const TokenStyle kByteLevel{TokenScheme::byte_level, false, "\u2581"};
const TokenStyle kLlama{TokenScheme::metaspace, true, "\u2581"};
const TokenStyle kWordPiece{TokenScheme::wordpiece, false, "\u2581"};

}  // namespace

TEST_CASE("a byte-level token shows the text it decodes to, a leading space as the mark") {
    CHECK(display_token("\u0120cat", kByteLevel) == "\u2423cat");          // "Ġcat": " cat"
    CHECK(display_token("\u010a", kByteLevel) == "\\n");                   // "Ċ": a newline
    CHECK(display_token("\u0120\u0120\u0120", kByteLevel) == "\u2423\u2423\u2423");
    CHECK(display_token("\u0109", kByteLevel) == "\\t");                   // "ĉ": a tab
    CHECK(display_token("caf\u00c3\u00a9", kByteLevel) == "caf\u00e9");   // "cafÃ©": "café" as bytes C3 A9
    CHECK(display_token("\u00e4\u00bd\u0142", kByteLevel) == "\u4f60");   // "ä½ł": 你 (E4 BD A0)
    CHECK(display_token("\u0120\u00f0\u0141\u013a\u0122", kByteLevel) == "\u2423\U0001F600");  // " 😀"
}

TEST_CASE("a byte-level token that is not a whole character shows its bytes") {
    CHECK(display_token("\u00e4", kByteLevel) == "<0xE4>");               // the first byte of 你
    CHECK(display_token("\u00bd\u0142", kByteLevel) == "<0xBD><0xA0>");   // its last two
    CHECK(display_token("\u0120\u00f0\u0141", kByteLevel) == "\u2423<0xF0><0x9F>");  // a space, then half an emoji
}

TEST_CASE("a byte-level vocabulary's added token is shown as it is") {
    CHECK(display_token("<|endoftext|>", kByteLevel) == "<|endoftext|>");
}

TEST_CASE("a SentencePiece piece shows its spaces as the mark, a byte-fallback piece its byte") {
    CHECK(display_token("\u2581cat", kLlama) == "\u2423cat");
    CHECK(display_token("\u2581\u2581", kLlama) == "\u2423\u2423");
    CHECK(display_token("\u4f60", kLlama) == "\u4f60");
    CHECK(display_token("<0xE4>", kLlama) == "<0xE4>");   // not a whole character: as it is
    CHECK(display_token("<0x0A>", kLlama) == "\\n");      // a whole one (ASCII): the character
    CHECK(display_token("<0x41>", kLlama) == "A");
    CHECK(display_token("<0x20>", kLlama) == "\u2423");
    // without byte fallback, "<0x41>" is just a string
    CHECK(display_token("<0x41>", TokenStyle{TokenScheme::metaspace, false, "\u2581"}) == "<0x41>");
}

TEST_CASE("a WordPiece continuation is shown as it is") {
    CHECK(display_token("##ing", kWordPiece) == "##ing");
    CHECK(display_token("caf\u00e9", kWordPiece) == "caf\u00e9");
    CHECK(display_token("[CLS]", kWordPiece) == "[CLS]");
}

TEST_CASE("control characters are escaped, invalid bytes shown as bytes") {
    CHECK(attntrace::visible_text("a\tb\r\n") == "a\\tb\\r\\n");
    CHECK(attntrace::visible_text("\x1b[0m") == "\\x1B[0m");
    CHECK(attntrace::visible_text("\x7f") == "\\x7F");
    CHECK(attntrace::visible_text("\xc2\x85") == "\\u0085");   // NEL, a C1 control
    CHECK(attntrace::visible_text("\xff" "a\xc3") == "<0xFF>a<0xC3>");
    CHECK(attntrace::visible_text("\xed\xa0\x80") == "<0xED><0xA0><0x80>");  // a surrogate is no character
    CHECK(attntrace::visible_text("a b") == "a\u2423b");
    CHECK(attntrace::visible_text("\U0001F469\u200d\U0001F467") == "\U0001F469\u200d\U0001F467");  // ZWJ kept
}

TEST_CASE("a tokenizer's style comes from its decoder") {
    auto style = [](const std::string& file) { return attntrace::token_style(attntrace::Tokenizer::load(file)); };
    CHECK(style(kTiny + "bpe_byte_level_gpt2.json").scheme == TokenScheme::byte_level);
    const TokenStyle meta = style(kTiny + "decoder_Metaspace_first.json");
    CHECK(meta.scheme == TokenScheme::metaspace);
    CHECK(meta.replacement == "\u2581");
    const TokenStyle llama = style(kTiny + "decoder_llama_sequence.json");  // Replace ▁ -> " ", ByteFallback, Fuse, Strip
    CHECK(llama.scheme == TokenScheme::metaspace);
    CHECK(llama.byte_fallback);
    CHECK(style(kTiny + "bpe_byte_fallback_unk_false.json").byte_fallback);
    CHECK(style(kTiny + "decoder_Replace.json").scheme == TokenScheme::plain);  // Replace "l" -> "L" is no metaspace
    CHECK(style(kTiny + "decoder_none.json").scheme == TokenScheme::plain);
    CHECK(style(kModels + "full_bert_base").scheme == TokenScheme::wordpiece);
}

TEST_CASE("a checkpoint's tokens as a reader sees them") {
    const auto gpt2 = attntrace::Tokenizer::load(kModels + "full_gpt2");
    const auto e = gpt2.encode("the cat\n<|endoftext|>", false, "text");
    const auto shown = attntrace::display_tokens(gpt2, e.ids);
    REQUIRE(shown.size() == e.ids.size());
    CHECK(shown.back() == "<|endoftext|>");  // the special token as it is
    std::string joined;
    for (const auto& s : shown) joined += s;
    CHECK(joined == "the\u2423cat\\n<|endoftext|>");  // the pieces spell the text back
    const std::vector<std::uint32_t> unknown{999999};
    CHECK(attntrace::display_tokens(gpt2, unknown) == std::vector<std::string>{"#999999"});
}
