// Safetensors: round trips of every dtype (scalars and empty tensors included), atomic writes, the metadata
// alone, one clear error per kind of corruption, and interop with a reader and writer written in Python with
// NumPy.
#include "lockstep/train/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace lockstep::testing {
namespace {

const char* kPython = "/usr/bin/python3";

template <typename T>
Tensor MakeTensor(const Shape& shape, const std::vector<T>& values) {
  Tensor tensor(shape, DataTypeOf<T>());
  EXPECT_EQ(tensor.numel(), static_cast<int64_t>(values.size()));
  if (!values.empty()) std::memcpy(tensor.raw_data(), values.data(), values.size() * sizeof(T));
  return tensor;
}

template <typename T>
std::vector<T> ValuesOf(const Tensor& tensor) {
  const T* data = tensor.data<T>();
  return std::vector<T>(data, data + tensor.numel());
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text and data; the stated header length defaults to the true one.
std::string RawFile(const std::string& header, const std::string& data, int64_t stated_length = -1) {
  uint64_t length = stated_length < 0 ? header.size() : static_cast<uint64_t>(stated_length);
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
  return bytes + header + data;
}

// Runs a command, returning its exit status and appending its combined output to `output`.
int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, got);
  return ::pclose(pipe);
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "safetensors_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Expects ReadSafetensors to fail with one line naming the file and containing `fragment`.
  void ExpectCorrupt(const std::string& bytes, const std::string& fragment) {
    std::string path = Path("corrupt.safetensors");
    WriteBytes(path, bytes);
    try {
      ReadSafetensors(path);
      ADD_FAILURE() << "expected InvalidInput containing '" << fragment << "'";
    } catch (const InvalidInput& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("checkpoint " + path), std::string::npos) << message;
      EXPECT_NE(message.find(fragment), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }

  bool HavePythonNumpy() {
    std::string output;
    return RunCommand(std::string(kPython) + " -c 'import numpy'", &output) == 0;
  }

  std::string dir_;
};

// Every one-bit flip anywhere in a file lockstep wrote (the header length, the header, the tensor bytes) is
// refused, by the reader and by the verifier; a flipped tensor byte is named with its tensor.
TEST_F(SafetensorsTest, EveryFlippedBitIsRefused) {
  Tensor weights = RandomTensor({3, 5}, 7);
  Tensor steps = MakeTensor<int64_t>({2}, {5, 9});
  const std::string good_path = Path("good.safetensors"), bad_path = Path("bad.safetensors");
  WriteSafetensors(good_path, {{"w", &weights}, {"steps", &steps}},
                   {{"model", "lenet"}, {"epochs_done", "2"}});
  const std::string good = ReadBytes(good_path);
  EXPECT_EQ(ReadSafetensors(good_path).metadata,
            (std::map<std::string, std::string>{{"epochs_done", "2"}, {"model", "lenet"}}));
  int accepted = 0;
  for (size_t byte = 0; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      WriteBytes(bad_path, bad);
      bool refused_by_reader = false, refused_by_verifier = false;
      try {
        ReadSafetensors(bad_path);
      } catch (const InvalidInput&) {
        refused_by_reader = true;
      }
      try {
        VerifySafetensors(bad_path);
      } catch (const InvalidInput&) {
        refused_by_verifier = true;
      }
      if (!refused_by_reader || !refused_by_verifier) {
        ++accepted;
        ADD_FAILURE() << "byte " << byte << " bit " << bit << " was accepted";
      }
    }
  EXPECT_EQ(accepted, 0) << "of " << good.size() * 8 << " mutants";

  std::string bad = good;
  bad[bad.size() - 1] ^= 0x10;  // the last byte of "w", the last tensor in name order
  ExpectCorrupt(bad, "is corrupt: tensor 'w' has CRC32 ");
}

// Files written without checksums (by another tool, or an older lockstep) are read unchecked.
TEST_F(SafetensorsTest, FilesWithoutChecksumsAreRead) {
  const std::string data(4, '\0');
  WriteBytes(Path("plain.safetensors"),
             RawFile(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data));
  EXPECT_EQ(ReadSafetensors(Path("plain.safetensors")).tensors.size(), 1u);
  ExpectCorrupt(RawFile(R"({"__metadata__":{"crc32:x":"00000000"},"x":{"dtype":"F32","shape":[1],)"
                        R"("data_offsets":[0,4]}})",
                        data),
                "has tensor checksums but no 'header_crc32'");
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeAndShape) {
  Tensor weights = RandomTensor({2, 3, 4}, 3);
  Tensor labels = MakeTensor<int32_t>({5}, {0, -1, 7, 2147483647, -2147483647 - 1});
  Tensor iter = MakeTensor<int64_t>({}, {(int64_t{1} << 42) + 3});
  Tensor pixels = MakeTensor<uint8_t>({2, 2}, {0, 1, 128, 255});
  Tensor empty = MakeTensor<float>({0, 3}, {});
  Tensor half = MakeTensor<Float16>({2}, {Float16{0x3c00}, Float16{0xfbff}});
  Tensor brain = MakeTensor<BFloat16>({1}, {BFloat16{0x3f80}});
  std::string path = Path("model.safetensors");
  WriteSafetensors(path,
                   {{"conv1_w", &weights},
                    {"labels", &labels},
                    {"iter", &iter},
                    {"pixels", &pixels},
                    {"empty", &empty},
                    {"half", &half},
                    {"brain", &brain}},
                   {{"epoch", "3"}, {"model", "lenet"}});

  SafetensorsFile file = ReadSafetensors(path);
  ASSERT_EQ(file.tensors.size(), 7u);
  EXPECT_EQ(file.tensors.at("half").dtype(), DataType::kFloat16);
  EXPECT_EQ(file.tensors.at("half").data<Float16>()[1].bits, 0xfbff);
  EXPECT_EQ(file.tensors.at("brain").dtype(), DataType::kBFloat16);
  EXPECT_EQ(file.tensors.at("brain").data<BFloat16>()[0].bits, 0x3f80);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"epoch", "3"}, {"model", "lenet"}}));
  ExpectNear(file.tensors.at("conv1_w"), weights, 0.0f);
  EXPECT_EQ(file.tensors.at("labels").shape(), Shape{5});
  EXPECT_EQ(ValuesOf<int32_t>(file.tensors.at("labels")), ValuesOf<int32_t>(labels));
  EXPECT_EQ(file.tensors.at("iter").shape(), Shape{});
  EXPECT_EQ(ValuesOf<int64_t>(file.tensors.at("iter")), ValuesOf<int64_t>(iter));
  EXPECT_EQ(ValuesOf<uint8_t>(file.tensors.at("pixels")), ValuesOf<uint8_t>(pixels));
  EXPECT_EQ(file.tensors.at("empty").shape(), (Shape{0, 3}));
  EXPECT_EQ(file.tensors.at("empty").dtype(), DataType::kFloat);
}

