// Each network interface is a rail with two Gloo contexts over the same peers: one whose pairs wait up to
// first_iter_timeout (the initial broadcast and the first step) and one whose pairs wait up to timeout (Gloo
// fixes a pair's timeout when it is created). Allreduce algorithms are built once per buffer and context and
// reused, as Gloo intends; every shard builds them in the same order, so their slots agree. Buffers must
// therefore outlive the communicator's use of them (the Allreduce op's buckets do). A 16-bit wire
// (wire_dtype.h) gives each bucket a 16-bit copy, made on its first allreduce and kept like the algorithms:
// every Gloo algorithm takes the element type and the reduction, so each carries bfloat16 and float16 alike,
// widening to float32 at every hop.
#include "lockstep/comm/gloo_communicator.h"

#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "lockstep/comm/gloo_message.h"
#include "lockstep/comm/local_communicator.h"
#include "lockstep/comm/redis_store.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSetup = 0, kSteady = 1;  // the two contexts of a rail

std::string Bytes(size_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KB", bytes / 1024.0);
  return fmt::format("{} bytes", bytes);
}

// CheckAllreduceAlgorithm's part that depends on the wire: what each collective checks, its algorithm's name
// being checked already.
void CheckWire(const std::string& algorithm, int shards, DataType wire) {
  if (wire == DataType::kFloat) return;
  if (algorithm == "ring")
    throw InvalidInput(
        fmt::format("--allreduce_algorithm ring cannot send a {} wire: every shard sums in its own "
                    "order, so the shards' 16-bit sums would differ; use ring_chunked or "
                    "halving_doubling (or auto)",
                    DataTypeName(wire)));
  if (algorithm == "bcube" && (shards & (shards - 1)) != 0)
    throw InvalidInput(
        fmt::format("--allreduce_algorithm bcube sends a {} wire only over a power-of-two number of "
                    "shards, not {}; use ring_chunked or halving_doubling (or auto)",
                    DataTypeName(wire), shards));
}

std::string ResolveAlgorithm(const std::string& name, int shards) {
  CheckAllreduceAlgorithm(name, shards, DataType::kFloat);
  if (name != "auto") return name;
  // Halving-doubling takes the fewest steps, but on a shard count that is not a power of two Gloo splits it
  // into binary blocks whose busiest shard sends 2 buffers where ring_chunked sends 2(N-1)/N: 3 shards on
  // 1 Gbit/s links took 0.80 s/step against 0.61 (bench/notes/multihost.md).
  return (shards & (shards - 1)) == 0 ? "halving_doubling" : "ring_chunked";
}

// The hops of the 16-bit wire: both operands widened to float32, added, rounded back.
const gloo::ReductionFunction<BFloat16> kSumBFloat16(gloo::CUSTOM, &SumBFloat16);
const gloo::ReductionFunction<Float16> kSumFloat16(gloo::CUSTOM, &SumFloat16);

template <typename T>
std::unique_ptr<gloo::Algorithm> NewAllreduce(
    const std::string& algorithm, const std::shared_ptr<gloo::Context>& context, T* data, size_t count,
    const gloo::ReductionFunction<T>* fn = gloo::ReductionFunction<T>::sum) {
  LOCKSTEP_ENFORCE(count <= static_cast<size_t>(INT_MAX), "Gloo allreduces at most {} elements at once",
                   INT_MAX);
  const std::vector<T*> ptrs{data};
  const int n = static_cast<int>(count);
  if (algorithm == "ring") return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, n, fn);
  if (algorithm == "ring_chunked")
    return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, n, fn);
  if (algorithm == "bcube") return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, n, fn);
  return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, n, fn);
}

std::shared_ptr<gloo::transport::Device> NewDevice(const std::string& transport,
                                                   const std::string& interface) {
  try {
    if (transport == "ibverbs") {
      std::vector<std::string> names = gloo::transport::ibverbs::getDeviceNames();
      if (names.empty())
        throw InvalidInput("--distributed_transport ibverbs: this machine has no InfiniBand device; use tcp");
      gloo::transport::ibverbs::attr attr{interface.empty() ? names[0] : interface, 1, 0};
      return gloo::transport::ibverbs::CreateDevice(attr);
    }
    gloo::transport::tcp::attr attr;
    attr.iface = interface;  // empty: the address the host name resolves to
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InvalidInput(fmt::format("--distributed_transport {} cannot use {}: {}", transport,
                                   interface.empty() ? "the host's address" : "interface '" + interface + "'",
                                   GlooMessage(e.what())));
  }
}

