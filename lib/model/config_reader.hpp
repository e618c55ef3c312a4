#pragma once
// config.json read for one layer: each value read once, checked, and remembered (LayerConfig::
// values), so the trace can print the values the run used. Every problem is an InputError naming
// the file and the key. Internal to lib/model.
#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "attntrace/attention/positions.hpp"

namespace attntrace {

[[noreturn]] void config_error(const std::string& source, const std::string& what);

struct ConfigReader {
    const nlohmann::json& config;
    const std::string& source;  // config.json's path, for messages
    nlohmann::json& values;     // the values read, by key
    // How the source spells config.json's keys (a GGUF file's metadata keys), for messages; null:
    // as themselves.
    const std::map<std::string, std::string>* names = nullptr;

    // "config key 'hidden_size'", or "metadata key 'llama.embedding_length'" where NAMES spells it.
    std::string spelt(const char* key) const;

    // KEY's value, or null when absent or JSON null.
    const nlohmann::json* find(const char* key) const;
    // A positive integer under KEY; missing or anything else is an error.
    std::size_t count(const char* key) const;
    // The first of KEYS present (a count), or nullopt.
    std::optional<std::size_t> count_of(std::initializer_list<const char*> keys) const;
    // The first of KEYS present (a count); none present: an error naming the first.
    std::size_t any_count(std::initializer_list<const char*> keys) const;
    // A positive integer under KEY, FALLBACK when absent.
    std::size_t count_or(const char* key, std::size_t fallback) const;
    // A non-negative integer under KEY (a token id), nullopt when absent or null.
    std::optional<std::size_t> index(const char* key) const;
    // A string under KEY, FALLBACK when absent.
    std::string text(const char* key, const std::string& fallback) const;
    // A number under KEY, FALLBACK when absent.
    double number(const char* key, double fallback) const;
    // true or false under KEY, FALLBACK when absent.
    bool flag(const char* key, bool fallback) const;

    // Remembers VALUE as read under KEY (for values read by hand, such as an object's members).
    void remember(const char* key, const nlohmann::json& value) const { values[key] = value; }
};

// The rotary base and scaling: rope_parameters (new style) or rope_theta + rope_scaling (old
// style), DEFAULT_THETA when neither gives a base (modeling_rope_utils.py).
std::pair<double, RopeScaling> read_rope(const ConfigReader& r, double default_theta);

}  // namespace attntrace