TEST_F(SafetensorsTest, LayoutFollowsTheFormat) {
  Tensor b = MakeTensor<uint8_t>({3}, {1, 2, 3});
  Tensor a = MakeTensor<float>({2}, {1.5f, -2.0f});
  std::string path = Path("layout.safetensors");
  WriteSafetensors(path, {{"b", &b}, {"a", &a}}, {});
  std::string bytes = ReadBytes(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + length + 8 + 3);
  std::string header = bytes.substr(8, length);
  // Without metadata of the caller's, the metadata entry holds the checksums only.
  EXPECT_TRUE(
      std::regex_search(header, std::regex(R"("__metadata__":\{"crc32:a":"[0-9a-f]{8}",)"
                                           R"("crc32:b":"[0-9a-f]{8}","header_crc32":"[0-9a-f]{8}"\})")))
      << header;
  // Sorted by name: a's 8 bytes first, then b's 3.
  EXPECT_NE(header.find(R"("a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]})"), std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("b":{"data_offsets":[8,11],"dtype":"U8","shape":[3]})"), std::string::npos)
      << header;
  EXPECT_EQ(bytes.substr(8 + length + 8), std::string("\x01\x02\x03", 3));
}

TEST_F(SafetensorsTest, WritesAtomically) {
  std::string path = Path("model.safetensors");
  Tensor first = MakeTensor<float>({1}, {1.0f});
  Tensor second = MakeTensor<float>({2}, {2.0f, 3.0f});
  WriteSafetensors(path, {{"x", &first}}, {});
  WriteSafetensors(path, {{"x", &second}}, {});
  EXPECT_EQ(Values(ReadSafetensors(path).tensors.at("x")), (std::vector<float>{2.0f, 3.0f}));
  // Only the final file remains: the temporary was renamed, not left behind.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    names.push_back(entry.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});

  std::string unwritable = Path("missing_dir/model.safetensors");
  EXPECT_THROW(WriteSafetensors(unwritable, {{"x", &first}}, {}), IoError);
  EXPECT_FALSE(std::filesystem::exists(unwritable));
}

