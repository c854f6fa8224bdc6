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
// Argument `devices`: the logical devices the world serves, in the order of the collectives' buffers; the
// CUDA implementation (cuda/common_world_op.cc) needs them, each buffer being in its device's memory.
#include "lockstep/comm/local_communicator.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/collective_op.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

std::shared_ptr<Communicator> ShardCommunicatorInput(const OperatorDef& def, const Workspace& ws) {
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
    .OptionalInput(0, "shards", "a workspace object, the connected communicator that spans the shards")
    .Output(0, "world", "a workspace object: the communicator")
    .Arg("devices", ArgType::kInts, std::vector<int64_t>{},
         "the logical devices the world serves, in the order of the collectives' buffers (CUDA needs them)")
    .Min(0)
    .Arg("channel", ArgType::kInt, 0,
         "k >= 1: channel k of the shards' communicator, whose collectives run beside the world's")
    .Min(0)
    .ObjectInputs(1)
    .ObjectOutputs(1)
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(CreateCommonWorld, CreateCommonWorldOp);
LOCKSTEP_NO_GRADIENT(CreateCommonWorld);

}  // namespace lockstep
