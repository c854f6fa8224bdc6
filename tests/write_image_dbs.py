"""Writes image databases the way Caffe and Caffe2 tools do, independently of lockstep's own writer.

Usage: write_image_dbs.py OUT_DIR

Writes an LMDB (python lmdb) and a LevelDB (plyvel) for each record format: Caffe Datum with raw CHW pixels,
Datum with an encoded PNG or JPEG, Caffe2 TensorProtos with an encoded image string, and TensorProtos with raw
HWC bytes. Raw colour pixels are the encoded databases' images in BGR order, as OpenCV gives them to both
tools. The protobuf messages are encoded here by hand, field numbers from proto/lockstep.proto, so that
the files do not come from the serializer under test. OUT_DIR/manifest.json lists every database and, in key
order, each record's key, label, serialized value and pixels (byte strings as lists of ints).
"""
import io
import json
import os
import sys

import lmdb
import numpy as np
import plyvel
from PIL import Image

# TensorProto.DataType values.
INT32, BYTE, STRING = 2, 3, 4


def varint(value):
    value &= (1 << 64) - 1  # negative int32 values take ten bytes, sign-extended, as protobuf writes them
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3 | 0) + varint(value)


def field_bytes(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def datum(label, data, channels=None, height=None, width=None, encoded=False):
    out = b""
    if channels is not None:
        out += field_varint(1, channels) + field_varint(2, height) + field_varint(3, width)
    out += field_bytes(4, data) + field_varint(5, label)
    if encoded:
        out += field_varint(7, 1)
    return out


def tensor_proto(dims, data_type, fields):
    # Caffe2 writes dims unpacked (no packed option on that field) and int32_data packed.
    return b"".join(field_varint(1, d) for d in dims) + field_varint(2, data_type) + fields


def tensor_protos(image, label):
    label_proto = tensor_proto([1], INT32, field_bytes(4, varint(label)))
    return field_bytes(1, image) + field_bytes(1, label_proto)


# (channels, height, width, label, encoding for the encoded databases, key)
IMAGES = [
    (3, 4, 5, 0, "png", "00000004_cat.png"),
    (1, 6, 3, 7, "png", "00000001_grey.png"),
    (3, 7, 7, 999, "jpeg", "00000000_dog.jpg"),
    (1, 2, 9, -1, "jpeg", "00000005_wide.jpg"),
    (3, 5, 4, 2147483647, "png", "00000002_tall.png"),
    (3, 16, 16, 3, "jpeg", "00000003_big.jpg"),
]


def encode(pixels_hwc, encoding):
    mode_image = Image.fromarray(pixels_hwc[:, :, 0] if pixels_hwc.shape[2] == 1 else pixels_hwc)
    buffer = io.BytesIO()
    mode_image.save(buffer, format="PNG" if encoding == "png" else "JPEG", quality=90)
    data = buffer.getvalue()
    decoded = np.asarray(Image.open(io.BytesIO(data)))
    return data, decoded.reshape(pixels_hwc.shape)


def records(record_format, encoded):
    rng = np.random.RandomState(20240611)
    out = []
    for index, (channels, height, width, label, encoding, key) in enumerate(IMAGES):
        hwc = rng.randint(0, 256, size=(height, width, channels)).astype(np.uint8)
        entry = {"key": key, "label": label, "encoded": encoded}
        if encoded:
            data, decoded = encode(hwc, encoding)
            entry.update(image_format=encoding, encoded_bytes=list(data), exact=encoding == "png",
                         decoded_channels=channels, decoded_height=height, decoded_width=width,
                         decoded_hwc=decoded.reshape(-1).tolist())
            if record_format == "datum":
                value = datum(label, data, encoded=True)
            else:
                value = tensor_protos(tensor_proto([1], STRING, field_bytes(6, data)), label)
        else:
            bgr = hwc[:, :, ::-1]
            if record_format == "datum":
                layout, pixels = "CHW", bgr.transpose(2, 0, 1)
                value = datum(label, pixels.tobytes(), channels, height, width)
            else:
                layout, pixels = "HWC", bgr
                # One grey image has dims (height, width), the other (height, width, 1): both occur.
                dims = [height, width] if index == 1 else [height, width, channels]
                value = tensor_protos(tensor_proto(dims, BYTE, field_bytes(5, pixels.tobytes())), label)
            entry.update(channels=channels, height=height, width=width, layout=layout,
                         pixels=pixels.reshape(-1).tolist())
        entry["value_bytes"] = list(value)
        out.append(entry)
    return out


def write_lmdb(path, entries):
    env = lmdb.open(path, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for entry in entries:
            txn.put(entry["key"].encode(), bytes(entry["value_bytes"]))
    env.close()


def write_leveldb(path, entries):
    db = plyvel.DB(path, create_if_missing=True, error_if_exists=True)
    with db.write_batch() as batch:
        for entry in entries:
            batch.put(entry["key"].encode(), bytes(entry["value_bytes"]))
    db.close()


def main():
    out_dir = sys.argv[1]
    databases = []
    for db_type, write in (("lmdb", write_lmdb), ("leveldb", write_leveldb)):
        for record_format in ("datum", "tensorprotos"):
            for encoded in (False, True):
                name = f"{db_type}_{record_format}_{'encoded' if encoded else 'raw'}"
                path = os.path.join(out_dir, name)
                entries = records(record_format, encoded)
                write(path, entries)  # in IMAGES order, which is not key order
                entries.sort(key=lambda entry: entry["key"].encode())
                databases.append({"name": name, "path": path, "db_type": db_type, "format": record_format,
                                  "records": entries})
    with open(os.path.join(out_dir, "manifest.json"), "w") as manifest:
        json.dump({"databases": databases}, manifest)


if __name__ == "__main__":
    main()