// A full mesh of Gloo pairs, connected through the rendezvous (as gloo::rendezvous::Context::connectFullMesh
// does through a store). It also records every address this shard's pairs go by, before and after connecting,
// because a Gloo error names the peer by whichever of them it saw.
class MeshContext : public gloo::Context {
 public:
  MeshContext(int rank, int size) : gloo::Context(rank, size) {}

  void Connect(Rendezvous* rendezvous, const std::string& key,
               const std::shared_ptr<gloo::transport::Device>& device, std::chrono::milliseconds timeout,
               std::string* addresses) {
    setTimeout(timeout);
    auto transport = device->createContext(rank, size);
    transport->setTimeout(timeout);
    std::string mine;  // line i: the hex bytes of the address this shard's pair for shard i listens on
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) {
        auto& pair = transport->createPair(peer);
        mine += Hex(pair->address().bytes());
        *addresses += pair->address().str() + "\n";
      }
      mine += "\n";
    }
    std::vector<std::string> all = rendezvous->AllGather(key, mine);
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) transport->getPair(peer)->connect(Unhex(Line(all[peer], rank)));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) *addresses += transport->getPair(peer)->address().str() + "\n";
    device_ = device;
    transportContext_ = std::move(transport);
  }

 private:
  static std::string Hex(const std::vector<char>& bytes) {
    std::string out;
    for (char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
    return out;
  }
  static std::vector<char> Unhex(const std::string& hex) {
    std::vector<char> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return bytes;
  }
  static std::string Line(const std::string& text, int index) {
    size_t begin = 0;
    for (int i = 0; i < index; ++i) begin = text.find('\n', begin) + 1;
    return text.substr(begin, text.find('\n', begin) - begin);
  }
};

// One network interface with its two contexts and the allreduces built on each.
struct Rail {
  std::string name;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> contexts[2];
  std::map<std::pair<const void*, size_t>, std::unique_ptr<gloo::Algorithm>> allreduces[2];
};

// Rail r's share [begin, end) of n elements, in multiples of 16.
size_t SplitPoint(size_t n, size_t rails, size_t r) {
  if (r >= rails) return n;
  return std::min(n, (n / rails) / 16 * 16 * r);
}

}  // namespace

const std::vector<std::string>& GlooAllreduceAlgorithms() {
  static const std::vector<std::string> names{"auto", "ring", "ring_chunked", "halving_doubling", "bcube"};
  return names;
}

void CheckAllreduceAlgorithm(const std::string& algorithm, int shards, DataType wire) {
  const auto& known = GlooAllreduceAlgorithms();
  if (std::find(known.begin(), known.end(), algorithm) == known.end())
    throw InvalidInput(
        fmt::format("unknown --allreduce_algorithm '{}'; choose auto, ring, ring_chunked, "
                    "halving_doubling or bcube",
                    algorithm));
  if (algorithm == "bcube" && shards > 1 && shards % 2 != 0)
    throw InvalidInput(
        fmt::format("--allreduce_algorithm bcube needs an even number of shards, got {}; choose ring or "
                    "halving_doubling",
                    shards));
  CheckWire(algorithm, shards, wire);
}

struct GlooCommunicator::State {
  std::shared_ptr<Rendezvous> rendezvous;
  GlooOptions options;
  std::string algorithm;
  int num_shards = 1;
  std::vector<Rail> rails;
  int phase = kSetup;
  int64_t collectives = 0;
  std::map<std::string, int> shard_of_address;  // every peer pair's address -> its shard
  std::string key_prefix;                       // of its rendezvous keys: "" or "channel<k>/"
  std::map<int, std::shared_ptr<GlooCommunicator>> channels;
  // A bucket's 16-bit copy on the wire, and for float16 its largest |value|, which the shards agree on.
  struct Wire {
    std::vector<uint16_t> values;
    float max_abs = 0;
  };
  std::map<std::tuple<const float*, size_t, DataType>, Wire> wires;

