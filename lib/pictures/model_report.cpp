// The whole-model report (model_pictures.hpp's model_report_html): one HTML page with no network
// access and no external file. What it embeds (<script type="application/json" id="data">):
//   thumbs: every head pooled to at most kThumbCells cells a side, one byte a cell (its viridis
//           entry under the run's scale), all heads in one zlib stream, base64;
//   heads:  each head at full resolution (up to kModelPictureCells cells a side), its own zlib
//           stream, base64: C float32 row maxima (little-endian), then C x C bytes, cell (r, c)
//           = round(255 w / max of row r); inflated only when the head is opened;
//   rollout, the detector table, the predictions, the tokens and the text as JSON.
// The page inflates with the browser's DecompressionStream("deflate") (zlib format).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/pictures/model_pictures.hpp"
#include "attntrace/pictures/plot.hpp"
#include "attntrace/tensor/errors.hpp"
#include "html.hpp"
#include "zlib.hpp"

namespace attntrace {

namespace {

constexpr std::size_t kThumbCells = 48;    // a thumbnail's cells a side at most
constexpr std::size_t kRolloutCells = 256; // the rollout's cells a side at most

// Each cell of PLANE (rows, cols) as the viridis entry its place under MAPPING picks.
std::string colour_indices(const float* plane, std::size_t rows, std::size_t cols, const ColourMapping& mapping) {
    const std::vector<float> t = mapping.positions(plane, rows, cols);
    std::string out(t.size(), '\0');
    for (std::size_t i = 0; i < t.size(); ++i)
        out[i] = static_cast<char>(std::min<std::size_t>(255, static_cast<std::size_t>(double(t[i]) * 256.0)));
    return out;
}

// PLANE (rows, cols): the row maxima as float32, then each weight as a byte of its row's maximum.
std::string quantized(const float* plane, std::size_t rows, std::size_t cols) {
    std::string out(rows * 4 + rows * cols, '\0');
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = plane + r * cols;
        const float top = *std::max_element(row, row + cols);
        std::memcpy(&out[r * 4], &top, 4);  // x86 and ARM: little-endian, as the page reads it
        for (std::size_t c = 0; c < cols; ++c)
            out[rows * 4 + r * cols + c] = static_cast<char>(top > 0 ? std::lround(255.0 * double(row[c]) / double(top)) : 0);
    }
    return out;
}

// The label of each cell of an axis: the first token it covers, "(+n)" for the others.
nlohmann::json cell_labels(const std::vector<std::string>& tokens, std::size_t cells, std::size_t block) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t c = 0; c < cells; ++c) {
        const std::size_t t = c * block;
        std::string label = t < tokens.size() ? tokens[t] : std::to_string(t);
        if (block > 1) label += " (+" + std::to_string(std::min(block, tokens.size() - std::min(t, tokens.size())) - 1) + ")";
        out.push_back(label);
    }
    return out;
}

float largest(const std::vector<PooledWeights>& planes) {
    float v = 0;
    for (const auto& p : planes)
        for (float x : p.cells) v = std::max(v, x);
    return v;
}

nlohmann::json grid_json(const PooledWeights& g, const std::vector<std::string>& tokens) {
    return {{"rows", g.rows}, {"cols", g.cols}, {"q_block", g.q_block}, {"k_block", g.k_block},
            {"qlabels", cell_labels(tokens, g.rows, g.q_block)}, {"klabels", cell_labels(tokens, g.cols, g.k_block)}};
}

nlohmann::json thumbs_json(const ModelPictures& m) {
    std::vector<PooledWeights> thumbs;
    for (const auto& w : m.weights) thumbs.push_back(repool(w, kThumbCells, kThumbCells));
    const ColourMapping mapping = ColourMapping::of(m.scale, largest(thumbs));
    std::string bytes;
    for (const auto& t : thumbs)
        for (std::size_t h = 0; h < t.heads(); ++h) bytes += colour_indices(t.plane(0, h), t.rows, t.cols, mapping);
    nlohmann::json j = grid_json(thumbs.front(), m.tokens);
    j["data"] = base64(zlib_compress(bytes));
    return j;
}

