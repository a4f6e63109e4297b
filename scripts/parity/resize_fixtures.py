"""Writes OpenCV reference outputs for tandem's resize (INTER_AREA) and grayscale
(RGB2GRAY) wrappers.

Inputs are not stored: both sides generate them with the same 64-bit LCG
(x <- x * 6364136223846793005 + 1442695040888963407 mod 2^64, byte = x >> 56), either
as noise over 0..=255 or, for "palette" images, as an index into a few colours held in
horizontal runs (like Atari screens). Outputs are stored.

File format (gzip-compressed, little-endian): b"TRESIZE1", case count u32, then per
case: op u8 (0 resize INTER_AREA, 1 RGB2GRAY), style u8 (0 noise, 1 palette), seed u64,
height u16, width u16, channels u8, out_height u16, out_width u16, then the output
bytes (out_height * out_width * out_channels).

Run through scripts/parity/resize_fixtures.sh.
"""

import gzip
import struct
import sys
from pathlib import Path

import cv2
import numpy as np

MASK = (1 << 64) - 1


def lcg_bytes(seed, n):
    x = seed & MASK
    out = bytearray(n)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK
        out[i] = x >> 56
    return out


def make_image(style, seed, h, w, c):
    if style == 0:
        return np.frombuffer(bytes(lcg_bytes(seed, h * w * c)), dtype=np.uint8).reshape(h, w, c)
    # Palette: 6 colours, each row made of runs of 1..8 pixels.
    palette = np.frombuffer(bytes(lcg_bytes(seed, 6 * c)), dtype=np.uint8).reshape(6, c)
    picks = lcg_bytes(seed ^ 0x5DEECE66D, h * w)
    img = np.zeros((h, w, c), dtype=np.uint8)
    k = 0
    for y in range(h):
        x = 0
        while x < w:
            run = 1 + picks[k] % 8
            colour = palette[(picks[k] >> 3) % 6]
            img[y, x:x + run] = colour
            x += run
            k += 1
    return img


def check_gray_formula():
    """tandem's grayscale is (9798 R + 19235 G + 3735 B + 2^14) >> 15; the fixtures only
    sample colours, so check that formula against OpenCV on every RGB colour."""
    v = np.arange(1 << 24, dtype=np.uint32)
    r, g, b = ((v >> 16) & 255).astype(np.int64), ((v >> 8) & 255).astype(np.int64), (v & 255).astype(np.int64)
    img = np.stack([r, g, b], axis=1).astype(np.uint8).reshape(4096, 4096, 3)
    opencv = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).reshape(-1).astype(np.int64)
    ours = (r * 9798 + g * 19235 + b * 3735 + (1 << 14)) >> 15
    mismatches = int((ours != opencv).sum())
    assert mismatches == 0, f"grayscale formula differs from OpenCV on {mismatches} colours"


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    resize_cases = [
        # (h, w, c) -> (out_h, out_w)
        ((210, 160, 3), (84, 84)),
        ((210, 160, 1), (84, 84)),
        ((210, 160, 1), (110, 84)),
        ((250, 160, 1), (84, 84)),
        ((100, 80, 3), (50, 40)),   # 2x2: OpenCV's dedicated path
        ((100, 80, 1), (50, 40)),
        ((90, 90, 1), (30, 30)),    # 3x3 integer factor
        ((64, 48, 4), (20, 17)),
        ((11, 7, 3), (5, 3)),
        ((13, 17, 2), (13, 9)),     # one axis unchanged
        ((84, 84, 1), (84, 84)),    # identity
        ((120, 100, 3), (40, 50)),  # integer 3x2
    ]
    cases = []
    seed = 1
    for (h, w, c), (oh, ow) in resize_cases:
        for style in (0, 1):
            img = make_image(style, seed, h, w, c)
            src = img[:, :, 0] if c == 1 else img
            res = cv2.resize(src, (ow, oh), interpolation=cv2.INTER_AREA)
            cases.append(struct.pack("<BBQHHBHH", 0, style, seed, h, w, c, oh, ow) + res.tobytes())
            seed += 1
    for h, w in [(210, 160), (7, 5)]:
        for style in (0, 1):
            img = make_image(style, seed, h, w, 3)
            gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
            cases.append(struct.pack("<BBQHHBHH", 1, style, seed, h, w, 3, h, w) + gray.tobytes())
            seed += 1
    check_gray_formula()
    path = out / "opencv_resize_gray.bin.gz"
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(b"TRESIZE1" + struct.pack("<I", len(cases)) + b"".join(cases))
    print(f"{path.name}: {len(cases)} cases, {path.stat().st_size} bytes, OpenCV {cv2.__version__}")


if __name__ == "__main__":
    main()
