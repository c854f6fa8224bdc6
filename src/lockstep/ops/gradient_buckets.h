// Gradient buckets: float blobs packed into one contiguous buffer per device, so that one collective serves
// many small gradients. Parallelize groups the parameters with PlanGradientBuckets and the Allreduce
// operators lay out their buffers with it, so both agree on what a bucket holds and how large it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/tensor.h"

namespace lockstep {

// Slices start 64-byte aligned (a cache line, and what vector loads want); the zero padding between them is
// summed harmlessly. The bucket is float32 on the devices; across processes its bytes / 4 values travel as
// `wire` values (comm/wire_dtype.h), wire_bytes in all.
struct GradientBucket {
  std::vector<std::string> params;   // the blobs in packing order (Parallelize: unscoped parameter names)
  std::vector<Shape> shapes;         // params[j]'s shape
  std::vector<size_t> offsets;       // params[j]'s byte offset in the bucket
  size_t bytes = 0;                  // the bucket's size, padding included
  DataType wire = DataType::kFloat;  // float, bfloat16 or float16
  size_t wire_bytes = 0;  // what one allreduce of the bucket sends per shard and hop: bytes / 4 values
};

// Packs float blobs (name, shape), in the order given, into consecutive buckets: a bucket takes blobs until
// it holds at least bucket_bytes. Without a limit every blob goes into one bucket. With tail_bytes > 0 the
// last bucket is formed first, from the end of the list, and closes once it holds at least tail_bytes: in
// Parallelize's reverse creation order it is reduced after the backward pass ends, so keeping it small keeps
// the communication that nothing hides short. bucket_bytes and tail_bytes count float32 bytes, so the buckets
// are the same whatever the wire dtype; only their wire_bytes differ.
std::vector<GradientBucket> PlanGradientBuckets(const std::vector<std::pair<std::string, Shape>>& blobs,
                                                size_t bucket_bytes = SIZE_MAX, size_t tail_bytes = 0,
                                                DataType wire = DataType::kFloat);

}  // namespace lockstep
