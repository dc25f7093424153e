"""Browser test: `dtensor show` writes an HTML page; headless Chromium loads it from disk, takes a
screenshot (it must not be blank) and dumps the DOM (it must list every rank and every step).
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

def main():
    dtensor, chromium, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    cases = [("2x4", "64x48", "S(0)S(1)", "S(1)S(0)", 8), ("4x2", "15x5", "_S(0, 2)S(0)", "P(sum)S(1)", 8)]
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
        print(f"{mesh} {src} -> {dst}: screenshot {w}x{h} with {len(colors)} colours, {nranks} ranks and {nsteps} steps in the DOM")
    print("1 passed, 0 failed")

main()
