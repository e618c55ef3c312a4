// Sites (sites.hpp): their names and the values one reports.
#include "attntrace/model/sites.hpp"

#include <algorithm>
#include <array>

namespace attntrace {

namespace {

constexpr std::array<std::pair<Site, std::string_view>, 6> kSiteNames{{{Site::resid_pre, "resid_pre"},
                                                                       {Site::z, "z"},
                                                                       {Site::head_out, "head_out"},
                                                                       {Site::attn_out, "attn_out"},
                                                                       {Site::mlp_out, "mlp_out"},
                                                                       {Site::resid_final, "resid_final"}}};

}  // namespace

std::string_view site_name(Site site) {
    for (const auto& [s, name] : kSiteNames)
        if (s == site) return name;
    return "";
}

std::optional<Site> site_named(std::string_view name) {
    for (const auto& [s, n] : kSiteNames)
        if (n == name) return s;
    return std::nullopt;
}

template <class T>
SiteValues<T>::SiteValues(Site site, std::size_t layer, std::size_t sequences, std::size_t length, std::size_t width,
                          std::size_t heads, const T* bias)
    : site_(site), layer_(layer), length_(length), width_(width), heads_(heads), original_(sequences), bias_(bias),
      values_(sequences * length * width) {}

template <class T>
std::size_t SiteValues<T>::fork(std::size_t b, std::size_t copies) {
    const std::size_t first = sequences(), row = length_ * width_;
    const std::size_t source = b < original_ ? b : forked_from_.at(b - original_);
    if (values_.capacity() < (first + copies) * row) values_.reserve((first + copies) * row * 3 / 2);
    values_.resize((first + copies) * row);
    for (std::size_t c = 0; c < copies; ++c) {
        std::copy_n(values_.begin() + b * row, row, values_.begin() + (first + c) * row);
        forked_from_.push_back(source);
    }
    return first;
}

template class SiteValues<float>;
template class SiteValues<double>;

}  // namespace attntrace
