// GlooCommunicator: the collectives of a job that spans processes (shards), through Gloo. Hierarchical: the
// buffers of the local devices are summed in place, device 0's sum is allreduced across the shards with the
// chosen Gloo algorithm, and the result is copied back to the other devices. Several network interfaces each
// carry a share of every collective. Channels (Communicator::Channel) have Gloo contexts of their own over
// the same network devices, so their collectives can be in flight together.
//
// A collective that fails (a shard died, stalled past the timeout, or stopped on an error of its own) throws
// IoError with one line naming the shard at fault and the operation. Until EndFirstIteration() collectives
// wait up to first_iter_timeout, afterwards up to timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/rendezvous.h"

namespace lockstep {

struct GlooOptions {
  std::string transport = "tcp";        // tcp, or ibverbs where the machine has an InfiniBand device
  std::vector<std::string> interfaces;  // network interfaces (tcp) or IB devices; empty: the host's address
  std::string algorithm = "auto";       // see GlooAllreduceAlgorithms()
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds first_iter_timeout{std::chrono::minutes(20)};
};

// "auto" (halving_doubling for a power-of-two shard count, else ring_chunked), "ring", "ring_chunked",
// "halving_doubling", "bcube".
const std::vector<std::string>& GlooAllreduceAlgorithms();

// Throws InvalidInput, in one line, where `algorithm` is none of GlooAllreduceAlgorithms(), or is bcube on an
// odd number of shards (more than one), or cannot send `wire` (bfloat16 or float16) over `shards` shards:
// Gloo's plain ring has every shard add the others' buffers in its own order, so 16-bit sums would differ
// from shard to shard (and so would the replicas), and bcube summed wrongly in 16 bits on shard counts that
// are not powers of two. auto, ring_chunked and halving_doubling carry both.
void CheckAllreduceAlgorithm(const std::string& algorithm, int shards, DataType wire);

class GlooCommunicator : public Communicator {
 public:
  // Opens the network devices; throws InvalidInput on bad options (before any shard waits for this one).
  GlooCommunicator(const GlooOptions& options, int num_shards);
  ~GlooCommunicator() override;
  // Connects every shard of the rendezvous to every other; throws IoError when that fails within the
  // rendezvous' timeout. Collectives need a connected communicator.
  void Connect(std::shared_ptr<Rendezvous> rendezvous);
  // Both steps at once.
  GlooCommunicator(std::shared_ptr<Rendezvous> rendezvous, const GlooOptions& options);

  int rank() const override;
  int size() const override;
  // The allreduce algorithm, "auto" resolved.
  const std::string& algorithm() const;
  void Allreduce(const std::vector<float*>& buffers, size_t count) override;
  // The shards' sum crosses the network in `wire` (wire_dtype.h); float16 first agrees on its scale with a
  // one-float allreduce.
  void AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
  // Connects through the rendezvous (every shard opens channel k) the first time; needs a connected
  // communicator.
  std::shared_ptr<Communicator> Channel(int k) override;

  // For this communicator and its channels.
  void EndFirstIteration();
  // Waits (up to timeout) until every shard has finished its collectives, then disconnects, channels
  // included. Call it at the end of a successful run; after an error, destroying the communicator is enough.
  void Close();

 private:
  struct State;
  explicit GlooCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace lockstep
