#include "attntrace/pictures/report.hpp"

#include <cmath>
#include <cstdio>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/pictures/plot.hpp"
#include "html.hpp"

namespace attntrace {

// JSON for a <script> element: "</" cannot close the element early.
std::string script_json(const nlohmann::json& j) {
    std::string s = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '<') out += "\\u003c";
        else out += s[i];
    }
    return out;
}

std::string base64(std::string_view bytes) {
    static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
        std::uint32_t v = 0;
        for (std::size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        for (std::size_t k = 0; k < 4; ++k) out += k <= n ? kDigits[(v >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
}

namespace {

std::vector<std::string> axis_labels(std::size_t cells, std::size_t block, const std::vector<std::string>& labels) {
    std::vector<std::string> out(cells);
    for (std::size_t c = 0; c < cells; ++c) {
        const std::size_t t = c * block;
        out[c] = t < labels.size() ? labels[t] : std::to_string(t);
        if (block > 1) out[c] += " (+" + std::to_string(block - 1) + ")";
    }
    return out;
}

nlohmann::json heatmap_data(const PooledWeights& w, const ReportData& d) {
    const PooledWeights g = repool(w, 128, 128);
    nlohmann::json heads = nlohmann::json::array();
    for (auto h : chosen_heads(g, d.batch, {})) {
        const float* p = g.plane(d.batch, h);
        nlohmann::json cells = nlohmann::json::array();
        for (std::size_t i = 0; i < g.rows * g.cols; ++i) cells.push_back(std::round(double(p[i]) * 1e5) / 1e5);
        heads.push_back({{"head", h}, {"cells", cells}});
    }
    return {{"rows", g.rows}, {"cols", g.cols}, {"q_block", g.q_block}, {"k_block", g.k_block},
            {"qlabels", axis_labels(g.rows, g.q_block, d.query_labels)},
            {"klabels", axis_labels(g.cols, g.k_block, d.key_labels)}, {"heads", heads},
            {"viridis", std::string(viridis_hex_table())}, {"scale", colour_scale_name(d.scale)},
            {"decades", kLogDecades}};
}

std::string number_cell(const nlohmann::json& v) {
    if (!v.is_number()) return "<td>-</td>";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v.get<double>());
    return "<td>" + std::string(buf) + "</td>";
}

std::string stats_table(const nlohmann::json& stats) {
    static const char* fields[] = {"mean_entropy", "previous_token", "diagonal", "first_token", "max_weight"};
    std::string out = "<table id=\"stats\"><tr><th>head</th>";
    for (const char* f : fields) out += std::string("<th>") + f + "</th>";
    out += "<th>role</th><th>empty rows</th></tr>\n";
    for (const auto& h : stats) {
        out += "<tr><td>" + h.value("head", nlohmann::json(0)).dump() + "</td>";
        for (const char* f : fields) out += number_cell(h.value(f, nlohmann::json()));
        const auto role = h.value("role", nlohmann::json());  // null when no detector passes
        out += "<td>" + escape_markup(role.is_string() ? role.get<std::string>() : "") + "</td><td>" +
               h.value("empty_rows", nlohmann::json(0)).dump() + "</td></tr>\n";
    }
    return out + "</table>\n";
}

constexpr const char* kStyle = R"(body{font-family:sans-serif;margin:20px;color:#222;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:24px}
#heads{display:flex;flex-wrap:wrap;gap:18px}figure{margin:0}figcaption{font-size:13px;margin-bottom:4px}
canvas.heatmap{image-rendering:pixelated;border:1px solid #ccc;cursor:crosshair}
#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #aa9;padding:4px 8px;font:12px monospace;
white-space:pre;display:none;z-index:2}
#tokens span{display:inline-block;margin:2px;padding:1px 5px;border:1px solid #ccd;border-radius:3px;font:13px monospace;cursor:default}
#tokens span:hover{background:#e4ecff}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}pre{background:#f6f6f6;padding:10px;font-size:12px;overflow:auto}
)";

constexpr const char* kScript = R"(
(function () {
  var body = document.body;
  window.addEventListener('error', function () { body.dataset.errors = String(Number(body.dataset.errors || 0) + 1); });
  var d = JSON.parse(document.getElementById('data').textContent);
  var tip = document.getElementById('tip');
  function colour(t) {
    var i = Math.max(0, Math.min(255, Math.floor(t * 256))) * 6;
    return '#' + d.viridis.substr(i, 6);
  }
  function top(head, r, k) {
    var row = head.cells.slice(r * d.cols, (r + 1) * d.cols).map(function (w, c) { return [w, c]; });
    row.sort(function (a, b) { return b[0] - a[0]; });
    return row.slice(0, k).map(function (x) { return d.klabels[x[1]] + '  ' + x[0].toFixed(3); }).join('\n');
  }
  function show(text, x, y) {
    tip.textContent = text; tip.style.display = 'block';
    tip.style.left = (x + 14) + 'px'; tip.style.top = (y + 14) + 'px';
    return text;
  }
  function queryText(r, heads) {
    return 'query ' + d.qlabels[r] + heads.map(function (h) { return '\nhead ' + h.head + ':\n' + top(h, r, 5); }).join('');
  }
  var vmax = 0;
  d.heads.forEach(function (h) { h.cells.forEach(function (w) { vmax = Math.max(vmax, w); }); });
  if (!(vmax > 0)) vmax = 1;
  var floor = vmax * Math.pow(10, -d.decades);
  function place(w, rowMax) {  // scale.hpp's ColourMapping::position
    if (!(w > 0)) return 0;
    var t = d.scale === 'row' ? (rowMax > 0 ? w / rowMax : 0)
          : d.scale === 'log' ? (w <= floor ? 0 : Math.log(w / floor) / Math.log(vmax / floor)) : w / vmax;
    return Math.max(0, Math.min(1, t));
  }
  var px = Math.max(1, Math.min(24, Math.floor(360 / Math.max(d.rows, d.cols))));
  var holder = document.getElementById('heads');
  d.heads.forEach(function (h) {
    var fig = document.createElement('figure');
    var cap = document.createElement('figcaption');
    cap.textContent = 'head ' + h.head;
    var cv = document.createElement('canvas');
    cv.className = 'heatmap'; cv.dataset.head = h.head;
    cv.width = d.cols * px; cv.height = d.rows * px;
    var g = cv.getContext('2d');
    for (var r = 0; r < d.rows; r++) {
      var row = h.cells.slice(r * d.cols, (r + 1) * d.cols), rowMax = Math.max.apply(null, row);
      for (var c = 0; c < d.cols; c++) { g.fillStyle = colour(place(row[c], rowMax)); g.fillRect(c * px, r * px, px, px); }
    }
    cv.addEventListener('mousemove', function (e) {
      var r = Math.min(d.rows - 1, Math.floor(e.offsetY / px));
      show(queryText(r, [h]), e.clientX, e.clientY);
    });
    cv.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    fig.appendChild(cap); fig.appendChild(cv); holder.appendChild(fig);
  });
  var tokens = document.getElementById('tokens');
  d.qlabels.forEach(function (label, r) {
    var s = document.createElement('span');
    s.textContent = label;
    s.addEventListener('mouseenter', function (e) { show(queryText(r, d.heads), e.clientX, e.clientY); });
    s.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    tokens.appendChild(s);
  });
  var legends = {linear: 'linear: 0 to ' + vmax.toPrecision(3), row: 'row: each row to its own largest weight',
                 log: 'log: ' + floor.toPrecision(3) + ' (and under) to ' + vmax.toPrecision(3)};
  document.getElementById('scale').textContent = 'colour scale: viridis, ' + legends[d.scale] +
      '; one cell = ' + d.q_block + ' x ' + d.k_block + ' (queries x keys)';
  body.dataset.heatmaps = String(document.querySelectorAll('canvas.heatmap').length);
  if (location.hash === '#selftest' && d.heads.length > 0) body.dataset.selftest = show(queryText(0, [d.heads[0]]), 0, 0);
})();
)";

}  // namespace

std::string html_report(const PooledWeights& weights, const ReportData& data) {
    std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attntrace: " +
                      escape_markup(data.title) + "</title>\n<style>" + kStyle + "</style></head>\n<body>\n";
    out += "<h1>" + escape_markup(data.title) + "</h1>\n<p id=\"scale\"></p>\n<h2>Heatmaps (batch " +
           std::to_string(data.batch) + "; rows are queries, columns keys; hover a row)</h2>\n<div id=\"heads\"></div>\n";
    out += "<h2>Query tokens (hover one for its top keys)</h2>\n<div id=\"tokens\"></div>\n<div id=\"tip\"></div>\n";
    out += "<h2>Head statistics</h2>\n" + stats_table(data.head_stats);
    out += "<h2>Trace</h2>\n<pre id=\"trace\">" + escape_markup(data.trace_text) + "</pre>\n";
    out += "<script type=\"application/json\" id=\"data\">" + script_json(heatmap_data(weights, data)) + "</script>\n";
    out += std::string("<script>") + kScript + "</script>\n</body></html>\n";
    return out;
}

}  // namespace attntrace
