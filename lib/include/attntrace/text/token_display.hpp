#pragma once
// Tokens as a reader sees them, for the labels of pictures: the vocabulary string of a token is the
// tokenizer's own spelling (GPT-2's "Ġcat", SentencePiece's "▁cat", byte fallback's "<0xE4>"), not
// the text. Each kind is shown as the text it stands for:
//   byte-level (GPT-2, RoBERTa, NeoX, Llama 3, Qwen): its bytes decoded ("Ġcat" -> "␣cat",
//                "Ċ" -> "\n"); bytes that are not a whole UTF-8 character as "<0xE4>";
//   metaspace (Llama 2, Mistral): "▁" as a space ("▁cat" -> "␣cat"); a byte-fallback piece
//                "<0x0A>" as its character when it is a whole one (an ASCII byte), else as it is;
//   WordPiece (BERT): as it is, "##ing" included;
//   special and added tokens ("<|endoftext|>", "[CLS]"): as they are.
// Everywhere a space is shown as kSpaceMark "␣" (U+2423 OPEN BOX: a visible space that no
// vocabulary uses as a letter, unlike "·" or "_"), and control characters escaped C-style ("\n",
// "\t", "\r", "\x1B"; C1 controls "\u0085").
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/text/tokenizer.hpp"

namespace attntrace {

inline constexpr std::string_view kSpaceMark = "\u2423";

// How a tokenizer spells text in its vocabulary (from its decoder).
enum class TokenScheme : std::uint8_t {
    plain,       // as the text
    byte_level,  // GPT-2's bytes_to_unicode characters
    metaspace,   // spaces as a replacement character ("▁")
    wordpiece,   // "##" continuations
};

struct TokenStyle {
    TokenScheme scheme = TokenScheme::plain;
    bool byte_fallback = false;          // "<0xNN>" pieces stand for one byte
    std::string replacement = "\u2581";  // metaspace's space
};

// TOKENIZER's style, from its decoder (ByteLevel, Metaspace or Replace "▁" -> " ", WordPiece,
// ByteFallback, inside a Sequence or not).
TokenStyle token_style(const Tokenizer& tokenizer);

// PIECE, a vocabulary string of a tokenizer of STYLE, as a reader sees it.
std::string display_token(std::string_view piece, const TokenStyle& style);

// TEXT (any bytes) with spaces as kSpaceMark, control characters escaped, and bytes that are not
// part of a valid UTF-8 character as "<0xNN>".
std::string visible_text(std::string_view text);

// The tokens of IDS as a reader sees them: the model's pieces by display_token, added tokens as
// they are (escaped), an id with no string as "#ID".
std::vector<std::string> display_tokens(const Tokenizer& tokenizer, std::span<const std::uint32_t> ids);

}  // namespace attntrace
