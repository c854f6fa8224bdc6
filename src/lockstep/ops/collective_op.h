// What the collective operators (Allreduce, Broadcast) check and plan alike on every device type: how their
// inputs group by device, that the replicas of a blob match, and where a device's blobs lie in its gradient
// bucket. The CPU operators (collective_ops.cc) and the CUDA ones (cuda/collective_ops.cc) differ only in
// the memory they work in and the communicator they call.
#pragma once

#include <cstddef>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// With num_devices = k and m blobs per device, input d * m + j is blob j of device d, and output i is where
// input i's result goes. Checks that k divides the inputs and that there are as many outputs; returns m.
// Throws InvalidInput naming the operator.
int CollectiveBlobsPerDevice(const OperatorDef& def, int num_devices);

// Input i, a replica of blob j, must have the shape and dtype of `first`, which is input j (device 0's).
void CheckReplicaMatches(const OperatorDef& def, int j, const Tensor& first, int i, const Tensor& replica);

// Where a device's blobs lie in its bucket, one contiguous buffer per device, so that one collective serves
// many small gradients. Slices start 64-byte aligned; the zero padding between them is summed harmlessly.
struct BucketLayout {
  std::vector<Shape> shapes;    // blob j's shape, the same on every device
  std::vector<size_t> offsets;  // blob j's byte offset in each bucket
  size_t bytes = 0;
};

// The layout of device 0's blobs (blob j is outputs[j]), which must be plain float tensors.
BucketLayout PlanBucketLayout(const OperatorDef& def, const std::vector<const Tensor*>& outputs);

// Blob j (input j's name) must still be the plain float tensor of the shape the layout was planned for.
void CheckBucketBlob(const OperatorDef& def, const BucketLayout& layout, int j, const Tensor& blob);

// Broadcast copies the bytes of blob j (input j's name), which must therefore be plain.
void CheckBroadcastBlob(const OperatorDef& def, int j, const Tensor& blob);

}  // namespace lockstep
