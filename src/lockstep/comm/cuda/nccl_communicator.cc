// NCCL over the GPUs of one process. One host thread drives every rank, so each collective issues the ranks'
// calls inside ncclGroupStart/End: NCCL then launches them together, where a lone call could block waiting
// for peers that this thread has not launched yet.
#include "lockstep/comm/cuda/nccl_communicator.h"

#include <map>

#include "lockstep/comm/cuda/wire_cast.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep {
namespace {

// Issues call(i, stream) for every rank i inside one NCCL group, with the rank's device current on this
// thread (collectives run on the executor's communication thread) and the device's own stream. That stream
// already holds the work that wrote the rank's buffer: the executor starts a collective only after the ops
// that wrote its inputs, and they queued their kernels on this same stream. In-stream order therefore makes
// NCCL read the finished buffers, and the ops queued after the collective (the updates) read its result, with
// no host wait and no event.
template <class Call>
void InGroup(const std::vector<int>& devices, const Call& call) {
  LOCKSTEP_NCCL_CHECK(ncclGroupStart());
  try {
    for (size_t i = 0; i < devices.size(); ++i) call(i, cuda::ContextFor(devices[i]).stream());
  } catch (...) {
    ncclGroupEnd();  // closes the group; the error that stopped it is the one to report
    throw;
  }
  LOCKSTEP_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace

NcclCommunicator::NcclCommunicator(const std::vector<int>& devices) : SingleProcessCudaCommunicator(devices) {
  LOCKSTEP_ENFORCE(!devices.empty(), "a communicator needs at least one device");
  std::vector<int> gpus;
  std::map<int, int> device_on_gpu;
  for (int device : devices) {
    const int gpu = cuda::CudaContext::Get(device).physical_device();
    auto [other, inserted] = device_on_gpu.emplace(gpu, device);
    if (!inserted)
      throw InvalidInput(fmt::format(
          "NCCL takes one rank per GPU, but gpu:{} and gpu:{} both run on GPU {}; MakeCudaCommunicator sums "
          "such devices by copies instead",
          other->second, device, gpu));
    gpus.push_back(gpu);
  }
  comms_.resize(devices.size(), nullptr);
  LOCKSTEP_NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(gpus.size()), gpus.data()));
}

NcclCommunicator::~NcclCommunicator() {
  // A destructor must not throw, and at exit the driver may already be shutting down: unchecked, as in
  // CudaContext's destructor.
  for (ncclComm* comm : comms_)
    if (comm) ncclCommDestroy(comm);
}

void NcclCommunicator::Allreduce(const std::vector<float*>& buffers, size_t count) {
  CheckBuffers(buffers.size(), __func__);
  if (count == 0) return;
  InGroup(devices(), [&](size_t i, cudaStream_t stream) {
    LOCKSTEP_NCCL_CHECK(ncclAllReduce(buffers[i], buffers[i], count, ncclFloat, ncclSum, comms_[i], stream));
  });
}

void NcclCommunicator::AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) {
  if (wire == DataType::kFloat) return Allreduce(buffers, count);
  LOCKSTEP_ENFORCE(wire == DataType::kBFloat16 || wire == DataType::kFloat16,
                   "gradients travel as float, bfloat16 or float16, not {}", DataTypeName(wire));
  CheckBuffers(buffers.size(), "Allreduce");
  if (count == 0) return;
  Wire& on_wire = wires_[{buffers[0], count, wire}];
  if (on_wire.values.empty())
    for (int device : devices()) {
      cuda::CudaContext& context = cuda::ContextFor(device);
      on_wire.values.push_back(context.allocator().Allocate(count * sizeof(uint16_t)));
      on_wire.scales.push_back(context.allocator().Allocate(sizeof(float)));
    }
  const bool float16 = wire == DataType::kFloat16;
  auto scale = [&](size_t i) {
    return float16 ? reinterpret_cast<float*>(on_wire.scales[i].get()) : nullptr;
  };
  if (float16) {
    for (size_t i = 0; i < buffers.size(); ++i)
      MaxAbsOnDevice(buffers[i], count, scale(i), cuda::ContextFor(devices()[i]).stream());
    InGroup(devices(), [&](size_t i, cudaStream_t stream) {
      LOCKSTEP_NCCL_CHECK(ncclAllReduce(scale(i), scale(i), 1, ncclFloat, ncclMax, comms_[i], stream));
    });
    for (size_t i = 0; i < buffers.size(); ++i)
      Float16ScaleOnDevice(scale(i), static_cast<int>(buffers.size()),
                           cuda::ContextFor(devices()[i]).stream());
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    NarrowOnDevice(buffers[i], count, wire, scale(i), on_wire.values[i].get(),
                   cuda::ContextFor(devices()[i]).stream());
  InGroup(devices(), [&](size_t i, cudaStream_t stream) {
    void* values = on_wire.values[i].get();
    LOCKSTEP_NCCL_CHECK(ncclAllReduce(values, values, count, float16 ? ncclFloat16 : ncclBfloat16, ncclSum,
                                      comms_[i], stream));
  });
  for (size_t i = 0; i < buffers.size(); ++i)
    WidenOnDevice(on_wire.values[i].get(), count, wire, scale(i), buffers[i],
                  cuda::ContextFor(devices()[i]).stream());
}

void NcclCommunicator::Reduce(const std::vector<float*>& buffers, size_t count) {
  CheckBuffers(buffers.size(), "Reduce");
  if (count == 0) return;
  // NCCL writes only the root's receive buffer: the others keep their values.
  InGroup(devices(), [&](size_t i, cudaStream_t stream) {
    LOCKSTEP_NCCL_CHECK(ncclReduce(buffers[i], buffers[i], count, ncclFloat, ncclSum, 0, comms_[i], stream));
  });
}

void NcclCommunicator::Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) {
  CheckBuffers(buffers.size(), __func__);
  LOCKSTEP_ENFORCE_EQ(root_rank, 0, "a single process is rank 0");
  if (bytes == 0) return;
  InGroup(devices(), [&](size_t i, cudaStream_t stream) {
    LOCKSTEP_NCCL_CHECK(ncclBroadcast(buffers[i], buffers[i], bytes, ncclUint8, 0, comms_[i], stream));
  });
}

}  // namespace lockstep
