// Tensor storage: 64-byte aligned host buffers or device memory from the device's backend, grown only when a
// shape needs more bytes.
#include "lockstep/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lockstep/core/device_backend.h"

namespace lockstep {

namespace {

struct DataTypeInfo {
  DataType type;
  size_t size;  // bytes per element
  const char* name;
};

constexpr DataTypeInfo kDataTypes[] = {
    {DataType::kUndefined, 0, "undefined"}, {DataType::kFloat, 4, "float32"},
    {DataType::kInt32, 4, "int32"},         {DataType::kUInt8, 1, "uint8"},
    {DataType::kInt64, 8, "int64"},         {DataType::kFloat16, 2, "float16"},
    {DataType::kBFloat16, 2, "bfloat16"},
};

const DataTypeInfo* FindDataType(DataType type) {
  for (const DataTypeInfo& info : kDataTypes)
    if (info.type == type) return &info;
  return nullptr;
}

}  // namespace

size_t ElementSize(DataType type) {
  const DataTypeInfo* info = FindDataType(type);
  return info ? info->size : 0;
}

const char* DataTypeName(DataType type) {
  const DataTypeInfo* info = FindDataType(type);
  return info ? info->name : "unknown";
}

DataType ParseFloatType(const std::string& name, const std::string& what) {
  if (name == "float" || name == DataTypeName(DataType::kFloat)) return DataType::kFloat;
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16})
    if (name == DataTypeName(type)) return type;
  throw InvalidInput(fmt::format("unknown {} '{}'; choose float, bfloat16 or float16", what, name));
}

std::string Device::ToString() const {
  return fmt::format("{}:{}", type == DeviceType::kCpu ? "cpu" : "gpu", id);
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + ")";
}

int64_t NumElements(const Shape& shape) {
  // Bounded well below 2^63 so that the byte count of any dtype fits too.
  constexpr int64_t kMostElements = int64_t{1} << 60;
  int64_t n = 1;
  bool too_many = false;
  for (int64_t d : shape) {
    LOCKSTEP_ENFORCE_GE(d, 0, "negative dimension in shape {}", ShapeToString(shape));
    too_many |= __builtin_mul_overflow(n, d, &n) || n > kMostElements;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  if (too_many)
    throw InvalidInput(fmt::format("shape {} has more than 2^60 elements, more than any memory holds",
                                   ShapeToString(shape)));
  return n;
}

void Tensor::Allocate(size_t bytes) {
  if (bytes <= capacity_ && storage_) return;
  // Round up so that odd sizes still leave vector kernels an aligned tail.
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (!on_host()) {
    storage_.reset();  // the old buffer goes back before the new one is taken
    storage_ = GetDeviceBackend(device_.type).Allocate(device_.id, rounded);
    capacity_ = rounded;
    return;
  }
  void* memory = std::aligned_alloc(64, rounded);
  LOCKSTEP_ENFORCE(memory != nullptr, "out of memory allocating {} bytes for a tensor of shape {}", rounded,
                   ShapeToString(shape_));
  storage_.reset(static_cast<uint8_t*>(memory), [](uint8_t* p) { std::free(p); });
  capacity_ = rounded;
}

void Tensor::PlaceOn(const Device& device) {
  Device memory = device.type == DeviceType::kCpu ? Device{} : device;
  if (memory == device_) return;
  device_ = memory;
  storage_.reset();
  capacity_ = 0;
}

void Tensor::ShareStorage(std::shared_ptr<uint8_t> base, size_t offset, size_t bytes) {
  uint8_t* slice = base.get() + offset;
  storage_ = std::shared_ptr<uint8_t>(std::move(base), slice);
  capacity_ = bytes;
}

void Tensor::Resize(const Shape& shape, DataType type) {
  numel_ = NumElements(shape);
  shape_ = shape;
  dtype_ = type;
  layout_.reset();
  bytes_ = numel_ * ElementSize(type);
  Allocate(bytes_);
}

void Tensor::ResizeWithLayout(const Shape& shape, DataType type, std::shared_ptr<const TensorLayout> layout,
                              size_t bytes) {
  numel_ = NumElements(shape);
  LOCKSTEP_ENFORCE_GE(bytes, numel_ * ElementSize(type), "layout smaller than the tensor");
  shape_ = shape;
  dtype_ = type;
  layout_ = std::move(layout);
  bytes_ = bytes;
  Allocate(bytes_);
}

namespace {
LayoutConverter layout_converter = nullptr;
}

void RegisterLayoutConverter(LayoutConverter converter) { layout_converter = converter; }

void Tensor::ToPlain(Tensor* plain) const {
  LOCKSTEP_ENFORCE(plain != this, "ToPlain needs a separate output tensor");
  if (is_plain()) return plain->CopyFrom(*this);
  LOCKSTEP_ENFORCE(layout_converter != nullptr, "no backend registered to convert tensor layouts");
  if (plain->on_host()) return layout_converter(*this, plain);
  Tensor host;  // layouts are host formats: convert on the host, then copy to the device
  layout_converter(*this, &host);
  plain->CopyFrom(host);
}

void Tensor::CopyFrom(const Tensor& other) {
  if (this == &other) return;
  if (other.is_plain()) {
    Resize(other.shape_, other.dtype_);
  } else {
    ResizeWithLayout(other.shape_, other.dtype_, other.layout_, other.bytes_);
  }
  if (bytes_ == 0 || raw_data() == other.raw_data()) return;
  if (on_host() && other.on_host())
    std::memcpy(raw_data(), other.raw_data(), bytes_);
  else
    GetDeviceBackend(DeviceType::kCuda).Copy(raw_data(), device_, other.raw_data(), other.device_, bytes_);
}

void Tensor::Zero() {
  if (bytes_ == 0) return;
  if (on_host())
    std::memset(raw_data(), 0, bytes_);
  else
    GetDeviceBackend(device_.type).Zero(device_.id, raw_data(), bytes_);
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += ndim();
  LOCKSTEP_ENFORCE(i >= 0 && i < ndim(), "axis {} out of range for a tensor of shape {}", i,
                   ShapeToString(shape_));
  return shape_[i];
}

int64_t Tensor::SizeFromDim(int axis) const {
  int64_t n = 1;
  for (int i = axis; i < ndim(); ++i) n *= shape_[i];
  return n;
}

int64_t Tensor::SizeToDim(int axis) const {
  int64_t n = 1;
  for (int i = 0; i < axis && i < ndim(); ++i) n *= shape_[i];
  return n;
}

void Tensor::CheckPlain(DataType type) const {
  LOCKSTEP_ENFORCE(dtype_ == type, "tensor holds {} but was read as {}", DataTypeName(dtype_),
                   DataTypeName(type));
  LOCKSTEP_ENFORCE(is_plain(), "tensor of shape {} is in a backend layout; read it through ToPlain()",
                   ShapeToString(shape_));
}

}  // namespace lockstep
