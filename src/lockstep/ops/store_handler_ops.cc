// FileStoreHandlerCreate and RedisStoreHandlerCreate (Caffe2's): () -> store_handler, the workspace object
// through which CreateCommonWorld(store_handler) makes the shards meet, with the argument names and defaults
// of Caffe2's ops. They check the store at once (the directory exists, the Redis server answers), so a wrong
// path or host fails before any shard waits.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/store_handler.h"

namespace lockstep {

std::shared_ptr<GlooCommunicator> StoreHandler::Connect(const OperatorDef& def, int size, int rank,
                                                        const GlooOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (communicator_) {
    if (communicator_->size() != size || communicator_->rank() != rank)
      FailOperator(def, fmt::format("this store handler already connected shard {} of {}, not {} of {}; a "
                                    "process joins a run once: give every CreateCommonWorld the same size "
                                    "and rank",
                                    communicator_->rank(), communicator_->size(), rank, size));
    return communicator_;
  }
  RendezvousOptions shard = where_;
  shard.num_shards = size;
  shard.shard_id = rank;
  communicator_ = std::make_shared<GlooCommunicator>(std::make_shared<Rendezvous>(shard), options);
  return communicator_;
}

namespace {

// What both ops share: check the store `where` names, then put a handler for it under the output's name.
class StoreHandlerCreateOp : public Operator {
 public:
  StoreHandlerCreateOp(const OperatorDef& def, Workspace* ws, RendezvousOptions where)
      : Operator(def, ws), where_(std::move(where)) {}

  void Run() override {
    try {
      CheckRendezvousStore(where_);
    } catch (const IoError& e) {
      throw IoError(fmt::format("{}: {}", DescribeOperator(def_), e.what()));
    } catch (const InvalidInput& e) {
      FailOperator(def_, e.what());
    }
    ws_->SetObject(def_.output(0), std::make_shared<StoreHandler>(where_));
  }

 private:
  RendezvousOptions where_;
};

// Caffe2's prefix may be left out; the run id may not (rendezvous.h).
std::string RunId(const OperatorDef& def) {
  std::string prefix = StringArg(def, "prefix");
  return prefix.empty() ? kRunIdWithoutPrefix : prefix;
}

RendezvousOptions FileStore(const OperatorDef& def) {
  if (!HasArgument(def, "path"))
    FailOperator(def, "argument path is required: a directory every shard can write");
  RendezvousOptions where;
  where.file_store_path = StringArg(def, "path");
  where.run_id = RunId(def);
  where.run_id_flag = "prefix (the store handler's run id)";
  return where;
}

RendezvousOptions RedisStore(const OperatorDef& def) {
  if (!HasArgument(def, "host") || StringArg(def, "host").empty())
    FailOperator(def, "argument host is required: the Redis server's host name or address");
  RendezvousOptions where;
  where.redis_host = StringArg(def, "host");
  where.redis_port = static_cast<int>(IntArg(def, "port"));
  where.run_id = RunId(def);
  where.run_id_flag = "prefix (the store handler's run id)";
  return where;
}

// The op class of one kind of store.
template <RendezvousOptions (*kWhere)(const OperatorDef&)>
class StoreHandlerCreate : public StoreHandlerCreateOp {
 public:
  StoreHandlerCreate(const OperatorDef& def, Workspace* ws) : StoreHandlerCreateOp(def, ws, kWhere(def)) {}
};

void DeclareStoreHandler(OpSchema& schema) {
  schema.Output(0, "handler", "a workspace object: the store handler, CreateCommonWorld's input 0")
      .Arg("prefix", ArgType::kString, "",
           "the run id, which prefixes every key, so that runs with different ids never meet; none: "
           "'default' (a run's keys stay: give each run on one store a prefix of its own)")
      .ObjectOutputs(1)
      .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
        return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
      });
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(FileStoreHandlerCreate)
    .SetDoc(
        "Puts into the object its output names a store handler over a directory that every shard can write "
        "(e.g. on NFS), for CreateCommonWorld (Caffe2's FileStoreHandlerCreate).")
    .Arg("path", ArgType::kString, "required: the directory; it must exist")
    .Include(DeclareStoreHandler);
LOCKSTEP_OPERATOR_SCHEMA(RedisStoreHandlerCreate)
    .SetDoc(
        "Puts into the object its output names a store handler over a Redis server, for CreateCommonWorld "
        "(Caffe2's RedisStoreHandlerCreate).")
    .Arg("host", ArgType::kString, "required: the Redis server's host name or address")
    .Arg("port", ArgType::kInt, 6379, "the Redis server's port")
    .Range(1, 65535)
    .Include(DeclareStoreHandler);
LOCKSTEP_REGISTER_CPU_OPERATOR(FileStoreHandlerCreate, StoreHandlerCreate<FileStore>);
LOCKSTEP_REGISTER_CPU_OPERATOR(RedisStoreHandlerCreate, StoreHandlerCreate<RedisStore>);
LOCKSTEP_NO_GRADIENT(FileStoreHandlerCreate);
LOCKSTEP_NO_GRADIENT(RedisStoreHandlerCreate);

}  // namespace lockstep
