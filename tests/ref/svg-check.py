#!/usr/bin/env python3
"""svg-check.py - what a picture of `rontolisp ... --svg FILE' holds, read
back independently of the code that wrote it, as one JSON object on stdout.

  svg-check.py FILE.svg            the SVG parsed as XML (a parse error
                                   exits 1): its size, title, panels, the
                                   series with their marks (and whether any
                                   is in sight, not under a later mark), the
                                   legend, every text, and any coordinate
                                   that is not a finite number
  svg-check.py FILE.svg FILE.png   that, and per series the pixels of the
                                   PNG (a rendering of FILE.svg at its own
                                   size) inside the panels' plotting areas
                                   that have the series' colour

The PNG is decoded here with zlib (8-bit RGB or RGBA, not interlaced: what
chromium's --screenshot writes), so the check needs no imaging library.
"""
import json
import math
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"
NUMERIC = ("x", "y", "width", "height", "cx", "cy", "r", "x1", "y1", "x2", "y2")


def number(text, bad, where):
    try:
        v = float(text)
    except ValueError:
        bad.append("%s=%r" % (where, text))
        return None
    if not math.isfinite(v):
        bad.append("%s=%r" % (where, text))
        return None
    return v


def classes(e):
    return (e.get("class") or "").split()


def structure(path):
    root = ET.parse(path).getroot()
    if root.tag != NS + "svg":
        raise SystemExit("%s: expected an <svg> root element, found %s" % (path, root.tag))
    bad = []
    for e in root.iter():
        tag = e.tag.replace(NS, "")
        for a in NUMERIC:
            if e.get(a) is not None and not e.get(a).endswith("%"):
                number(e.get(a), bad, "%s %s" % (tag, a))
        if e.get("points") is not None:
            for pair in e.get("points").split():
                for v in pair.split(","):
                    number(v, bad, tag + " points")
    out = {
        "width": number(root.get("width"), bad, "svg width"),
        "height": number(root.get("height"), bad, "svg height"),
        "title": root.findtext(NS + "title"),
        "texts": ["".join(t.itertext()) for t in root.iter(NS + "text")],
        "panels": [],
        "series": {},
        "legend": [],
        "bad_numbers": bad,
        "scripts": len(list(root.iter(NS + "script"))) + len(list(root.iter(NS + "image"))),
        "external": [v for e in root.iter() for k, v in e.attrib.items()
                     if k.endswith("href") and not v.startswith("#")],
    }
    marks = []  # (series, cx, cy, r) in drawing order
    for g in root.iter(NS + "g"):
        if "panel" in classes(g):
            rect = next(r for r in g.iter(NS + "rect") if "plot" in classes(r))
            out["panels"].append({"title": g.get("data-title"),
                                  "plot": [float(rect.get(k)) for k in ("x", "y", "width", "height")]})
        elif "series" in classes(g):
            s = out["series"].setdefault(g.get("data-series"),
                                         {"marks": 0, "lines": 0, "bars": 0, "colours": []})
            for e in g:
                c = classes(e)
                colour = e.get("fill") if e.get("fill") not in (None, "none") else e.get("stroke")
                if colour not in s["colours"]:
                    s["colours"].append(colour)
                if "mark" in c:
                    s["marks"] += 1
                    marks.append((g.get("data-series"), float(e.get("cx")), float(e.get("cy")),
                                  float(e.get("r"))))
                elif "line" in c:
                    s["lines"] += 1
                elif "bar" in c:
                    s["bars"] += 1
        elif "legend-entry" in classes(g):
            out["legend"].append(g.get("data-series"))
    # A mark is in sight unless a mark drawn after it lies closer than its
    # radius (then at most a sliver of it shows); a series is in sight when
    # one of its marks, bars or, without marks, its lines is.
    for name, s in out["series"].items():
        s["in_sight"] = s["bars"] > 0 or (s["lines"] > 0 and s["marks"] == 0)
    for i, (name, x, y, r) in enumerate(marks):
        if all(math.hypot(x - x2, y - y2) >= r for _, x2, y2, _ in marks[i + 1:]):
            out["series"][name]["in_sight"] = True
    return out


def png_pixels(path):
    """(width, height, channels, rows) of the 8-bit RGB or RGBA PNG PATH."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("%s: expected a PNG file" % path)
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise SystemExit("%s: expected 8-bit RGB or RGBA, not interlaced" % path)
    n = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * n
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - n] if i >= n else 0
            b = prev[i]
            c = prev[i - n] if i >= n else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, n, rows


def colour_pixels(png, panels, series, tolerance=12):
    width, height, n, rows = png_pixels(png)
    wanted = {}
    for name, s in series.items():
        hexes = [c for c in s["colours"] if c and c.startswith("#") and len(c) == 7]
        if hexes:
            wanted[name] = tuple(int(hexes[0][i:i + 2], 16) for i in (1, 3, 5))
    counts = {name: 0 for name in wanted}
    for p in panels:
        x0, y0, w, h = p["plot"]
        for y in range(max(0, int(y0) + 1), min(height, int(y0 + h))):
            row = rows[y]
            for x in range(max(0, int(x0) + 1), min(width, int(x0 + w))):
                px = row[x * n:x * n + 3]
                for name, rgb in wanted.items():
                    if all(abs(px[i] - rgb[i]) <= tolerance for i in range(3)):
                        counts[name] += 1
    return {"png_width": width, "png_height": height, "pixels": counts}


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: svg-check.py FILE.svg [FILE.png]")
    out = structure(sys.argv[1])
    if len(sys.argv) == 3:
        out.update(colour_pixels(sys.argv[2], out["panels"], out["series"]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
