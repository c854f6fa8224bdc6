// CreateCommonWorld: the communicator that the collectives of a data-parallel model read as their input 0, as
// in Caffe2, where Allreduce takes the common world as input 0. Its output names a workspace object, not a
// tensor: running the op (Parallelize adds it to param_init_net) puts the communicator there, and the graph
// shows every collective that depends on it.
//   CreateCommonWorld() -> world: the communicator of this process's devices; on the CPU a LocalCommunicator.
//   CreateCommonWorld(shards) -> world: the job's communicator. `shards` names the workspace object that the
//     caller sets before running the net, a connected GlooCommunicator that spans the shards (Caffe2's
//     rendezvous kv_handler); on the CPU it is the world itself, since Gloo sums each shard's devices too.
//     Argument `channel` k >= 1: its channel k instead, whose collectives can run beside the world's (the
//     world itself where the communicator has no channels).
//   CreateCommonWorld(store_handler) -> world: Caffe2's rendezvous. `store_handler` is what
//     FileStoreHandlerCreate or RedisStoreHandlerCreate wrote; the op joins the run as shard `rank` of `size`
//     through it and connects a GlooCommunicator (arguments transport, interface, timeout_ms), which then
//     serves as the shards' communicator above. Later CreateCommonWorld ops over the same handler share it.
// Argument `devices`: the logical devices the world serves, in the order of the collectives' buffers; the
// CUDA implementation (cuda/common_world_op.cc) needs them, each buffer being in its device's memory.
#include "lockstep/comm/local_communicator.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/collective_op.h"
#include "lockstep/ops/op_defs.h"
#include "lockstep/ops/store_handler.h"

namespace lockstep {
namespace {

// Caffe2's rendezvous: the shards' communicator, connected through the store handler by the first op.
std::shared_ptr<Communicator> ConnectThrough(StoreHandler& handler, const OperatorDef& def) {
  const int64_t size = IntArg(def, "size"), rank = IntArg(def, "rank");
  if (size < 1 || rank >= size)
    FailOperator(def, fmt::format("rank {} must be in [0, size {}): pass size = the number of shards and "
                                  "rank = this shard's id",
                                  rank, size));
  GlooOptions options;
  options.transport = StringArg(def, "transport");
  if (!StringArg(def, "interface").empty()) options.interfaces = {StringArg(def, "interface")};
  if (IntArg(def, "timeout_ms") > 0) options.timeout = std::chrono::milliseconds(IntArg(def, "timeout_ms"));
  return handler.Connect(def, static_cast<int>(size), static_cast<int>(rank), options);
}

}  // namespace

std::shared_ptr<Communicator> ShardCommunicatorInput(const OperatorDef& def, const Workspace& ws) {
  if (auto handler = ws.FindObject<StoreHandler>(def.input(0))) return ConnectThrough(*handler, def);
  return CommunicatorInput(
      def, ws,
      fmt::format("before running the net, set the communicator that spans the shards (a connected "
                  "GlooCommunicator): ws.SetObject<Communicator>(\"{}\", gloo)",
                  def.input(0)));
}

namespace {

class CreateCommonWorldOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    std::shared_ptr<Communicator> world =
        InputSize() > 0 ? ShardCommunicatorInput(def_, *ws_) : std::make_shared<LocalCommunicator>();
    const int channel = static_cast<int>(IntArg("channel"));
    if (channel > 0 && InputSize() > 0)
      if (auto own = world->Channel(channel)) world = own;
    ws_->SetObject(def_.output(0), world);
  }
};

}  // namespace

OperatorDef CreateCommonWorldDef(const std::string& world, const std::vector<int64_t>& devices,
                                 const std::string& shards, int channel) {
  std::vector<Arg> args{Arg("devices", devices)};
  if (channel > 0) args.push_back(Arg("channel", int64_t{channel}));
  return MakeOperatorDef("CreateCommonWorld",
                         shards.empty() ? std::vector<std::string>{} : std::vector{shards}, {world}, args);
}

LOCKSTEP_OPERATOR_SCHEMA(CreateCommonWorld)
    .SetDoc(
        "Puts into the workspace object named by its output the communicator that the collectives read as "
        "input 0: this process's devices (a LocalCommunicator on CPUs), or, given the shards' communicator, "
        "the job's.")
    .OptionalInput(0, "shards",
                   "a workspace object, the connected communicator that spans the shards, or a store handler "
                   "(FileStoreHandlerCreate, RedisStoreHandlerCreate) to connect it through")
    .Output(0, "world", "a workspace object: the communicator")
    .Arg("devices", ArgType::kInts, std::vector<int64_t>{},
         "the logical devices the world serves, in the order of the collectives' buffers (CUDA needs them)")
    .Min(0)
    .Arg("channel", ArgType::kInt, 0,
         "k >= 1: channel k of the shards' communicator, whose collectives run beside the world's")
    .Min(0)
    .Arg("size", ArgType::kInt, 0, "with a store handler: the number of shards (Caffe2's size)")
    .Min(0)
    .Arg("rank", ArgType::kInt, 0, "with a store handler: this shard's id, in [0, size)")
    .Min(0)
    .Arg("transport", ArgType::kString, GlooOptions{}.transport,
         "with a store handler: Gloo's transport, tcp or ibverbs")
    .Arg("interface", ArgType::kString, "",
         "with a store handler: the network interface (tcp) or InfiniBand device; empty: the host's address")
    .Arg("timeout_ms", ArgType::kInt, -1,
         "with a store handler: how long a collective waits for the other shards; -1: lockstep's default")
    .Min(-1)
    .ObjectInputs(1)
    .ObjectOutputs(1)
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(CreateCommonWorld, CreateCommonWorldOp);
LOCKSTEP_NO_GRADIENT(CreateCommonWorld);

}  // namespace lockstep
