"""Browser test: `dtensor show` writes an HTML page; headless Chromium loads it from disk, takes a
screenshot (it must not be blank) and dumps the DOM (it must list every rank and every step).
A copy of the page with a layout probe measures, in the browser, every text element of the
picture: none may leave the picture, overlap another text, leave its block (rank labels in the
state panels) or its cell (rank numbers in the mesh).
Usage: browser_test.py DTENSOR CHROMIUM WORKDIR"""
import json, os, re, struct, subprocess, sys, zlib

def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA PNG (what Chromium writes) with the standard library only."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), f"unsupported PNG {depth} {ctype}"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    i = 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line)); prev = line
    return w, h, bpp, rows

# Runs in the page: the rendered bounding box of every <text> of the picture, checked against the
# picture, every other text, and the rectangle it labels. Writes its findings into the DOM.
PROBE = r"""<script>
(function(){
  const svg = document.querySelector('svg#plan'), S = svg.getBoundingClientRect(), eps = 0.5, bad = [];
  const texts = Array.from(svg.querySelectorAll('text'));
  const box = e => e.getBoundingClientRect();
  const name = t => JSON.stringify(t.textContent);
  const inside = (a, b) => a.left >= b.left - eps && a.right <= b.right + eps && a.top >= b.top - eps && a.bottom <= b.bottom + eps;
  const boxes = texts.map(box);
  texts.forEach((t, i) => { if (!inside(boxes[i], S)) bad.push('outside the picture: ' + name(t)); });
  for (let i = 0; i < texts.length; ++i)
    for (let j = i + 1; j < texts.length; ++j) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > eps && h > eps) bad.push('overlap: ' + name(texts[i]) + ' and ' + name(texts[j]));
    }
  svg.querySelectorAll('g.blk').forEach(g => {
    const outline = g.querySelector('rect[stroke-width="0.6"]'), t = g.querySelector('text');
    if (outline && t && !inside(box(t), box(outline))) bad.push('label outside its block: ' + name(t));
  });
  svg.querySelectorAll('#mesh g.rank').forEach(g => {
    const r = g.querySelector('rect'), t = g.querySelector('text');
    if (t && !inside(box(t), box(r))) bad.push('rank number outside its cell: ' + name(t));
  });
  const out = document.createElement('pre');
  out.id = 'layout-check';
  out.textContent = JSON.stringify({texts: texts.length, bad: bad});
  document.body.appendChild(out);
})();
</script>"""

def layout_check(chromium, flags, html, work):
    probe = os.path.join(work, "probe.html")
    page = open(html, encoding="utf-8").read()
    assert "</body>" in page
    open(probe, "w", encoding="utf-8").write(page.replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([chromium, *flags, "--window-size=1400,900", "--dump-dom", "file://" + probe], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert m, "the layout probe did not run"
    found = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert found["texts"] > 0, "no text measured"
    assert not found["bad"], f"{len(found['bad'])} layout defects: " + "; ".join(found["bad"][:10])
    return found["texts"]

def main():
    dtensor, chromium, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    cases = [("2x4", "64x48", "S(0)S(1)", "S(1)S(0)", 8), ("4x2", "15x5", "_S(0, 2)S(0)", "P(sum)S(1)", 8),
             # a 3-d mesh (grid of grids), Partial notes, a flattened collective
             ("2x2x2", "64x48", "P(sum)S(0)S(1)", "S(1)[1]S(1)[0]R", 8),
             # named 4-d mesh, long placements that wrap, P(max), a direct exchange
             ("pp=2,dp=2,ep=2,tp=4", "64x48x8", "P(sum)S(0)S(1)_S(0, 2)", "S(1)[1]S(1)[0]RP(max)", 32),
             ("2x2x2", "60x70", "_S(0, 3)[1]_S(0, 3)[0]_S(1, 2)", "P(sum)P(avg)S(1)", 8),
             # a 1-d mesh, a 1-d tensor, a runner-up through the same states
             ("8", "100", "S(0)", "R", 8),
             # a wide mesh: small cells
             ("4x32", "1024x256", "S(0)S(1)", "S(1)R", 128)]
    for mesh, shape, src, dst, nranks in cases:
        html = os.path.join(work, "plan.html")
        subprocess.run([dtensor, "show", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst, "-o", html], check=True)
        plan = subprocess.run([dtensor, "plan", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst, "--format", "json"],
                              check=True, capture_output=True, text=True).stdout
        nsteps = len(json.loads(plan)["steps"])
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files"]
        png = os.path.join(work, "plan.png")
        if os.path.exists(png): os.remove(png)
        subprocess.run([chromium, *flags, f"--screenshot={png}", "--window-size=1400,900", "file://" + html],
                       check=True, capture_output=True, timeout=120)
        w, h, bpp, rows = png_pixels(png)
        colors = set()
        for y in range(0, h, 7):
            r = rows[y]
            for x in range(0, w, 7):
                colors.add(r[x * bpp:x * bpp + 3])
        assert len(colors) >= 8, f"screenshot looks blank: {len(colors)} colours"
        dom = subprocess.run([chromium, *flags, "--dump-dom", "file://" + html], check=True, capture_output=True,
                             text=True, timeout=120).stdout
        for r in range(nranks):
            assert re.search(rf'<li class="rank[^"]*" data-rank="{r}"', dom), f"rank {r} missing from the DOM"
        steps = len(re.findall(r'<li class="step', dom))
        assert steps == max(nsteps, 1), f"DOM lists {steps} steps, the plan has {nsteps}"
        assert len(re.findall(r'<g class="state"', dom)) == nsteps + 1
        ntexts = layout_check(chromium, flags, html, work)
        print(f"{mesh} {src} -> {dst}: screenshot {w}x{h} with {len(colors)} colours, {nranks} ranks and {nsteps} steps in "
              f"the DOM, {ntexts} texts laid out without overlap")
    print("1 passed, 0 failed")

main()
