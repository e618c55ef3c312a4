#!/usr/bin/python3
"""Reads attntrace's pictures back with the standard library only (no PIL, no matplotlib), for the
e2e tests: a PNG decoder (zlib + the five PNG row filters) and the SVG through xml.etree.

  picture_files.py png FILE.png   -> JSON {"panels": [...], "brightest": {head: [key per row]}}
  picture_files.py svg FILE.svg   -> JSON {"panels": [...], "brightest": {...}, "qlabels", "klabels", "title"}

"brightest" is, per panel and per cell row, the cell column whose colour is the lightest (viridis
grows monotonically lighter with the weight); the PNG reads each cell at its centre pixel. A panel
is keyed by its head, or "LAYER.HEAD" in the pictures of a whole model (attntrace model --plot).
"""
import json
import struct
import sys
import xml.etree.ElementTree as ET
import zlib


def luminance(rgb):
    r, g, b = rgb
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    at, idat, text = 8, b"", {}
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        crc = struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, "bad CRC in " + kind.decode()
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 2), "expected 8-bit RGB"
        elif kind == b"IDAT":
            idat += body
        elif kind == b"tEXt":
            key, value = body.split(b"\0", 1)
            text[key.decode()] = value.decode()
        at += 12 + n
    raw, stride, bpp = zlib.decompress(idat), w * 3, 3
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            line[x] = (line[x] + (0, a, b, (a + b) // 2, paeth(a, b, c))[f]) & 0xFF
        rows.append(line)
        prev = line
    return w, h, rows, text


def panel_key(p):
    return "%d.%d" % (int(p["layer"]), int(p["head"])) if p.get("layer") is not None else str(p["head"])


def png_summary(path):
    w, h, rows, text = read_png(path)
    panels = json.loads(text["attntrace:panels"])
    brightest = {}
    for p in panels:
        cell, best = p["cell"], []
        for r in range(p["rows"]):
            y = p["y"] + r * cell + cell // 2
            lum = [luminance(rows[y][3 * (p["x"] + c * cell + cell // 2):][:3]) for c in range(p["cols"])]
            best.append(max(range(p["cols"]), key=lambda c: lum[c]))
        brightest[panel_key(p)] = best
    return {"width": w, "height": h, "panels": panels, "brightest": brightest}


def svg_summary(path):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    panels, brightest = [], {}
    for g in root.iter(ns + "g"):
        if g.get("class") != "panel":
            continue
        rows, cols = int(g.get("data-rows")), int(g.get("data-cols"))
        fills = [r.get("fill") for r in g.iter(ns + "rect")]
        assert len(fills) == rows * cols, "a panel has %d rects for %dx%d cells" % (len(fills), rows, cols)
        lum = [luminance(bytes.fromhex(f[1:])) for f in fills]
        panel = {"head": int(g.get("data-head")), "rows": rows, "cols": cols}
        if g.get("data-layer") is not None:
            panel["layer"] = int(g.get("data-layer"))
        brightest[panel_key(panel)] = [max(range(cols), key=lambda c: lum[r * cols + c]) for r in range(rows)]
        panels.append(panel)
    texts = lambda cls: [t.text for t in root.iter(ns + "text") if t.get("class") == cls]
    return {"panels": panels, "brightest": brightest, "qlabels": texts("qlabel"), "klabels": texts("klabel"),
            "title": texts("title"), "scale": texts("scale")}


if __name__ == "__main__":
    kind, path = sys.argv[1:3]
    print(json.dumps(png_summary(path) if kind == "png" else svg_summary(path)))
