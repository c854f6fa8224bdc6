#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/): a few small valid inputs each.

Run from the repository root: /usr/bin/python3 fuzz/make_corpus.py (needs protoc, python3-protobuf, Pillow).
"""
import gzip
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def load_proto():
    out = tempfile.mkdtemp()
    subprocess.run(["protoc", f"--proto_path={ROOT}/proto", f"--python_out={out}", "lockstep.proto"], check=True)
    sys.path.insert(0, out)
    import lockstep_pb2
    return lockstep_pb2


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def image(mode, size, seed):
    pixels = bytes((i * 37 + seed * 11) % 256 for i in range(size[0] * size[1] * len(mode)))
    return Image.frombytes(mode, size, pixels)


def encoded(img, fmt, **options):
    out = io.BytesIO()
    img.save(out, fmt, **options)
    return out.getvalue()


def safetensors(tensors, metadata=None, checksummed=False):
    """A safetensors file; `checksummed` adds the CRC32s lockstep writes (each tensor's, then the header's)."""
    header, data = {}, b""
    if metadata or checksummed:
        header["__metadata__"] = dict(metadata or {})
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        if checksummed:
            header["__metadata__"][f"crc32:{name}"] = f"{zlib.crc32(payload):08x}"
        data += payload
    if checksummed:
        compact = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
        header["__metadata__"]["header_crc32"] = f"{zlib.crc32(compact):08x}"
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main():
    pb = load_proto()
    jpeg_rgb = encoded(image("RGB", (8, 6), 1), "JPEG", quality=90)
    jpeg_gray = encoded(image("L", (5, 7), 2), "JPEG")
    jpeg_cmyk = encoded(image("CMYK", (4, 4), 3), "JPEG")
    jpeg_progressive = encoded(image("RGB", (9, 9), 4), "JPEG", progressive=True)
    png_rgb = encoded(image("RGB", (6, 5), 5), "PNG")
    png_gray = encoded(image("L", (7, 3), 6), "PNG")
    png_rgba = encoded(image("RGBA", (4, 4), 7), "PNG")
    png_palette = encoded(image("RGB", (5, 5), 8).convert("P"), "PNG")
    png_1bit = encoded(image("1", (9, 4), 9), "PNG")
    png_16bit = encoded(Image.frombytes("I;16", (3, 2), bytes(range(12))), "PNG")
    png_gray_alpha = encoded(image("LA", (4, 3), 11), "PNG")
    png_transparent = encoded(image("RGB", (4, 4), 12).convert("P"), "PNG", transparency=0)

    for name, data in [("rgb.jpg", jpeg_rgb), ("gray.jpg", jpeg_gray), ("cmyk.jpg", jpeg_cmyk),
                       ("progressive.jpg", jpeg_progressive)]:
        write("jpeg_fuzzer", name, data)
    for name, data in [("rgb.png", png_rgb), ("gray.png", png_gray), ("rgba.png", png_rgba),
                       ("palette.png", png_palette), ("1bit.png", png_1bit), ("16bit.png", png_16bit),
                       ("gray_alpha.png", png_gray_alpha), ("transparent.png", png_transparent)]:
        write("png_fuzzer", name, data)

    write("safetensors_fuzzer", "two_tensors", safetensors({
        "conv1_w": ("F32", [2, 1, 1, 2], struct.pack("<4f", 1, -2, 0.5, 3)),
        "iter": ("I64", [1], struct.pack("<q", 7)),
    }, {"epochs_done": "1"}))
    write("safetensors_fuzzer", "dtypes", safetensors({
        "a": ("I32", [2], struct.pack("<2i", -1, 5)),
        "b": ("U8", [3], b"\x01\x02\x03"),
        "c": ("F16", [1], b"\x00\x3c"),
        "d": ("BF16", [2, 0], b""),
    }))
    write("safetensors_fuzzer", "empty", safetensors({}))
    write("safetensors_fuzzer", "checksummed", safetensors({
        "w": ("F32", [2], struct.pack("<2f", 0.25, -1)),
        "steps": ("I64", [1], struct.pack("<q", 3)),
    }, {"epochs_done": "2"}, checksummed=True))

    raw = bytes(range(2 * 3 * 3))
    for name, datum in [
        ("raw", pb.Datum(channels=3, height=2, width=3, data=raw, label=4)),
        ("gray", pb.Datum(channels=1, height=2, width=2, data=b"\x00\x40\x80\xff", label=1)),
        ("jpeg", pb.Datum(data=jpeg_gray, encoded=True, label=2)),
        ("png", pb.Datum(data=png_gray, encoded=True, label=9)),
    ]:
        write("datum_fuzzer", name, datum.SerializeToString())

    def protos(image_proto, label_type=pb.TensorProto.INT32, label=3):
        label_proto = pb.TensorProto(data_type=label_type, dims=[1])
        if label_type == pb.TensorProto.INT64:
            label_proto.int64_data.append(label)
        else:
            label_proto.int32_data.append(label)
        return pb.TensorProtos(protos=[image_proto, label_proto]).SerializeToString()

    T = pb.TensorProto
    write("tensorprotos_fuzzer", "raw_hwc", protos(T(data_type=T.BYTE, dims=[2, 3, 3], byte_data=raw)))
    write("tensorprotos_fuzzer", "raw_hw", protos(T(data_type=T.UINT8, dims=[2, 2], raw_data=b"\x01\x02\x03\x04"),
                                                  T.INT64, 7))
    write("tensorprotos_fuzzer", "int32_pixels", protos(T(data_type=T.UINT8, dims=[1, 2, 1], int32_data=[0, 255])))
    write("tensorprotos_fuzzer", "jpeg", protos(T(data_type=T.STRING, dims=[1], string_data=[jpeg_rgb])))
    write("tensorprotos_fuzzer", "png", protos(T(data_type=T.STRING, dims=[1], string_data=[png_rgb])))

    def idx(count, height, width, seed):
        images = struct.pack(">4I", 0x803, count, height, width) + bytes(
            (i * 7 + seed) % 256 for i in range(count * height * width))
        labels = struct.pack(">2I", 0x801, count) + bytes(i % 10 for i in range(count))
        return images + labels + struct.pack("<H", len(labels))

    write("idx_fuzzer", "two_4x4", idx(2, 4, 4, 1))
    write("idx_fuzzer", "one_28x28", idx(1, 28, 28, 2))
    write("idx_fuzzer", "empty", idx(0, 3, 3, 3))

    net = pb.NetDef(name="lenet", external_input=["data", "conv1_w", "conv1_b"])

    def op(type_, inputs, outputs, **args):
        o = net.op.add(type=type_, input=inputs, output=outputs)
        for key, value in args.items():
            a = o.arg.add(name=key)
            if isinstance(value, list):
                a.ints.extend(value)
            elif isinstance(value, float):
                a.f = value
            elif isinstance(value, str):
                a.s = value.encode()
            else:
                a.i = value

    op("ConstantFill", [], ["fc_w"], shape=[10, 48], value=0.5)
    op("XavierFill", [], ["conv2_w"], shape=[3, 4, 3, 3])
    op("Conv", ["data", "conv1_w", "conv1_b"], ["conv1"], kernel=3, stride=1, pad=1, order="NCHW")
    op("Relu", ["conv1"], ["conv1"])
    op("MaxPool", ["conv1"], ["pool1"], kernel=2, stride=2)
    op("Conv", ["pool1", "conv2_w"], ["conv2"], kernels=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], no_bias=1)
    op("AveragePool", ["conv2"], ["pool2"], global_pooling=1)
    op("Flatten", ["conv2"], ["flat"])
    op("FC", ["flat", "fc_w"], ["fc"], axis=1)
    op("Split", ["conv2"], ["s1", "s2"], axis=1, split=[1, 2])
    op("Concat", ["s1", "s2"], ["cat", "cat_info"], axis=1)
    op("Reshape", ["cat"], ["reshaped", "old_shape"], shape=[2, -1])
    write("netdef_fuzzer", "lenet.pb", b"\x00" + net.SerializeToString())
    from google.protobuf import text_format
    write("netdef_fuzzer", "lenet.pbtxt", b"\x01" + text_format.MessageToString(net).encode())

    cli = [
        ["train", "--use_cpu", "--train_data", "null", "--model", "lenet", "--num_gpus", "2", "--batch_size", "8",
         "--num_channels", "1", "--image_size", "28", "--num_labels", "10", "--epoch_size", "16"],
        ["train", "--use_cpu", "--train_data", "fashion-mnist", "--test_data", "fashion-mnist", "--model",
         "wrn-16-2", "--model_parallel", "2", "--num_gpus", "4", "--micro_batches", "2", "--batch_size", "16"],
        ["train", "--use_cpu", "--train_data=/data/train_lmdb", "--db_type", "leveldb", "--record_format",
         "tensorprotos", "--num_shards", "2", "--shard_id", "1", "--run_id", "x", "--gpus", "0,1",
         "--momentum", "0.9", "--weight_decay", "1e-4", "--timeout", "5"],
        ["make-db", "--idx_images", "a.gz", "--idx_labels", "b.gz", "--output", "out", "--format",
         "tensorprotos", "--encoded", "--encoding", "png", "--resize", "8", "--channels", "3"],
        ["eval", "--use_cpu", "--load_model_path", "model_3.safetensors", "--test_data", "fashion-mnist",
         "--model", "lenet", "--batch_size", "64"],
    ]
    for i, words in enumerate(cli):
        write("cli_fuzzer", f"command{i}", "\n".join(words).encode())


if __name__ == "__main__":
    main()
