"""Writes LMDBs where every image is stored twice, raw and as a JPEG, the way Caffe and Caffe2 tools do.

Usage: write_color_pairs.py OUT_DIR

OUT_DIR holds caffe_pb2.py and caffe2_pb2.py, which protoc generated from Caffe's and Caffe2's own schemas
(package caffe, message Datum; package caffe2, messages TensorProto and TensorProtos), so the records are
serialized by protobuf itself, independently of lockstep. Writes:
- OUT_DIR/datum_lmdb: Caffe Datum records as convert_imageset writes them;
- OUT_DIR/tensorprotos_lmdb: Caffe2 TensorProtos records as make_image_db writes them.
Record 2i is image i raw and record 2i+1 the same image as a JPEG, both with label i. The raw pixels are the
JPEG's pixels as Pillow decodes them, in BGR order as OpenCV gives them (planes for Datum, interleaved for
TensorProtos), so that each pair holds exactly the same image. OUT_DIR/manifest.json lists each image's
height, width and decoded pixels in RGB (height, width, channels) order.
"""
import io
import json
import os
import sys

import lmdb
import numpy as np
from PIL import Image

out_dir = sys.argv[1]
sys.path.insert(0, out_dir)
import caffe_pb2  # noqa: E402
import caffe2_pb2  # noqa: E402

# (height, width): the shortest side of each is 16, and the rest differ, so both orientations are covered.
SIZES = [(16, 20), (24, 16), (16, 16), (19, 16)]


def make_images():
    rng = np.random.RandomState(20240612)
    images = []
    for height, width in SIZES:
        # Smooth gradients, a different one per channel, plus noise: a channel swap changes every value.
        y, x = np.mgrid[0:height, 0:width]
        base = np.stack([40 + 8 * x, 200 - 6 * y, 90 + 3 * (x + y)], axis=2)
        pixels = np.clip(base + rng.randint(-20, 21, size=base.shape), 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        jpeg = buffer.getvalue()
        rgb = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
        images.append((jpeg, rgb))
    return images


def datum_pair(label, jpeg, rgb):
    bgr = rgb[:, :, ::-1]
    raw = caffe_pb2.Datum(channels=3, height=rgb.shape[0], width=rgb.shape[1],
                          data=np.ascontiguousarray(bgr.transpose(2, 0, 1)).tobytes(), label=label)
    encoded = caffe_pb2.Datum(data=jpeg, label=label, encoded=True)
    return raw.SerializeToString(), encoded.SerializeToString()


def label_proto(protos, label):
    proto = protos.protos.add()
    proto.data_type = caffe2_pb2.TensorProto.INT32
    proto.dims.append(1)
    proto.int32_data.append(label)


def tensorprotos_pair(label, jpeg, rgb):
    bgr = rgb[:, :, ::-1]
    raw = caffe2_pb2.TensorProtos()
    image = raw.protos.add()
    image.data_type = caffe2_pb2.TensorProto.BYTE
    image.dims.extend(bgr.shape)
    image.byte_data = np.ascontiguousarray(bgr).tobytes()
    label_proto(raw, label)
    encoded = caffe2_pb2.TensorProtos()
    image = encoded.protos.add()
    image.data_type = caffe2_pb2.TensorProto.STRING
    image.dims.append(1)
    image.string_data.append(jpeg)
    label_proto(encoded, label)
    return raw.SerializeToString(), encoded.SerializeToString()


def write(path, images, make_pair):
    env = lmdb.open(path, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for label, (jpeg, rgb) in enumerate(images):
            raw, encoded = make_pair(label, jpeg, rgb)
            txn.put(b"%08d_raw" % (2 * label), raw)
            txn.put(b"%08d_jpg" % (2 * label + 1), encoded)
    env.close()


def main():
    images = make_images()
    write(os.path.join(out_dir, "datum_lmdb"), images, datum_pair)
    write(os.path.join(out_dir, "tensorprotos_lmdb"), images, tensorprotos_pair)
    manifest = [{"height": int(rgb.shape[0]), "width": int(rgb.shape[1]), "rgb": rgb.reshape(-1).tolist()}
                for _, rgb in images]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"images": manifest}, f)


if __name__ == "__main__":
    main()
