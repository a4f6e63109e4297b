"""Checks that tandem's grayscale (OpenCV's RGB2GRAY on u8:
(9798 R + 19235 G + 3735 B + 2^14) >> 15) gives the same value as ALE's own grayscale
(round(0.2989 R + 0.5870 G + 0.1140 B), what gymnasium's AtariPreprocessing reads with
getScreenGrayscale) on every colour of ALE's NTSC palette, so that grayscale on RGB
frames equals ALE's grayscale frames.

Usage: python3 resize_gray_vs_ale_palette.py PATH/TO/ale-py-0.12.1/src/ale/common/Palettes.hpp
(the ale-py sdist, fetched by the ALE crate's setup). Exits 1 on any difference.
"""

import math
import re
import sys


def main():
    text = open(sys.argv[1]).read()
    table = text[text.index("NTSCPalette[256] = {"):]
    table = table[: table.index("};")]
    values = [int(v, 16) for v in re.findall(r"0x[0-9a-fA-F]+", table)]
    assert len(values) == 256, len(values)
    # Even entries are the palette's RGB colours (odd ones hold ALE's precomputed grays).
    colours = values[0::2]
    differ = 0
    for rgb in colours:
        r, g, b = (rgb >> 16) & 255, (rgb >> 8) & 255, rgb & 255
        ale = math.floor(r * 0.2989 + g * 0.5870 + b * 0.1140 + 0.5)  # C round(), values >= 0
        ours = (r * 9798 + g * 19235 + b * 3735 + (1 << 14)) >> 15
        if ale != ours:
            differ += 1
            print(f"colour {rgb:06x}: ALE {ale}, tandem {ours}")
    print(f"{differ} of {len(colours)} NTSC colours differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