TEST_F(SafetensorsTest, MetadataAloneReadsTheHeaderOnly) {
  Tensor x = MakeTensor<float>({2}, {1.0f, 2.0f});
  std::string path = Path("model.safetensors");
  WriteSafetensors(path, {{"x", &x}}, {{"iteration", "17"}, {"format", "lockstep"}});
  const std::map<std::string, std::string> expected = {{"iteration", "17"}, {"format", "lockstep"}};
  EXPECT_EQ(ReadSafetensorsMetadata(path), expected);
  // The header is validated as ReadSafetensors does; a header that states more data than the file holds
  // fails, one without metadata has none.
  std::string truncated = Path("truncated.safetensors");
  WriteBytes(truncated, RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234"));
  EXPECT_THROW(ReadSafetensorsMetadata(truncated), InvalidInput);
  std::string plain = Path("plain.safetensors");
  WriteBytes(plain, RawFile(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "1234"));
  EXPECT_TRUE(ReadSafetensorsMetadata(plain).empty());
  EXPECT_THROW(ReadSafetensorsMetadata(Path("absent.safetensors")), InvalidInput);
}

TEST_F(SafetensorsTest, RefusesUndefinedTensors) {
  Tensor undefined;
  EXPECT_THROW(WriteSafetensors(Path("x.safetensors"), {{"x", &undefined}}, {}), InvalidInput);
  EXPECT_FALSE(std::filesystem::exists(Path("x.safetensors")));
}

// A path that names no file is the user's to fix (exit 2), not a failure a restart could pass.
TEST_F(SafetensorsTest, AMissingFileOrAFolderIsInvalidInput) {
  try {
    ReadSafetensors(Path("absent.safetensors"));
    FAIL() << "a missing file was read";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + Path("absent.safetensors") + " does not exist; check the path");
  }
  EXPECT_THROW(ReadSafetensors(Path("absent/x.safetensors")), InvalidInput);
  std::filesystem::create_directories(Path("folder"));
  EXPECT_THROW(ReadSafetensorsMetadata(Path("folder")), InvalidInput);
}

TEST_F(SafetensorsTest, CorruptionGivesOneClearError) {
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  ExpectCorrupt(std::string("\x05\x00\x00", 3), "is truncated: it has 3 bytes");
  ExpectCorrupt(RawFile(good, data, 1000), "is truncated: header says 1000 bytes, file has");
  ExpectCorrupt("# not a checkpoint, but a text file\n", "is not a safetensors file: no JSON header follows");
  ExpectCorrupt(RawFile(good, data.substr(0, 5)), "is truncated or corrupt: tensor 'x' ends at data byte 8");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32",)", data), "not valid JSON");
  ExpectCorrupt(RawFile("[1, 2]", ""), "not a JSON object");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,8]}})", data),
                "unknown dtype 'F8_E4M3'");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", data + data),
                "ends at data byte 24");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        data + data),
                "overlapping tensors 'x' [0, 8] and 'y' [4, 12]");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
                "shape (3) F32 that needs 12 bytes but data_offsets [0, 8] hold 8");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "non-negative");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","data_offsets":[0,8]}})", data),
                "malformed entry for tensor 'x'");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
                "end before they begin");
  ExpectCorrupt(RawFile(R"({"__metadata__":{"epoch":3}})", ""), "metadata 'epoch' that is not a string");
}

// Found by fuzz/safetensors_fuzzer: a number JSON cannot hold escaped as nlohmann's out_of_range, and dims
// whose product overflows int64 reached Tensor::Resize when another dim was zero.
TEST_F(SafetensorsTest, HugeNumbersInTheHeaderAreCorruption) {
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[1e999],"data_offsets":[0,0]}})", ""),
                "cannot be read as JSON");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"F32","shape":[1099511627776,1099511627776,0],)"
                        R"("data_offsets":[0,0]}})",
                        ""),
                "more elements than any file can hold");
  ExpectCorrupt(RawFile(R"({"x":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]}})", "a"),
                "more elements than any file can hold");
}

