// What the collective operators (Allreduce, Broadcast, and CreateCommonWorld, which makes their communicator)
// check and plan alike on every device type: where a communicator comes from, how the blobs group by device,
// that the replicas of a blob match, and where a device's blobs lie in its gradient bucket. The CPU operators
// (collective_ops.cc, common_world_op.cc) and the CUDA ones (cuda/) differ only in the memory they work in
// and the communicator they call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/core/tensor.h"
#include "lockstep/core/workspace.h"
#include "lockstep/ops/gradient_buckets.h"

namespace lockstep {

// Input 0 names the communicator, a workspace object that CreateCommonWorld writes (common_world_op.cc).
// With num_devices = k and m blobs per device, blob i = d * m + j (blob j of device d) is input 1 + i, and
// output i is where its result goes. Checks that there are as many blobs as outputs and that k divides them;
// returns m. Throws InvalidInput naming the operator.
int CollectiveBlobsPerDevice(const OperatorDef& def, int num_devices);

// The communicator that input 0 names; throws InvalidInput ending in `what_to_do` when the workspace holds
// none. The collectives' default says to run CreateCommonWorld first.
std::shared_ptr<Communicator> CommunicatorInput(
    const OperatorDef& def, const Workspace& ws,
    const std::string& what_to_do =
        "run the net whose CreateCommonWorld writes it first (Parallelize adds it "
        "to param_init_net)");

// CreateCommonWorld's input 0: the communicator that spans the shards, which the caller sets, or the one
// connected through a store handler (store_handler.h) that input 0 names instead.
std::shared_ptr<Communicator> ShardCommunicatorInput(const OperatorDef& def, const Workspace& ws);

// Blob i, a replica of blob j, must have the shape and dtype of `first`, which is blob j (device 0's).
void CheckReplicaMatches(const OperatorDef& def, int j, const Tensor& first, int i, const Tensor& replica);

// The bucket of device 0's blobs (blob j is blobs[j], named output j), which must be plain float tensors; the
// other devices' buckets have the same layout. It crosses processes in the dtype of the op's wire_dtype.
GradientBucket PlanDeviceBucket(const OperatorDef& def, const std::vector<const Tensor*>& blobs);

// Blob j must still be the plain float tensor of the shape the bucket was planned for.
void CheckBucketBlob(const OperatorDef& def, const GradientBucket& bucket, int j, const Tensor& blob);

// Broadcast copies the bytes of blob j, which must therefore be plain.
void CheckBroadcastBlob(const OperatorDef& def, int j, const Tensor& blob);

}  // namespace lockstep
