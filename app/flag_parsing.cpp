#include "flag_parsing.hpp"

#include <charconv>

#include "attntrace/tensor/errors.hpp"

std::optional<std::uint64_t> parse_uint(std::string_view text) {
    std::uint64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
    return value;
}

std::optional<std::vector<std::uint64_t>> parse_uint_list(std::string_view text) {
    std::vector<std::uint64_t> out;
    std::size_t begin = 0;
    while (true) {
        const std::size_t end = std::min(text.find(',', begin), text.size());
        const auto v = parse_uint(text.substr(begin, end - begin));
        if (!v) return std::nullopt;
        out.push_back(*v);
        if (end == text.size()) return out;
        begin = end + 1;
    }
}

std::uint64_t parse_seed(const std::string& text, const std::string& flag) {
    const auto seed = parse_uint(text);
    if (!seed) throw attntrace::UsageError(flag + ": '" + text + "' is not an integer in [0, 2^64)");
    return *seed;
}

CLI::Validator file_name() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            return text.empty() ? "the file name is empty (give a path, or - for stdin/stdout)" : "";
        },
        "");
}

CLI::Option* required_file(CLI::App& cmd, const std::string& name, std::string& path, const std::string& help) {
    return cmd.add_option(name, path, help)->required()->check(file_name());
}

CLI::Validator positive_integer(std::uint64_t max) {
    return CLI::Validator(
        [max](std::string& text) -> std::string {
            const auto v = parse_uint(text);
            if (!v || *v == 0 || *v > max)
                return "'" + text + "' is not a whole number from 1" +
                       (max == UINT64_MAX ? std::string(" up") : " to " + std::to_string(max));
            return {};
        },
        "INT>0");
}

std::string with_flag_name(const std::string& message, const FlagNames& flags) {
    for (const auto& [parameter, flag] : flags) {
        const std::string prefix = std::string(parameter) + ": ";
        if (message.rfind(prefix, 0) == 0) return std::string(flag) + ": " + message.substr(prefix.size());
    }
    return message;
}

std::string with_flag_phrases(std::string message, const FlagNames& phrases) {
    for (const auto& [phrase, words] : phrases) {
        if (phrase.empty()) continue;
        for (auto at = message.find(phrase); at != std::string::npos; at = message.find(phrase, at + words.size()))
            message.replace(at, phrase.size(), words);
    }
    return message;
}
