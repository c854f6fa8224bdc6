// Tensor: a dtype, a shape and a contiguous buffer (row-major unless it carries a backend layout). Resize
// keeps the buffer when it is large enough, so the steady-state training step never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "lockstep/core/enforce.h"

namespace lockstep {

// Values follow TensorProto.DataType.
enum class DataType : int {
  kUndefined = 0,
  kFloat = 1,
  kInt32 = 2,
  kUInt8 = 6,
  kInt64 = 10,
  kFloat16 = 12,   // IEEE half
  kBFloat16 = 16,  // bfloat16: float32's exponent, 7 mantissa bits
};

// 16-bit floats as stored: the bits only. Kernels read them as __half / __nv_bfloat16; core/half.h converts
// on the host.
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

size_t ElementSize(DataType type);
const char* DataTypeName(DataType type);
// The floating-point type named "float" (or DataTypeName's "float32"), "bfloat16" or "float16"; throws
// InvalidInput naming `what` (a flag) for anything else.
DataType ParseFloatType(const std::string& name, const std::string& what);
// The DataType of an element type; any other type does not compile.
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DataType::kFloat;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DataType::kInt32;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DataType::kUInt8;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DataType::kInt64;
  else if constexpr (std::is_same_v<T, Float16>)
    return DataType::kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DataType::kBFloat16;
  else
    static_assert(sizeof(T) == 0, "no DataType for this element type");
}

enum class DeviceType : int { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int id = 0;
  bool operator==(const Device& other) const { return type == other.type && id == other.id; }
  std::string ToString() const;  // "cpu:0"
};

using Shape = std::vector<int64_t>;

// A backend memory layout other than plain row-major (oneDNN's blocked formats such as nChw16c), defined by
// the CPU backend; the core only carries it along. Tensors without one are plain row-major.
struct TensorLayout;
std::string ShapeToString(const Shape& shape);  // "(2, 3)"
int64_t NumElements(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(const Shape& shape, DataType type) { Resize(shape, type); }

  // Sets the shape and dtype in plain layout; reallocates only when the buffer is too small (contents are
  // then undefined).
  void Resize(const Shape& shape, DataType type = DataType::kFloat);
  // Same, in a backend layout that occupies `bytes` (blocked formats may pad, so bytes >= numel * size).
  void ResizeWithLayout(const Shape& shape, DataType type, std::shared_ptr<const TensorLayout> layout,
                        size_t bytes);
  const TensorLayout* layout() const { return layout_.get(); }
  bool is_plain() const { return !layout_; }
  // Writes this tensor's values into `plain` in row-major layout.
  void ToPlain(Tensor* plain) const;
  // This tensor becomes a copy of other, in this tensor's memory (host or device).
  void CopyFrom(const Tensor& other);
  // Makes this tensor use `bytes` bytes of `base` from `offset` on (a slice of a larger buffer, such as a
  // gradient bucket). Later Resizes to at most `bytes` keep writing there.
  void ShareStorage(std::shared_ptr<uint8_t> base, size_t offset, size_t bytes);
  void Zero();

  // Where the buffer lives: host memory (every CPU device) or one CUDA device's memory.
  const Device& device() const { return device_; }
  bool on_host() const { return device_.type == DeviceType::kCpu; }
  // Moves the tensor to `device`'s memory. From other memory it loses its buffer and contents (the next
  // Resize allocates there); in the same memory nothing changes.
  void PlaceOn(const Device& device);

  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return bytes_; }       // bytes in use, including any layout padding
  size_t capacity() const { return capacity_; }  // bytes allocated
  bool defined() const { return dtype_ != DataType::kUndefined; }
  // Product of the dims from axis on (and before axis), as Caffe2's size_from_dim / size_to_dim.
  int64_t SizeFromDim(int axis) const;
  int64_t SizeToDim(int axis) const;

  // The buffer's owner: a view that holds it keeps the buffer alive after this tensor reallocates.
  std::shared_ptr<const void> storage() const { return storage_; }
  // The buffer in whatever layout the tensor has; data<T>() is for plain tensors only.
  void* raw_data() { return storage_.get(); }
  const void* raw_data() const { return storage_.get(); }
  template <typename T>
  T* data() {
    CheckPlain(DataTypeOf<T>());
    return reinterpret_cast<T*>(storage_.get());
  }
  template <typename T>
  const T* data() const {
    CheckPlain(DataTypeOf<T>());
    return reinterpret_cast<const T*>(storage_.get());
  }

 private:
  void CheckPlain(DataType type) const;
  void Allocate(size_t bytes);

  Device device_;  // {kCpu, 0} for host memory, whichever CPU device wrote it
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  size_t bytes_ = 0;
  size_t capacity_ = 0;
  std::shared_ptr<const TensorLayout> layout_;
  std::shared_ptr<uint8_t> storage_;
};

// The backend registers how its layouts turn into plain row-major (ToPlain calls it).
using LayoutConverter = void (*)(const Tensor& from, Tensor* plain);
void RegisterLayoutConverter(LayoutConverter converter);

}  // namespace lockstep
