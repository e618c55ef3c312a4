// The whole-model trace rendered as text and as one JSON document (model_trace.hpp).
#include <cmath>
#include <cstdio>

#include "attntrace/model/model_trace.hpp"

#include <sstream>

namespace attntrace {

namespace {

using json = nlohmann::json;

// S as a JSON string: quoted, control characters escaped, invalid UTF-8 replaced.
std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::optional<double> induction_of(const ModelTrace& t, std::size_t layer, std::size_t head) {
    const auto it = t.induction_scores.find(layer);
    if (it == t.induction_scores.end() || head >= it->second.size()) return std::nullopt;
    return it->second[head];
}

std::string header_line(const ModelTrace& t) {
    const ModelConfig& m = *t.config;
    std::string out = "model " + t.dir + ": " + m.model_type + ", " + std::to_string(m.layers.size()) + " layers, " +
                      std::to_string(m.heads) + " heads, " + std::to_string(m.kv_heads) + " kv heads, L " +
                      std::to_string(t.tokens.size()) + ", " + t.dtype + "\n";
    out += "  " + describe_model(m) + "\n";
    return out;
}

std::string tokens_text(const ModelTrace& t) {
    std::string out = "tokens:";
    for (std::size_t i = 0; i < t.tokens.size(); ++i)
        out += "  " + std::to_string(i) + ":" + std::to_string(t.tokens[i].id) + " " + quoted(t.tokens[i].text);
    return out + "\n";
}

// "  experts: top 2 of 4, tokens per expert 0:5 1:7 2:6 3:6"
std::string experts_text(const LayerRouting& r) {
    std::ostringstream out;
    out << "  experts: top " << r.k << " of " << r.experts << ", tokens per expert";
    for (std::size_t x = 0; x < r.tokens.size(); ++x) out << ' ' << x << ':' << r.tokens[x];
    out << '\n';
    return out.str();
}

// A MoE layer's routing per position: [{"ids": [K], "weights": [K]}] (null: a dense layer).
json experts_json(const ModelTrace& t, std::size_t layer) {
    const auto it = t.routing.find(layer);
    if (it == t.routing.end()) return json();
    const LayerRouting& r = it->second;
    json positions = json::array();
    for (std::size_t i = 0; i < r.rows; ++i)
        positions.push_back({{"ids", std::vector<std::uint32_t>(r.chosen.begin() + i * r.k, r.chosen.begin() + (i + 1) * r.k)},
                             {"weights", std::vector<double>(r.weights.begin() + i * r.k, r.weights.begin() + (i + 1) * r.k)}});
    return positions;
}

std::string layers_text(const ModelTrace& t) {
    std::string out;
    if (!t.heads.empty())
        out += "heads: mean entropy of the weight rows (nats), the detectors (means of w[i, i-1], w[i, i], w[i, 0], "
               "the row maximum" + std::string(t.induction ? ", the induction score" : "") + "); a head is named from " +
               fixed(kRoleThreshold, 1) + "\n";
    for (const auto& [layer, heads] : t.heads) {
        out += "layer " + std::to_string(layer) + "\n";
        for (const HeadSummary& h : heads) {
            const auto induction = induction_of(t, layer, h.head);
            out += "  head " + std::to_string(h.head) + "  entropy " + fixed(h.mean_entropy, 3) + "  " +
                   head_scores_text(h.scores);
            if (induction) out += "  induction " + fixed(*induction, 3);
            const std::string role = model_head_role(h, induction);
            if (!role.empty()) out += "  " + role;
            out += "\n";
        }
        if (const auto r = t.routing.find(layer); r != t.routing.end()) out += experts_text(r->second);
    }
    return out;
}

std::string predictions_text(const ModelTrace& t) {
    std::string out;
    for (const Prediction& p : t.predictions) {
        out += (t.predicted == "next" ? "next token after " : "mask at ") + std::to_string(p.position) + " " +
               quoted(t.tokens[p.position].text) + ":";
        for (const Candidate& c : p.top)
            out += "  " + std::to_string(c.id) + " " + quoted(c.text) + " " + fixed(c.probability, 4);
        out += "\n";
    }
    if (t.predicted == "mask" && t.predictions.empty()) out += "no mask token in the input: nothing to fill\n";
    return out;
}

std::string outputs_text(const ModelTrace& t) {
    std::string written;
    for (const char* what : {"hidden_states", "attentions", "logits", "experts", "expert_weights"}) {
        const json& file = t.outputs.value(what, json());
        if (file.is_string()) written += (written.empty() ? "" : ", ") + std::string(what) + " " + file.get<std::string>();
    }
    return written.empty() ? "" : "wrote " + written + "\n";
}

json model_json(const ModelTrace& t) { return model_summary_json(t.dir, *t.config, t.dtype, t.threads); }

json predictions_json(const ModelTrace& t) {
    if (t.predicted.empty()) return json();
    json positions = json::array();
    for (const Prediction& p : t.predictions) {
        json top = json::array();
        for (const Candidate& c : p.top)
            top.push_back({{"id", c.id}, {"text", c.text}, {"probability", c.probability}, {"logit", c.logit}});
        positions.push_back({{"position", p.position}, {"top", top}});
    }
    return {{"kind", t.predicted}, {"positions", positions}};
}

json layers_json(const ModelTrace& t) {
    json layers = json::array();
    for (const auto& [layer, heads] : t.heads) {
        json list = json::array();
        for (const HeadSummary& h : heads) {
            json one = head_summary_json(h);
            const auto induction = induction_of(t, layer, h.head);
            one["induction"] = induction ? json(*induction) : json();
            const std::string role = model_head_role(h, induction);
            one["role"] = role.empty() ? json() : json(role);
            list.push_back(std::move(one));
        }
        json entry{{"layer", layer}, {"heads", std::move(list)}};
        if (t.config && t.config->moe) entry["experts"] = experts_json(t, layer);
        layers.push_back(std::move(entry));
    }
    return layers;
}

}  // namespace

std::string render_model_text(const ModelTrace& t) {
    std::string out = header_line(t) + tokens_text(t);
    if (t.induction)
        out += "induction: " + std::to_string(t.induction->n) + " random tokens twice (seed " +
               std::to_string(t.induction->seed) + ", " + std::to_string(t.induction->prefix) + " leading special)\n";
    return out + layers_text(t) + predictions_text(t) + outputs_text(t);
}

json model_summary_json(const std::string& dir, const ModelConfig& m, const std::string& dtype, std::size_t threads) {
    return {{"dir", dir},
            {"model_type", m.model_type},
            {"layers", m.layers.size()},
            {"heads", m.heads},
            {"kv_heads", m.kv_heads},
            {"head_dim", m.head_dim},
            {"hidden", m.hidden},
            {"intermediate", m.intermediate},
            {"vocab", m.vocab},
            {"description", describe_model(m)},
            {"config", m.values},
            {"dtype", dtype},
            {"threads", threads ? json(threads) : json()}};
}

json tokens_json(const std::vector<TraceToken>& tokens) {
    json out = json::array();
    for (const TraceToken& k : tokens) out.push_back({{"id", k.id}, {"token", k.token}, {"text", k.text}});
    return out;
}

json model_trace_json(const ModelTrace& t) {
    const json tokens = tokens_json(t.tokens);
    json induction;
    if (t.induction)
        induction = {{"n", t.induction->n}, {"seed", t.induction->seed}, {"ids", t.induction->ids},
                     {"prefix", t.induction->prefix}, {"threshold", kInductionThreshold}};
    return {{"command", "model"},       {"model", model_json(t)},        {"tokens", tokens},
            {"layers", layers_json(t)}, {"induction", induction},        {"predictions", predictions_json(t)},
            {"outputs", t.outputs}};
}

}  // namespace attntrace