nlohmann::json heads_json(const ModelPictures& m) {
    nlohmann::json j = grid_json(m.weights.front(), m.tokens);
    nlohmann::json data = nlohmann::json::array();
    for (const auto& w : m.weights)
        for (std::size_t h = 0; h < w.heads(); ++h) data.push_back(base64(zlib_compress(quantized(w.plane(0, h), w.rows, w.cols))));
    j["data"] = data;
    j["vmax"] = largest(m.weights);
    return j;
}

nlohmann::json rollout_json(const ModelPictures& m) {
    if (!m.rollout) return nullptr;
    const PooledWeights g = repool(*m.rollout, kRolloutCells, kRolloutCells);
    nlohmann::json j = grid_json(g, m.tokens);
    nlohmann::json cells = nlohmann::json::array();
    for (float v : g.cells) cells.push_back(std::round(double(v) * 1e4) / 1e4);
    j["cells"] = cells;
    return j;
}

nlohmann::json table_json(const ModelPictures& m) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& h : m.heads) {
        nlohmann::json row = h.scores;
        row["layer"] = h.layer, row["head"] = h.head, row["role"] = h.role;
        rows.push_back(row);
    }
    return rows;
}

nlohmann::json page_data(const ModelPictures& m) {
    return {{"title", m.title}, {"text", m.text}, {"tokens", m.tokens}, {"ids", m.ids}, {"layers", m.layers},
            {"heads", m.head_count()}, {"scale", colour_scale_name(m.scale)}, {"decades", kLogDecades},
            {"viridis", std::string(viridis_hex_table())}, {"thumbs", thumbs_json(m)}, {"full", heads_json(m)},
            {"rollout", rollout_json(m)}, {"table", table_json(m)}, {"predictions", m.predictions}};
}

