#include "attntrace/trace.hpp"

#include <algorithm>

#include "attntrace/torch_format.hpp"

namespace attntrace {

template <class T>
void StageRecorder<T>::stage(const StageView<T>& view) {
    StageRecord<T> rec{std::string(view.name), view.shape, view.note, view.attributes, std::nullopt};
    if (view.values && wants_values(view.name)) rec.values = *view.values;
    stages_.push_back(std::move(rec));
}

template <class T>
const StageRecord<T>* StageRecorder<T>::find(std::string_view name) const {
    for (const auto& s : stages_)
        if (s.name == name) return &s;
    return nullptr;
}

namespace {

std::string prettify(std::string note) {
    auto replace_all = [&](const std::string& from, const std::string& to) {
        for (std::size_t pos = 0; (pos = note.find(from, pos)) != std::string::npos; pos += to.size())
            note.replace(pos, from.size(), to);
    };
    replace_all(" @ ", " · ");
    replace_all("^T", "ᵀ");
    replace_all(" * ", " × ");
    return note;
}

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
}

}  // namespace

template <class T>
std::string render_text_trace(const std::string& header, const std::vector<StageRecord<T>>& stages,
                              const TextStyle& style) {
    const char* bold = style.color ? "\x1b[1m" : "";
    const char* dim = style.color ? "\x1b[2m" : "";
    const char* reset = style.color ? "\x1b[0m" : "";
    std::size_t name_w = 0, shape_w = 0;
    for (const auto& s : stages) {
        name_w = std::max(name_w, s.name.size());
        shape_w = std::max(shape_w, shape_string(s.shape).size());
    }
    std::string out = header + "\n";
    for (const auto& s : stages) {
        out += std::string(bold) + pad(s.name, name_w) + reset + "  " + pad(shape_string(s.shape), shape_w) + "  " +
               dim + (style.unicode ? prettify(s.note) : s.note) + reset + "\n";
        if (style.values && s.values) out += torch_str(*s.values) + "\n";
    }
    return out;
}

template class StageRecorder<float>;
template class StageRecorder<double>;
template std::string render_text_trace(const std::string&, const std::vector<StageRecord<float>>&, const TextStyle&);
template std::string render_text_trace(const std::string&, const std::vector<StageRecord<double>>&, const TextStyle&);

}  // namespace attntrace
