# Writes the inputs of make_db_test.cc with known content: an image folder with its lists (good and bad),
# an idx pair (images gzip-compressed, labels plain) and two CIFAR-10 binary batches. Usage:
# make_db_reference.py OUT_DIR
#
# Every expected image is a raw file NAME.raw of (height, width, channels) uint8 pixels, listed in
# OUT_DIR/manifest.txt as "NAME height width channels"; folder images are named by their place in the list
# ("folder3.rgb"). Raw colour records hold BGR, as convert_imageset writes them: NAME.bgr is that order.
import gzip
import os
import struct
import sys

import numpy as np
from PIL import Image

out_dir = sys.argv[1]
manifest = []


def path(name):
    return os.path.join(out_dir, name)


def expect(name, pixels):
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    pixels.tofile(path(name + ".raw"))
    manifest.append("%s %d %d %d" % ((name,) + pixels.shape))


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


noise = np.random.RandomState(11)

# The folder: PNGs (exact pixels), JPEGs (compared with the decoder's own output), one gray PNG, one in a
# subfolder whose name holds a space. `list.txt` holds them in an order that is not sorted, with labels that
# are not in order either, a blank line and trailing spaces.
os.makedirs(path("images/sub dir"))
folder = [("b.png", (37, 53), 3), ("a.png", (20, 20), 3), ("sub dir/c d.png", (24, 17), 3),
          ("e.jpg", (30, 40), 3), ("gray.png", (19, 26), 1), ("f.jpg", (16, 33), 3), ("g.png", (9, 12), 3)]
labels = [7, 0, 3, 12, 5, 1, 2]
for i, ((name, (height, width), channels), label) in enumerate(zip(folder, labels)):
    pixels = noise.randint(0, 256, size=(height, width, channels)).astype(np.uint8)
    image = Image.fromarray(pixels[:, :, 0], "L") if channels == 1 else Image.fromarray(pixels)
    if name.endswith(".jpg"):
        image.save(path("images/" + name), quality=90)
        continue
    image.save(path("images/" + name))
    rgb = image.convert("RGB")
    expect("folder%d.rgb" % i, np.array(rgb))
    expect("folder%d.bgr" % i, np.array(rgb)[:, :, ::-1])
    expect("folder%d.gray" % i, np.array(image.convert("L")))
    # The shortest side to 8 pixels, the other rounded down, with Pillow's bilinear filter.
    scale = 8.0 / min(height, width)
    size = (8, int(height * scale)) if width <= height else (int(width * scale), 8)
    expect("folder%d.rgb.resize8" % i, np.array(rgb.resize(size, Image.BILINEAR)))
with open(path("list.txt"), "w") as f:
    for (name, _, _), label in zip(folder, labels):
        f.write("%s %d  \n" % (name, label))
        if name == "a.png":
            f.write("\n")

write("images/notes.png", b"these are notes, not an image\n")
with open(path("bad_line.txt"), "w") as f:
    f.write("a.png 0\nb.png\n")
with open(path("bad_label.txt"), "w") as f:
    f.write("a.png 0\nb.png 1\ng.png two\n")
with open(path("negative_label.txt"), "w") as f:
    f.write("a.png 0\nb.png -1\n")
with open(path("missing.txt"), "w") as f:
    f.write("a.png 0\nnothere.png 1\n")
with open(path("not_image.txt"), "w") as f:
    f.write("a.png 0\nnotes.png 1\n")

# idx: 6 gray images of 5 x 4 in a gzip-compressed idx3 file, their labels in a plain idx1 file.
idx_images = noise.randint(0, 256, size=(6, 5, 4)).astype(np.uint8)
idx_labels = np.array([3, 1, 4, 1, 5, 9], dtype=np.uint8)
with gzip.open(path("images.idx3.gz"), "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 6, 5, 4) + idx_images.tobytes())
write("labels.idx1", struct.pack(">II", 0x801, 6) + idx_labels.tobytes())
for i in range(6):
    expect("idx.%d" % i, idx_images[i])

# CIFAR-10: two batches of 3 and 2 records, each a label byte then the R, G and B planes of 32 x 32.
cifar_labels = [[9, 0, 4], [2, 7]]
for batch, batch_labels in enumerate(cifar_labels):
    data = b""
    for i, label in enumerate(batch_labels):
        planes = noise.randint(0, 256, size=(3, 32, 32)).astype(np.uint8)
        data += bytes([label]) + planes.tobytes()
        expect("cifar.%d.%d" % (batch, i), planes.transpose(1, 2, 0))
        expect("cifar.%d.%d.bgr" % (batch, i), planes[::-1].transpose(1, 2, 0))
    write("batch_%d.bin" % batch, data)
write("short.bin", b"\x01" * 3000)

with open(path("manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
