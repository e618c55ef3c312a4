#pragma once
// Flag values CLI11 would parse too loosely (it wraps -1 to 2^64 - 1 for unsigned types).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// A decimal integer in [0, 2^64), all of TEXT; nullopt otherwise.
std::optional<std::uint64_t> parse_uint(std::string_view text);

// "3,2" -> {3, 2}: one or more such integers separated by commas; nullopt otherwise.
std::optional<std::vector<std::uint64_t>> parse_uint_list(std::string_view text);

// --seed's value; throws UsageError naming FLAG.
std::uint64_t parse_seed(const std::string& text, const std::string& flag = "--seed");

#include <CLI/CLI.hpp>

// A CLI11 check for file names: not empty (a script's unset $OUT gives -o ''). Input flags too:
// --params '' must not silently mean "no parameters".
CLI::Validator file_name();

// A required file flag or argument: CMD.add_option(NAME, PATH, HELP), required, checked by file_name().
CLI::Option* required_file(CLI::App& cmd, const std::string& name, std::string& path, const std::string& help);

#include <utility>

#include "attntrace/tensor/errors.hpp"

// The library names parameters ("kv heads: 8 query heads cannot share 3 kv heads"); the app
// names the flag that set them ("--kv-heads: ..."). FLAGS maps each parameter to its flag.
using FlagNames = std::vector<std::pair<std::string_view, std::string_view>>;
std::string with_flag_name(const std::string& message, const FlagNames& flags);

// The library speaks of an option by its meaning inside a message too ("no tensor name starts with
// the prefix 'x.'", "; turn the output projection off to ..."): PHRASES maps each such phrase to
// the app's words ("--prefix 'x.'", "; pass --no-out-proj to ..."), replaced wherever it stands.
std::string with_flag_phrases(std::string message, const FlagNames& phrases);

// Runs FN, rethrowing a library error in the app's words: a UsageError with the flag's name in
// place of the parameter's at its start (FLAGS), and any UsageError, InputError or ShapeError with
// PHRASES replaced (the same type again, so the exit code stays).
template <class Fn>
decltype(auto) naming_flags(const FlagNames& flags, Fn&& fn, const FlagNames& phrases = {}) {
    try {
        return fn();
    } catch (const attntrace::UsageError& e) {
        throw attntrace::UsageError(with_flag_phrases(with_flag_name(e.what(), flags), phrases));
    } catch (const attntrace::ShapeError& e) {
        throw attntrace::ShapeError(with_flag_phrases(e.what(), phrases));
    } catch (const attntrace::InputError& e) {
        throw attntrace::InputError(with_flag_phrases(e.what(), phrases));
    }
}

// A CLI11 check for counts (--heads, --threads, --head-dim ...): an integer from 1 to MAX.
CLI::Validator positive_integer(std::uint64_t max = UINT64_MAX);
