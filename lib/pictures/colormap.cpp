#include "attntrace/pictures/colormap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attntrace {

namespace {

// matplotlib's 256 viridis entries rounded to 8 bits, "rrggbb" each (CC0, github.com/BIDS/colormap;
// tests/fixtures/make_picture_fixtures.py prints this table from tests/fixtures/viridis_matplotlib.txt).
constexpr const char* kViridis =
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769"
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a"
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85"
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b"
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d"
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e"
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e"
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d"
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88"
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81"
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74"
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863"
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d"
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32"
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a"
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725";

int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }
std::uint8_t byte_at(std::size_t at) {
    return static_cast<std::uint8_t>(hex_digit(kViridis[at]) * 16 + hex_digit(kViridis[at + 1]));
}

}  // namespace

Rgb viridis(double t) {
    if (!(t > 0)) t = 0;  // NaN too
    // matplotlib's ListedColormap rule: entry floor(t * 256), the last one for t = 1.
    const std::size_t entry = std::min<std::size_t>(255, static_cast<std::size_t>(std::min(t, 1.0) * 256.0));
    return {byte_at(entry * 6), byte_at(entry * 6 + 2), byte_at(entry * 6 + 4)};
}

std::string_view viridis_hex_table() { return kViridis; }

std::string hex_colour(Rgb c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

}  // namespace attntrace

namespace attntrace {

Rgb red_blue(double t) {
    // matplotlib/_cm.py _RdBu_data (ColorBrewer RdBu, 11 classes), reversed: blue first.
    static constexpr double kRdBuR[11][3] = {
        {0.0196078431372549, 0.18823529411764706, 0.38039215686274508}, {0.12941176470588237, 0.4, 0.67450980392156867},
        {0.2627450980392157, 0.57647058823529407, 0.76470588235294112}, {0.5725490196078431, 0.77254901960784317, 0.87058823529411766},
        {0.81960784313725488, 0.89803921568627454, 0.94117647058823528}, {0.96862745098039216, 0.96862745098039216, 0.96862745098039216},
        {0.99215686274509807, 0.85882352941176465, 0.7803921568627451}, {0.95686274509803926, 0.6470588235294118, 0.50980392156862742},
        {0.83921568627450982, 0.37647058823529411, 0.30196078431372547}, {0.69803921568627447, 0.09411764705882353, 0.16862745098039217},
        {0.40392156862745099, 0.0, 0.12156862745098039}};
    if (std::isnan(t)) t = 0.5;
    t = std::clamp(t, 0.0, 1.0) * 10.0;
    const std::size_t i = std::min<std::size_t>(9, static_cast<std::size_t>(t));
    const double f = t - double(i);
    auto channel = [&](int c) {
        const double v = kRdBuR[i][c] + f * (kRdBuR[i + 1][c] - kRdBuR[i][c]);
        return static_cast<std::uint8_t>(std::lround(v * 255.0));
    };
    return {channel(0), channel(1), channel(2)};
}

}  // namespace attntrace