// C++ writes, an independent NumPy reader checks every value.
TEST_F(SafetensorsTest, NumpyReadsWhatWeWrite) {
  if (!HavePythonNumpy()) GTEST_SKIP() << kPython << " has no numpy";
  std::vector<float> floats(12);
  for (int i = 0; i < 12; ++i) floats[i] = 0.5f * i - 1.0f;
  Tensor a = MakeTensor<float>({3, 4}, floats);
  Tensor b = MakeTensor<int64_t>({}, {(int64_t{1} << 40) + 7});
  Tensor c = MakeTensor<uint8_t>({3}, {0, 128, 255});
  Tensor d = MakeTensor<int32_t>({2, 1}, {-5, 9});
  Tensor e = MakeTensor<float>({0}, {});
  std::string path = Path("from_cpp.safetensors");
  WriteSafetensors(path, {{"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}, {"e", &e}}, {{"epoch", "2"}});

  std::string script = Path("read.py");
  WriteBytes(script, R"(import json, struct, sys, zlib
import numpy as np
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
assert n % 8 == 0, n
header = json.loads(data[8:8 + n])
metadata = header['__metadata__']
# The header's CRC32 is that of its compact, key-sorted JSON without that entry.
header_crc32 = metadata.pop('header_crc32')
compact = json.dumps(header, separators=(',', ':'), sort_keys=True, ensure_ascii=False).encode()
assert f'{zlib.crc32(compact):08x}' == header_crc32, compact
for name in [k for k in header if k != '__metadata__']:
    begin, end = header[name]['data_offsets']
    assert f'{zlib.crc32(data[8 + n + begin:8 + n + end]):08x}' == metadata.pop('crc32:' + name), name
assert header.pop('__metadata__') == {'epoch': '2'}
types = {'F32': '<f4', 'I32': '<i4', 'I64': '<i8', 'U8': 'u1'}
def load(name):
    info = header[name]
    begin, end = info['data_offsets']
    return np.frombuffer(data[8 + n + begin:8 + n + end], dtype=types[info['dtype']]).reshape(info['shape'])
expected = {
    'a': (np.arange(12, dtype=np.float32) * 0.5 - 1).reshape(3, 4),
    'b': np.array(2**40 + 7, dtype=np.int64),
    'c': np.array([0, 128, 255], dtype=np.uint8),
    'd': np.array([[-5], [9]], dtype=np.int32),
    'e': np.zeros((0,), dtype=np.float32),
}
assert sorted(header) == sorted(expected), sorted(header)
for name, want in expected.items():
    got = load(name)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    assert np.array_equal(got, want), (name, got, want)
print('ok')
)");
  std::string output;
  EXPECT_EQ(RunCommand(std::string(kPython) + " " + script + " " + path, &output), 0) << output;
  EXPECT_EQ(output, "ok\n");
}

// A NumPy writer (as other frameworks write the format) produces a file we read.
TEST_F(SafetensorsTest, WeReadWhatNumpyWrites) {
  if (!HavePythonNumpy()) GTEST_SKIP() << kPython << " has no numpy";
  std::string script = Path("write.py");
  std::string path = Path("from_numpy.safetensors");
  WriteBytes(script, R"(import json, struct, sys
import numpy as np
tensors = {
    'weight': np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    'step': np.array(123456789012, dtype=np.int64),
    'mask': np.array([1, 0, 255], dtype=np.uint8),
    'ids': np.array([[3], [-4]], dtype=np.int32),
}
names = {'float32': 'F32', 'int64': 'I64', 'uint8': 'U8', 'int32': 'I32'}
header, blobs, offset = {'__metadata__': {'source': 'numpy'}}, [], 0
for name in sorted(tensors):
    raw = tensors[name].astype(tensors[name].dtype.newbyteorder('<')).tobytes()
    header[name] = {'dtype': names[str(tensors[name].dtype)], 'shape': list(tensors[name].shape),
                    'data_offsets': [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
text = json.dumps(header).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))
)");
  std::string output;
  ASSERT_EQ(RunCommand(std::string(kPython) + " " + script + " " + path, &output), 0) << output;

  SafetensorsFile file = ReadSafetensors(path);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"source", "numpy"}}));
  ASSERT_EQ(file.tensors.size(), 4u);
  std::vector<float> weight(6);
  for (int i = 0; i < 6; ++i) weight[i] = static_cast<float>(-1.0 + 0.4 * i);
  ExpectNear(file.tensors.at("weight"), TensorFromValues({2, 3}, weight), 1e-6f);
  EXPECT_EQ(file.tensors.at("step").shape(), Shape{});
  EXPECT_EQ(ValuesOf<int64_t>(file.tensors.at("step")), std::vector<int64_t>{123456789012});
  EXPECT_EQ(ValuesOf<uint8_t>(file.tensors.at("mask")), (std::vector<uint8_t>{1, 0, 255}));
  EXPECT_EQ(file.tensors.at("ids").shape(), (Shape{2, 1}));
  EXPECT_EQ(ValuesOf<int32_t>(file.tensors.at("ids")), (std::vector<int32_t>{3, -4}));
}

}  // namespace
}  // namespace lockstep::testing