  void Connect();
  template <class Part>
  void Collective(const char* name, size_t bytes, size_t elements, const Part& part);
  std::string Blame(const std::string& operation, const std::string& message);
};

GlooCommunicator::GlooCommunicator(const GlooOptions& options, int num_shards)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = options;
  s.num_shards = num_shards;
  s.algorithm = ResolveAlgorithm(options.algorithm, num_shards);
  if (options.transport != "tcp" && options.transport != "ibverbs")
    throw InvalidInput(fmt::format("unknown --distributed_transport '{}'; use tcp, or ibverbs on InfiniBand",
                                   options.transport));
  if (options.timeout.count() <= 0 || options.first_iter_timeout.count() <= 0)
    throw InvalidInput("--timeout and --first_iter_timeout must be positive");
  std::vector<std::string> interfaces = options.interfaces;
  if (interfaces.empty()) interfaces.push_back("");
  for (const auto& interface : interfaces) {
    Rail rail;
    rail.name = interface.empty() ? "the host's address" : interface;
    rail.device = NewDevice(options.transport, interface);
    s.rails.push_back(std::move(rail));
  }
}

GlooCommunicator::GlooCommunicator(std::shared_ptr<Rendezvous> rendezvous, const GlooOptions& options)
    : GlooCommunicator(options, rendezvous->num_shards()) {
  Connect(std::move(rendezvous));
}

void GlooCommunicator::Connect(std::shared_ptr<Rendezvous> rendezvous) {
  LOCKSTEP_ENFORCE(!state_->rendezvous, "the communicator is already connected");
  state_->rendezvous = std::move(rendezvous);
  state_->Connect();
}

GlooCommunicator::GlooCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

GlooCommunicator::~GlooCommunicator() = default;

std::shared_ptr<Communicator> GlooCommunicator::Channel(int k) {
  State& s = *state_;
  LOCKSTEP_ENFORCE(k >= 1, "channels are numbered from 1 (0 is the communicator itself), got {}", k);
  LOCKSTEP_ENFORCE(s.rendezvous, "call Connect before opening a channel");
  std::shared_ptr<GlooCommunicator>& channel = s.channels[k];
  if (channel) return channel;
  auto state = std::make_unique<State>();
  state->options = s.options;
  state->algorithm = s.algorithm;
  state->num_shards = s.num_shards;
  state->phase = s.phase;
  state->key_prefix = fmt::format("{}channel{}/", s.key_prefix, k);
  for (const Rail& rail : s.rails) {
    state->rails.emplace_back();
    state->rails.back().name = rail.name;
    state->rails.back().device = rail.device;  // one event loop per interface serves every channel
  }
  channel.reset(new GlooCommunicator(std::move(state)));
  channel->Connect(s.rendezvous);
  return channel;
}

void GlooCommunicator::State::Connect() {
  const int rank = rendezvous->shard(), size = rendezvous->num_shards();
  LOCKSTEP_ENFORCE_EQ(size, num_shards, "the communicator was opened for another number of shards");
  const std::chrono::milliseconds timeouts[2] = {options.first_iter_timeout, options.timeout};
  std::string addresses;
  for (size_t r = 0; r < rails.size(); ++r) {
    for (int phase : {kSetup, kSteady}) {
      auto context = std::make_shared<MeshContext>(rank, size);
      try {
        context->Connect(rendezvous.get(), fmt::format("{}rail{}/context{}", key_prefix, r, phase),
                         rails[r].device, timeouts[phase], &addresses);
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        throw IoError(fmt::format("shard {}: connecting to the other shards of {} over {} failed: {}", rank,
                                  rendezvous->description(), rails[r].name, GlooMessage(e.what())));
      }
      rails[r].contexts[phase] = context;
    }
  }
  std::vector<std::string> all = rendezvous->AllGather(key_prefix + "addresses", addresses);
  for (int shard = 0; shard < size; ++shard) {
    size_t begin = 0, end;
    while ((end = all[shard].find('\n', begin)) != std::string::npos) {
      shard_of_address[all[shard].substr(begin, end - begin)] = shard;
      begin = end + 1;
    }
  }
}

int GlooCommunicator::rank() const { return state_->rendezvous ? state_->rendezvous->shard() : 0; }
int GlooCommunicator::size() const { return state_->rendezvous ? state_->rendezvous->num_shards() : 1; }
const std::string& GlooCommunicator::algorithm() const { return state_->algorithm; }