constexpr const char* kStyle = R"(body{font-family:"DejaVu Sans","Noto Sans CJK SC","Noto Sans","Noto Color Emoji",sans-serif;margin:18px;color:#222;background:#fff}
h1{font-size:19px;margin:0 0 6px}h2{font-size:15px;margin:22px 0 8px}#text{white-space:pre-wrap;background:#f6f6f6;padding:6px 10px;font-size:13px}
.tok{display:inline-block;margin:2px;padding:1px 4px;border:1px solid #ccd;border-radius:3px;font-size:13px}
.tok sub{color:#889;font-size:9px;margin-left:2px}
#grid{border-collapse:collapse}#grid td,#grid th{padding:2px;font-size:11px;font-weight:normal;text-align:center}
#grid th.layer{text-align:right;padding-right:6px;font-weight:bold}
canvas.thumb{width:48px;height:48px;image-rendering:pixelated;cursor:pointer;border:2px solid transparent;display:block}
canvas.thumb:hover,canvas.thumb.open{border-color:#e4572e}td.has-role canvas.thumb{border-color:#7a5cff}
.role{font-size:9px;color:#5a3ce0;height:11px;overflow:hidden;white-space:nowrap;max-width:64px}
#main{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
#view{display:none;border:1px solid #ccc;padding:10px;background:#fcfcfc;position:sticky;top:8px;max-width:calc(100vw - 60px);overflow:auto}
#tokens{max-height:84px;overflow:auto}#text{max-height:60px;overflow:auto}
#view .wrap,#rollout-wrap{display:inline-grid;grid-template-columns:auto auto;gap:0}
.rows{display:flex;flex-direction:column;align-items:flex-end;margin-right:3px}
.cols{display:flex;flex-direction:row;grid-column:2}
.qlabel,.klabel{font-size:10px;line-height:1;overflow:hidden;white-space:nowrap;color:#333}
.klabel{writing-mode:vertical-rl;text-align:left;max-height:90px}
canvas.big{image-rendering:pixelated;cursor:crosshair}#readout{font:12px monospace;min-height:16px;margin:6px 0}
table.data{border-collapse:collapse;font-size:12px}table.data td,table.data th{border:1px solid #ddd;padding:2px 7px;text-align:right}
table.data tr.head-row{cursor:pointer}table.data tr.head-row:hover{background:#eef3ff}
td.role-cell{font-weight:bold;color:#5a3ce0;text-align:left}tr.has-role td.role-cell{background:#efe9ff}
#legend{font-size:12px;color:#444}#error{color:#b00;font-weight:bold}
)";

// The page's script: inflates the thumbnails, draws the grid, opens a head on a click.
constexpr const char* kScript = R"JS(
(function () {
  var body = document.body;
  window.addEventListener('error', function () { body.dataset.errors = String(Number(body.dataset.errors || 0) + 1); });
  var d = JSON.parse(document.getElementById('data').textContent);
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e; }
  function colour(i) { return '#' + d.viridis.substr(Math.max(0, Math.min(255, i)) * 6, 6); }
  function inflate(b64) {
    var raw = atob(b64), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Response(stream).arrayBuffer().then(function (b) { return new Uint8Array(b); });
  }
  var full = d.full, vmax = full.vmax > 0 ? full.vmax : 1, floor = vmax * Math.pow(10, -d.decades);
  function place(w, rowMax) {  // scale.hpp's ColourMapping::position
    if (!(w > 0)) return 0;
    var t = d.scale === 'row' ? (rowMax > 0 ? w / rowMax : 0)
          : d.scale === 'log' ? (w <= floor ? 0 : Math.log(w / floor) / Math.log(vmax / floor)) : w / vmax;
    return Math.max(0, Math.min(1, t));
  }
  function fmt(w) { return w === 0 ? '0' : w.toPrecision(3); }
  // the text and its tokens
  $('text').textContent = d.text || '(token ids)';
  d.tokens.forEach(function (t, i) { var s = el('span', 'tok', t); var n = el('sub', null, String(i)); s.title = 'id ' + d.ids[i]; s.appendChild(n); $('tokens').appendChild(s); });
  // the grid of thumbnails
  var roles = {};
  d.table.forEach(function (r) { roles[r.layer + ',' + r.head] = r.role; });
  var grid = $('grid'), head = el('tr');
  head.appendChild(el('th'));
  for (var h = 0; h < d.heads; h++) head.appendChild(el('th', null, 'head ' + h));
  grid.appendChild(head);
  var canvases = [];
  d.layers.forEach(function (layer, k) {
    var tr = el('tr');
    tr.appendChild(el('th', 'layer', 'layer ' + layer));
    for (var h = 0; h < d.heads; h++) {
      var td = el('td'), cv = el('canvas', 'thumb');
      cv.width = d.thumbs.cols; cv.height = d.thumbs.rows;
      cv.dataset.layer = layer; cv.dataset.head = h; cv.dataset.k = k;
      cv.title = 'layer ' + layer + ', head ' + h + (roles[layer + ',' + h] ? ': ' + roles[layer + ',' + h] : '');
      cv.addEventListener('click', (function (k, h) { return function () { open(k, h); }; })(k, h));
      var role = roles[layer + ',' + h] || '';
      if (role) td.className = 'has-role';
      td.appendChild(cv); td.appendChild(el('div', 'role', role));
      tr.appendChild(td); canvases.push(cv);
    }
    grid.appendChild(tr);
  });
  body.dataset.cells = String(canvases.length);
  var thumbsDrawn = inflate(d.thumbs.data).then(function (bytes) {
    var n = d.thumbs.rows * d.thumbs.cols;
    canvases.forEach(function (cv, i) {
      var g = cv.getContext('2d'), img = g.createImageData(d.thumbs.cols, d.thumbs.rows);
      for (var j = 0; j < n; j++) {
        var e = bytes[i * n + j] * 6, px = j * 4;
        img.data[px] = parseInt(d.viridis.substr(e, 2), 16); img.data[px + 1] = parseInt(d.viridis.substr(e + 2, 2), 16);
        img.data[px + 2] = parseInt(d.viridis.substr(e + 4, 2), 16); img.data[px + 3] = 255;
      }
      g.putImageData(img, 0, 0);
    });
    body.dataset.thumbs = String(canvases.length);
  });
  // one head large
  function labels(box, texts, cls, px, along) {
    box.innerHTML = '';
    var every = Math.max(1, Math.ceil(11 / px));
    texts.forEach(function (t, i) {
      var s = el('div', cls, i % every === 0 ? t : '');
      s.style[along] = (px * (i % every === 0 ? Math.min(every, texts.length - i) : 0)) + 'px';
      if (i % every === 0) box.appendChild(s);
    });
  }
  var pending = Promise.resolve();  // the head being opened
  function open(k, h) { pending = show(k, h); return pending; }
  function show(k, h) {
    var layer = d.layers[k], at = k * d.heads + h;
    canvases.forEach(function (c) { c.classList.remove('open'); });
    canvases[at].classList.add('open');
    $('view').style.display = 'block';
    $('view-title').textContent = 'layer ' + layer + ', head ' + h + (roles[layer + ',' + h] ? ' (' + roles[layer + ',' + h] + ')' : '') +
        ': rows are queries, columns keys; one cell = ' + full.q_block + ' x ' + full.k_block + ' tokens';
    return inflate(full.data[at]).then(function (bytes) {
      var rows = full.rows, cols = full.cols, px = Math.max(1, Math.min(28, Math.floor(560 / Math.max(rows, cols))));
      var maxima = new Float32Array(bytes.buffer.slice(0, rows * 4)), cells = bytes.subarray(rows * 4);
      var cv = $('big'); cv.width = cols * px; cv.height = rows * px;
      var g = cv.getContext('2d');
      for (var r = 0; r < rows; r++)
        for (var c = 0; c < cols; c++) {
          var w = cells[r * cols + c] / 255 * maxima[r];
          g.fillStyle = colour(Math.floor(place(w, maxima[r]) * 256)); g.fillRect(c * px, r * px, px, px);
        }
      labels($('rows'), full.qlabels, 'qlabel', px, 'height');
      labels($('cols'), full.klabels, 'klabel', px, 'width');
      cv.onmousemove = function (e) {
        var r = Math.min(rows - 1, Math.floor(e.offsetY / px)), c = Math.min(cols - 1, Math.floor(e.offsetX / px));
        var w = cells[r * cols + c] / 255 * maxima[r];
        $('readout').textContent = 'query ' + r * full.q_block + ' ' + full.qlabels[r] + '  ->  key ' + c * full.k_block + ' ' +
            full.klabels[c] + ':  ' + fmt(w) + (full.q_block * full.k_block > 1 ? ' (mean of the cell)' : '');
      };
      body.dataset.opened = layer + ',' + h;
    });
  }
  // the detector table: a row opens its head
  var fields = ['mean_entropy', 'previous_token', 'diagonal', 'first_token', 'max_weight', 'induction'];
  var present = fields.filter(function (f) { return d.table.some(function (r) { return f in r; }); });
  var table = $('detectors'), top = el('tr');
  ['layer', 'head', 'role'].concat(present).forEach(function (f) { top.appendChild(el('th', null, f)); });
  table.appendChild(top);
  d.table.forEach(function (r) {
    var tr = el('tr', 'head-row' + (r.role ? ' has-role' : ''));
    tr.appendChild(el('td', null, String(r.layer))); tr.appendChild(el('td', null, String(r.head)));
    tr.appendChild(el('td', 'role-cell', r.role || ''));
    present.forEach(function (f) { tr.appendChild(el('td', null, typeof r[f] === 'number' ? r[f].toFixed(3) : '-')); });
    tr.addEventListener('click', function () { open(d.layers.indexOf(r.layer), r.head); });
    table.appendChild(tr);
  });
  // rollout
  if (d.rollout) {
    var ro = d.rollout, rpx = Math.max(1, Math.min(24, Math.floor(480 / Math.max(ro.rows, ro.cols))));
    var rc = $('rollout'), rg = rc.getContext('2d');
    rc.width = ro.cols * rpx; rc.height = ro.rows * rpx;
    for (var r = 0; r < ro.rows; r++) {
      var row = ro.cells.slice(r * ro.cols, (r + 1) * ro.cols), m = Math.max.apply(null, row);
      for (var c = 0; c < ro.cols; c++) { rg.fillStyle = colour(Math.floor(place(row[c], m) * 256)); rg.fillRect(c * rpx, r * rpx, rpx, rpx); }
    }
    labels($('rollout-rows'), ro.qlabels, 'qlabel', rpx, 'height');
    labels($('rollout-cols'), ro.klabels, 'klabel', rpx, 'width');
    rc.onmousemove = function (e) {
      var r = Math.min(ro.rows - 1, Math.floor(e.offsetY / rpx)), c = Math.min(ro.cols - 1, Math.floor(e.offsetX / rpx));
      $('rollout-readout').textContent = 'position ' + ro.qlabels[r] + ' takes ' + fmt(ro.cells[r * ro.cols + c]) + ' from input ' + ro.klabels[c];
    };
  } else {
    $('rollout-section').style.display = 'none';
  }
  // predictions
  var pt = $('predictions');
  if (!d.predictions.length) pt.parentNode.style.display = 'none';
  d.predictions.forEach(function (p) {
    var tr = el('tr');
    tr.appendChild(el('th', null, 'after ' + (d.tokens[p.position] || p.position) + ' (' + p.position + ')'));
    p.top.forEach(function (c) { tr.appendChild(el('td', null, c.text + '  ' + (100 * c.probability).toFixed(1) + '%')); });
    pt.appendChild(tr);
  });
  $('legend').textContent = 'colour scale: ' + d.scale + (d.scale === 'row' ? ' (each row from 0 to its own maximum)' :
      d.scale === 'log' ? ' from ' + fmt(floor) + ' (and under) to ' + fmt(vmax) : ' from 0 to ' + fmt(vmax)) +
      '; thumbnails: ' + d.thumbs.q_block + ' x ' + d.thumbs.k_block + ' tokens a cell; click a head to open it';
  // Once the thumbnails are drawn, #open=K,H clicks the thumbnail of kept layer K, head H (#selftest:
  // the first), #row=N the detector table's row N: the browser tests read the page's state then.
  var cell = location.hash === '#selftest' ? [0, 0] : (location.hash.match(/^#open=(\d+),(\d+)$/) || []).slice(1).map(Number);
  var row = (location.hash.match(/^#row=(\d+)$/) || [])[1];
  thumbsDrawn.then(function () {
    if (cell.length === 2) canvases[cell[0] * d.heads + cell[1]].click();
    if (row != null) table.querySelectorAll('tr.head-row')[Number(row)].click();
    return pending;
  }).then(function () { body.dataset.ready = '1'; body.dataset.readyMs = String(Math.round(performance.now())); }, function (e) { $('error').textContent = String(e); body.dataset.errors = 'inflate'; });
})();
)JS";

}  // namespace

std::string model_report_html(const ModelPictures& m) {
    if (m.weights.empty() || m.tokens.empty()) throw UsageError("report: no layer's weights to show");
    std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attntrace: " +
                      escape_markup(m.title) + "</title>\n<style>" + kStyle + "</style></head>\n<body>\n";
    out += "<h1>" + escape_markup(m.title) + "</h1>\n<div id=\"error\"></div>\n<h2>Text and tokens</h2>\n<div id=\"text\"></div>\n"
           "<div id=\"tokens\"></div>\n<h2>Every head (rows are queries, columns keys)</h2>\n<p id=\"legend\"></p>\n"
           "<div id=\"main\"><table id=\"grid\"></table>\n<div id=\"view\"><div id=\"view-title\"></div><div id=\"readout\"></div>"
           "<div class=\"wrap\"><div class=\"rows\" id=\"rows\"></div><canvas class=\"big\" id=\"big\"></canvas>"
           "<div class=\"cols\" id=\"cols\"></div></div></div></div>\n";
    out += "<h2>Head detectors (click a row to open its head)</h2>\n<table class=\"data\" id=\"detectors\"></table>\n";
    out += "<div id=\"rollout-section\"><h2>Rollout across the kept layers (how much each input token flows into each "
           "position)</h2>\n<div id=\"rollout-readout\" class=\"readout\"></div><div id=\"rollout-wrap\"><div class=\"rows\" id=\"rollout-rows\"></div><canvas class=\"big\" id=\"rollout\"></canvas><div class=\"cols\" "
           "id=\"rollout-cols\"></div></div></div>\n";
    out += "<div><h2>Top predictions</h2>\n<table class=\"data\" id=\"predictions\"></table></div>\n";
    out += "<script type=\"application/json\" id=\"data\">" + script_json(page_data(m)) + "</script>\n";
    out += std::string("<script>") + kScript + "</script>\n</body></html>\n";
    return out;
}

}  // namespace attntrace
