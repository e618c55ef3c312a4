// The format sniffer: what the first bytes of a file say it is.
#include <doctest/doctest.h>

#include <string>

#include "attntrace/io/sniff.hpp"

using attntrace::Sniffed;
using attntrace::sniff_format;

TEST_CASE("sniff_format tells .npy, JSON and .safetensors from their first bytes") {
    CHECK(sniff_format("\x93NUMPY\x01\x00v\x00{'descr'", std::nullopt) == Sniffed::npy);
    CHECK(sniff_format("\x93NUM", std::nullopt) == Sniffed::npy);  // cut off: parse_npy says so
    for (const char* json : {"[1]", "  \n{\"data\": 1}", "-1.5", "7", "NaN", "Infinity", "\t[NaN]"}) {
        CAPTURE(json);
        CHECK(sniff_format(json, std::nullopt) == Sniffed::json);
    }
    const std::string header = "{\"a\":{}}";
    std::string safetensors(8, '\0');
    safetensors[0] = static_cast<char>(header.size());
    safetensors += header;
    CHECK(sniff_format(safetensors, safetensors.size()) == Sniffed::safetensors);
    CHECK(sniff_format(safetensors, std::nullopt) == Sniffed::safetensors);
    // a header size past the end of the file, or past the format's 100,000,000 bytes, is not one
    CHECK(sniff_format(safetensors.substr(0, 10), 10) == Sniffed::unknown);
    CHECK(sniff_format(std::string(8, '\x7f') + "{}", std::nullopt) == Sniffed::unknown);
    CHECK(sniff_format("        {\"a\": [1]}", std::nullopt) == Sniffed::json);  // 8 spaces: JSON
}

TEST_CASE("sniff_format: empty, blank, and anything else") {
    CHECK(sniff_format("", std::nullopt) == Sniffed::empty);
    CHECK(sniff_format(" \n\t\r ", std::nullopt) == Sniffed::blank);
    for (const std::string other : {std::string(16, '\0'), std::string("PK\x03\x04"), std::string("hello"),
                                    std::string("nan"), std::string("true")}) {
        CHECK(sniff_format(other, std::nullopt) == Sniffed::unknown);
    }
}

TEST_CASE("bytes_repr prints bytes as Python does") {
    CHECK(attntrace::bytes_repr("PK\x03\x04", 8) == "b'PK\\x03\\x04'");
    CHECK(attntrace::bytes_repr("a'b\\c\n\r\t", 8) == "b'a\\'b\\\\c\\n\\r\\t'");
    CHECK(attntrace::bytes_repr("0123456789", 4) == "b'0123'...");
}