void GlooCommunicator::Close() {
  State& s = *state_;
  if (!s.rendezvous || s.rails.empty()) return;
  // Gloo fails a peer's receive when this shard's sockets close, even after the data arrived: wait until
  // every shard is done with its collectives (its channels' ran in the same nets, so they are done too).
  // A store that is gone by then cannot tell; the run's collectives are over here, so the shard closes.
  try {
    s.rendezvous->AllGather("end of run", "", s.options.timeout);
  } catch (const StoreUnavailable& e) {
    std::fprintf(stderr, "lockstep: warning: %s; closing without waiting for the other shards to end\n",
                 e.what());
  }
  for (auto& [k, channel] : s.channels) channel->state_->rails.clear();
  s.rails.clear();
}

void GlooCommunicator::EndFirstIteration() {
  state_->phase = kSteady;
  for (auto& rail : state_->rails) rail.allreduces[kSetup].clear();
  for (auto& [k, channel] : state_->channels) channel->EndFirstIteration();
}

template <class Part>
void GlooCommunicator::State::Collective(const char* name, size_t bytes, size_t elements, const Part& part) {
  ++collectives;
  auto run = [&](size_t r) {
    size_t begin = SplitPoint(elements, rails.size(), r), end = SplitPoint(elements, rails.size(), r + 1);
    if (end > begin) part(rails[r], begin, end - begin);
  };
  std::vector<std::future<void>> others;
  for (size_t r = 1; r < rails.size(); ++r) others.push_back(std::async(std::launch::async, run, r));
  std::exception_ptr error;
  try {
    run(0);
  } catch (...) {
    error = std::current_exception();
  }
  for (auto& other : others) {
    try {
      other.get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(Blame(fmt::format("{} of {} (collective {})", name, Bytes(bytes), collectives),
                        GlooMessage(e.what())));
  }
}

// Names the shard at fault. The error says which peer this shard lost; that peer may itself only have stopped
// waiting for another one, so the reports on the failure board are followed to the shard that failed first.
std::string GlooCommunicator::State::Blame(const std::string& operation, const std::string& message) {
  const int me = rendezvous->shard();
  const int size = rendezvous->num_shards();
  int suspect = size == 2 ? 1 - me : -1;
  for (const auto& [address, shard] : shard_of_address)
    if (message.find(address) != std::string::npos) suspect = shard;
  for (int shard = 0; shard < size && suspect < 0;
       ++shard) {  // unknown peer: one that stopped on its own error
    auto report = shard == me ? std::nullopt : rendezvous->FailureOf(shard);
    if (report && report->suspect < 0) suspect = shard;
  }
  const bool timed_out =
      message.find("imeout") != std::string::npos || message.find("imed out") != std::string::npos;
  const auto waited = phase == kSetup ? options.first_iter_timeout : options.timeout;
  std::string kind =
      timed_out ? fmt::format("sent nothing for {} s: it is stalled, or slower than --timeout allows",
                              waited.count() / 1000)
                : "closed its connection: it was killed, crashed or stopped on an error";
  rendezvous->ReportFailure(suspect, kind);
  if (suspect < 0) return fmt::format("shard {}: {} failed: {}", me, operation, message);

  int culprit = suspect;
  std::set<int> visited{me};
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (!visited.count(culprit)) {
    auto report = rendezvous->FailureOf(culprit);
    if (!report) {
      if (Clock::now() >= deadline || rendezvous->Exited(culprit)) break;  // it will not report
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    visited.insert(culprit);
    if (report->suspect < 0)
      return fmt::format("shard {}: {} failed: shard {} stopped on an error: {}", me, operation, culprit,
                         report->what);
    if (visited.count(report->suspect)) break;
    culprit = report->suspect;
    kind = report->what;
  }
  std::string via = culprit == suspect ? "" : fmt::format(" (shard {} stopped waiting for it)", suspect);
  return fmt::format("shard {}: {} failed: shard {} {}{}", me, operation, culprit, kind, via);
}

void GlooCommunicator::Allreduce(const std::vector<float*>& buffers, size_t count) {
  LOCKSTEP_ENFORCE(!buffers.empty(), "Allreduce needs at least one buffer");
  LOCKSTEP_ENFORCE(state_->rendezvous, "call Connect before the first collective");
  SumIntoFirst(buffers, count);
  State& s = *state_;
  s.Collective(__func__, count * sizeof(float), count, [&](Rail& rail, size_t begin, size_t n) {
    auto& algorithm = rail.allreduces[s.phase][{buffers[0] + begin, n}];
    if (!algorithm) algorithm = NewAllreduce(s.algorithm, rail.contexts[s.phase], buffers[0] + begin, n);
    algorithm->run();
  });
  // Empty buffers may be null, and memcpy wants valid pointers even for no bytes.
  if (count == 0) return;
  for (size_t b = 1; b < buffers.size(); ++b) std::memcpy(buffers[b], buffers[0], count * sizeof(float));
}

void GlooCommunicator::AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) {
  if (wire == DataType::kFloat) return Allreduce(buffers, count);
  LOCKSTEP_ENFORCE(wire == DataType::kBFloat16 || wire == DataType::kFloat16,
                   "gradients travel as float, bfloat16 or float16, not {}", DataTypeName(wire));
  LOCKSTEP_ENFORCE(!buffers.empty(), "Allreduce needs at least one buffer");
  LOCKSTEP_ENFORCE(state_->rendezvous, "call Connect before the first collective");
  CheckWire(state_->algorithm, state_->num_shards, wire);
  SumIntoFirst(buffers, count);
  if (count == 0) return;  // every shard has the same count
  State& s = *state_;
  State::Wire& on_wire = s.wires[{buffers[0], count, wire}];
  if (on_wire.values.empty()) on_wire.values.resize(count);
  float scale = 1;
  if (wire == DataType::kFloat16) {
    on_wire.max_abs = MaxAbs(buffers[0], count);
    s.Collective("Allreduce of the float16 scale", sizeof(float), 1, [&](Rail& rail, size_t, size_t) {
      auto& algorithm = rail.allreduces[s.phase][{&on_wire.max_abs, 1}];
      // The plain ring: the chunked and halving-doubling algorithms split a buffer into a part per shard,
      // which one value does not have with 3 or more shards.
      if (!algorithm)
        algorithm = NewAllreduce<float>("ring", rail.contexts[s.phase], &on_wire.max_abs, 1,
                                        gloo::ReductionFunction<float>::max);
      algorithm->run();
    });
    scale = Float16WireScale(on_wire.max_abs, s.num_shards);
  }
  NarrowToWire(buffers[0], count, wire, scale, on_wire.values.data());
  uint16_t* values = on_wire.values.data();
  s.Collective("Allreduce", count * sizeof(uint16_t), count, [&](Rail& rail, size_t begin, size_t n) {
    auto& algorithm = rail.allreduces[s.phase][{values + begin, n}];
    if (!algorithm && wire == DataType::kBFloat16)
      algorithm = NewAllreduce(s.algorithm, rail.contexts[s.phase],
                               reinterpret_cast<BFloat16*>(values + begin), n, &kSumBFloat16);
    if (!algorithm)
      algorithm = NewAllreduce(s.algorithm, rail.contexts[s.phase],
                               reinterpret_cast<Float16*>(values + begin), n, &kSumFloat16);
    algorithm->run();
  });
  WidenFromWire(values, count, wire, scale, buffers[0]);
  for (size_t b = 1; b < buffers.size(); ++b) std::memcpy(buffers[b], buffers[0], count * sizeof(float));
}

void GlooCommunicator::Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) {
  LOCKSTEP_ENFORCE(!buffers.empty(), "Broadcast needs at least one buffer");
  LOCKSTEP_ENFORCE(state_->rendezvous, "call Connect before the first collective");
  State& s = *state_;
  auto* data = static_cast<char*>(buffers[0]);
  s.Collective(__func__, bytes, bytes, [&](Rail& rail, size_t begin, size_t n) {
    gloo::BroadcastOneToAll<char>(rail.contexts[s.phase], {data + begin}, n, root_rank).run();
  });
  if (bytes == 0) return;  // empty buffers may be null
  for (size_t b = 1; b < buffers.size(); ++b)
    if (buffers[b] != data) std::memcpy(buffers[b], data, bytes);  // not a device reading the first's copy
}

}  // namespace lockstep
