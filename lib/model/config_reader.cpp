// config.json values for one layer (config_reader.hpp).
#include "config_reader.hpp"

#include <cstdint>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

using json = nlohmann::json;

void config_error(const std::string& source, const std::string& what) { throw InputError(source + ": " + what); }

std::string ConfigReader::spelt(const char* key) const {
    if (names)
        if (const auto it = names->find(key); it != names->end()) return "metadata key '" + it->second + "'";
    return "config key '" + std::string(key) + "'";
}

const json* ConfigReader::find(const char* key) const {
    const auto it = config.find(key);
    return it == config.end() || it->is_null() ? nullptr : &*it;
}

std::size_t ConfigReader::count(const char* key) const {
    const json* v = find(key);
    if (!v) config_error(source, "missing " + spelt(key));
    if (!v->is_number_integer() || v->get<std::int64_t>() <= 0)
        config_error(source, spelt(key) + " must be a positive integer, not " + v->dump());
    values[key] = *v;
    return v->get<std::size_t>();
}

std::optional<std::size_t> ConfigReader::count_of(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
        if (find(k)) return count(k);
    return std::nullopt;
}

std::size_t ConfigReader::any_count(std::initializer_list<const char*> keys) const {
    const auto found = count_of(keys);
    return found ? *found : count(*keys.begin());
}

namespace {

// KEY's value, FALLBACK when absent; a value that IS_KIND refuses is an error ("must be WHAT").
template <class V, class IsKind>
V typed(const ConfigReader& r, const char* key, V fallback, IsKind is_kind, const char* what) {
    const json* v = r.find(key);
    if (!v) return fallback;
    if (!is_kind(*v)) config_error(r.source, r.spelt(key) + " must be " + what + ", not " + v->dump());
    r.values[key] = *v;
    return v->get<V>();
}

}  // namespace

std::size_t ConfigReader::count_or(const char* key, std::size_t fallback) const {
    return find(key) ? count(key) : fallback;
}

std::optional<std::size_t> ConfigReader::index(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<std::int64_t>() < 0)
        config_error(source, spelt(key) + " must be a non-negative integer, not " + v->dump());
    values[key] = *v;
    return v->get<std::size_t>();
}

std::string ConfigReader::text(const char* key, const std::string& fallback) const {
    return typed(*this, key, fallback, [](const json& v) { return v.is_string(); }, "a string");
}

double ConfigReader::number(const char* key, double fallback) const {
    return typed(*this, key, fallback, [](const json& v) { return v.is_number(); }, "a number");
}

bool ConfigReader::flag(const char* key, bool fallback) const {
    return typed(*this, key, fallback, [](const json& v) { return v.is_boolean(); }, "true or false");
}

namespace {

// LongRoPE's short_factor and long_factor lists, attention_factor, and the original context
// (original_max_position_embeddings, in the scaling or at the top level; modeling_rope_utils.py
// _compute_longrope_parameters).
void read_longrope(const ConfigReader& r, const nlohmann::json& scaling, RopeScaling& s) {
    for (const auto& [key, out] : {std::pair{"short_factor", &s.short_factor}, {"long_factor", &s.long_factor}}) {
        const auto it = scaling.find(key);
        if (it == scaling.end() || !it->is_array())
            config_error(r.source, std::string("rope type 'longrope' needs a '") + key + "' list");
        for (const json& v : *it) {
            if (!v.is_number() || !(v.get<double>() > 0))
                config_error(r.source, std::string("longrope '") + key + "' holds " + v.dump() + ", not a positive number");
            out->push_back(v.get<double>());
        }
    }
    if (const auto it = scaling.find("attention_factor"); it != scaling.end() && it->is_number())
        s.attention_factor = it->get<double>();
}

}  // namespace

std::pair<double, RopeScaling> read_rope(const ConfigReader& r, double default_theta) {
    const json* params = r.find("rope_parameters");
    const json* scaling = params ? params : r.find("rope_scaling");
    if (scaling && !scaling->is_object()) config_error(r.source, "'rope_parameters' / 'rope_scaling' must be an object");
    double theta = r.number("rope_theta", default_theta);
    RopeScaling s;
    if (!scaling) return {theta, s};
    r.remember(params ? "rope_parameters" : "rope_scaling", *scaling);
    const auto num = [&](const char* key, double fallback) {
        const auto it = scaling->find(key);
        return it != scaling->end() && it->is_number() ? it->get<double>() : fallback;
    };
    theta = num("rope_theta", theta);
    s.type = scaling->value("rope_type", scaling->value("type", std::string("default")));
    if (s.type == "su") s.type = "longrope";  // Phi-3's early name (configuration_phi3.py)
    if (s.type != "default" && s.type != "linear" && s.type != "llama3" && s.type != "longrope")
        config_error(r.source, "rope type '" + s.type + "' is not supported (default, linear, llama3, longrope)");
    if (s.type == "longrope") read_longrope(r, *scaling, s);
    s.factor = num("factor", 1.0);
    s.low_freq_factor = num("low_freq_factor", 1.0);
    s.high_freq_factor = num("high_freq_factor", 4.0);
    s.original_max_position = num("original_max_position_embeddings", r.number("max_position_embeddings", 8192));
    return {theta, s};
}

}  // namespace attntrace
