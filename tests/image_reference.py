# Writes the reference images for image_test.cc with Pillow: PNGs of every colour type with known pixels,
# JPEGs with Pillow's own decode of them, and Pillow's bilinear resizes. Usage: image_reference.py OUT_DIR
#
# Every expected result is a raw file NAME.raw of (height, width, channels) uint8 pixels, listed in
# OUT_DIR/manifest.txt as "NAME height width channels".
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

out_dir = sys.argv[1]
manifest = []


def expect(name, pixels):
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    pixels.tofile(os.path.join(out_dir, name + ".raw"))
    manifest.append("%s %d %d %d" % ((name,) + pixels.shape))


def path(name):
    return os.path.join(out_dir, name)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# Adam7's passes as (first column, first row, column step, row step).
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(name, samples, bit_depth, color_type, interlaced=False):
    # Pillow writes neither 16-bit RGB nor interlaced PNGs, so these few are assembled by hand (filter 0 on
    # every row).
    dtype = ">u2" if bit_depth == 16 else "u1"
    passes = [samples[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlaced else [samples]
    raw = b""
    for image in passes:
        if image.size:
            raw += b"".join(b"\x00" + row.astype(dtype).tobytes() for row in image.reshape(image.shape[0], -1))
    height, width = samples.shape[:2]
    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 1 if interlaced else 0)
    with open(path(name), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(raw))
                + png_chunk(b"IEND", b""))


height, width = 37, 53
y, x = np.mgrid[0:height, 0:width]
checker = ((y // 4 + x // 4) % 2) * 255
rgb = np.stack([(x * 255) // (width - 1), (y * 255) // (height - 1), checker], axis=2).astype(np.uint8)
gray = ((x * 3 + y * 5) % 256).astype(np.uint8)

# PNG, 8-bit RGB and RGBA (alpha is dropped, whatever its value), gray, gray asked for in RGB.
Image.fromarray(rgb).save(path("rgb.png"))
expect("rgb.png", rgb)
expect("rgb.png.gray", np.array(Image.fromarray(rgb).convert("L")))
alpha = ((x * 7 + y) % 256).astype(np.uint8)
Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(path("rgba.png"))
expect("rgba.png", rgb)
Image.fromarray(gray, "L").save(path("gray.png"))
expect("gray.png", gray)
expect("gray.png.rgb", np.repeat(gray[:, :, None], 3, axis=2))

# Palette with transparency: the colours of the palette, the transparency dropped.
palette = np.array([[17 * i, 255 - 17 * i, (37 * i) % 256] for i in range(16)], dtype=np.uint8)
indices = ((x // 3 + y // 2) % 16).astype(np.uint8)
paletted = Image.fromarray(indices, "L").convert("P")
paletted.putpalette(palette.flatten().tolist())
paletted.save(path("palette.png"), transparency=3)
expect("palette.png", palette[indices])

# 1-bit gray: 0 and 255.
Image.fromarray(checker.astype(np.uint8), "L").convert("1").save(path("bilevel.png"))
expect("bilevel.png", checker)

# 16-bit gray and RGB keep the high byte.
gray16 = (x * 1201 + y * 37).astype(np.uint16)
write_png("gray16.png", gray16, 16, 0)
expect("gray16.png", gray16 >> 8)
rgb16 = np.stack([x * 1201 + y, y * 1700 + x, (x * y * 31) % 65536], axis=2).astype(np.uint16)
write_png("rgb16.png", rgb16, 16, 2)
expect("rgb16.png", rgb16 >> 8)
write_png("interlaced.png", rgb, 8, 2, interlaced=True)
expect("interlaced.png", rgb)

# JPEG at quality 95: Pillow's decode, which uses the same libjpeg-turbo. Gray from a colour JPEG is its luma
# (Pillow's draft mode "L" decodes straight to it).
Image.fromarray(rgb).save(path("rgb.jpg"), quality=95)
expect("rgb.jpg", np.array(Image.open(path("rgb.jpg")).convert("RGB")))
luma = Image.open(path("rgb.jpg"))
luma.draft("L", luma.size)
expect("rgb.jpg.gray", np.array(luma.convert("L")))
Image.fromarray(rgb).save(path("progressive.jpg"), quality=95, progressive=True)
expect("progressive.jpg", np.array(Image.open(path("progressive.jpg")).convert("RGB")))
Image.fromarray(rgb).save(path("444.jpg"), quality=95, subsampling=0)
expect("444.jpg", np.array(Image.open(path("444.jpg")).convert("RGB")))
Image.fromarray(gray, "L").save(path("gray.jpg"), quality=95)
expect("gray.jpg", np.array(Image.open(path("gray.jpg"))))
Image.fromarray(rgb).convert("CMYK").save(path("cmyk.jpg"), quality=95)
expect("cmyk.jpg", np.array(Image.open(path("cmyk.jpg")).convert("RGB")))

# Bilinear resizes of noise, shrinking (by a non-integer factor, and a lot) and enlarging.
noise = np.random.RandomState(7).randint(0, 256, size=(97, 131, 3)).astype(np.uint8)
expect("noise", noise)
for name, size in [("shrink", (45, 33)), ("shrink_a_lot", (17, 7)), ("enlarge", (250, 180)),
                   ("width_only", (60, 97)), ("height_only", (131, 40))]:
    expect("noise." + name, np.array(Image.fromarray(noise).resize(size, Image.BILINEAR)))
noise_gray = noise[:, :, 1].copy()
expect("noise_gray", noise_gray)
expect("noise_gray.shrink", np.array(Image.fromarray(noise_gray, "L").resize((45, 33), Image.BILINEAR)))

with open(path("manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
