// ModelHelper: a model under construction, as in Caffe2 — a param_init_net that creates the parameters, a net
// that computes, a registry of parameters with tags, and name/device scopes applied to every blob and op.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/seed.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// WEIGHT gets weight decay, BIAS does not; COMPUTED params (BN running statistics) are state, not trained.
enum class ParamTag { kWeight, kBias, kComputed };

// How a parameter is initialised: a fill operator type and its arguments. The named fills are defined with
// the layers (layers.cc).
struct FillSpec {
  std::string type;
  std::vector<Arg> args;
  static FillSpec Constant(float value);
  static FillSpec Gaussian(float std);  // mean 0
  static FillSpec Xavier();
  static FillSpec Msra();
};

struct ParamInfo {
  std::string name;
  Shape shape;
  ParamTag tag;
  Device device;  // where it lives: the device scope it was created under (or moved to by placement)
};

class ModelHelper {
 public:
  explicit ModelHelper(const std::string& name, bool init_params = true);

  // The name given; the nets are "<name>" and "<name>_init" unless renamed (Python gives a second model of
  // one name nets of their own, as Caffe2 does).
  const std::string& name() const { return name_; }

  // Each parameter's fill draws from a seed derived from this seed and the parameter's unscoped name, so
  // every replica starts from the same values and adding other ops to param_init_net changes none of them.
  // Set it before the parameters are created.
  void set_seed(uint64_t seed) { seed_ = seed; }
  uint64_t seed() const { return seed_; }

  NetDef& param_init_net() { return param_init_net_; }
  const NetDef& param_init_net() const { return param_init_net_; }
  NetDef& net() { return net_; }
  const NetDef& net() const { return net_; }

  // Prefixes the current name scope ("gpu_0/"). Scopes nest; the guards restore the previous one.
  std::string Scoped(const std::string& name) const { return name_scope_ + name; }
  const std::string& name_scope() const { return name_scope_; }
  class NameScope {
   public:
    NameScope(ModelHelper& model, const std::string& scope);
    ~NameScope();

   private:
    ModelHelper& model_;
    std::string saved_;
  };
  class DeviceScope {
   public:
    DeviceScope(ModelHelper& model, const Device& device);
    ~DeviceScope();

   private:
    ModelHelper& model_;
    Device saved_;
  };

  // Appends an op to the net under the current device; blob names are taken as given (already scoped).
  OperatorDef* AddOp(const std::string& type, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, const std::vector<Arg>& args = {});
  OperatorDef* AddOp(OperatorDef op);
  // Creates a parameter named Scoped(name) filled by `fill` in param_init_net (unless init_params is false).
  std::string CreateParam(const std::string& name, const Shape& shape, const FillSpec& fill, ParamTag tag);

  const std::vector<ParamInfo>& params() const { return params_; }
  // Names of parameters whose name starts with `scope`, optionally of some tags only, in creation order.
  std::vector<std::string> GetParams(const std::string& scope = "", std::vector<ParamTag> tags = {}) const;
  std::vector<std::string> GetTrainableParams(const std::string& scope = "") const {
    return GetParams(scope, {ParamTag::kWeight, ParamTag::kBias});
  }
  std::vector<std::string> GetComputedParams(const std::string& scope = "") const {
    return GetParams(scope, {ParamTag::kComputed});
  }
  const ParamInfo& Param(const std::string& name) const;
  // Moves a parameter to `device`: its fill in param_init_net and its registry entry (model placement).
  void SetParamDevice(const std::string& name, const Device& device);

  // Appends the backward pass for `losses` w.r.t. the trainable parameters and the blobs in `also` (blobs
  // used as parameters without being registered, as Caffe2 programs make them); returns blob -> gradient
  // blob for those of them the losses depend on, and for the losses. param_to_grad() keeps the parameters'.
  // Runs once per model (a second backward pass would add its gradients to the first's): pass every loss.
  std::map<std::string, std::string> AddGradientOperators(const std::vector<std::string>& losses,
                                                          const std::set<std::string>& also = {});
  const std::map<std::string, std::string>& param_to_grad() const { return param_to_grad_; }

  const Device& device() const { return device_; }

  // Which of the job's data-parallel replicas the ops being built belong to (index among count) and the
  // devices it may place its layers on; Parallelize sets it while it calls the builders, so an input builder
  // knows which slice of each batch to read.
  struct Replica {
    int index = 0;
    int count = 1;
    std::vector<Device> devices;  // the devices this replica spans (one unless it is model-parallel)
  };
  const Replica& replica() const { return replica_; }
  void set_replica(const Replica& replica) { replica_ = replica; }

 private:
  NetDef param_init_net_;
  NetDef net_;
  bool init_params_;
  uint64_t seed_ = kDefaultSeed;
  std::string name_;
  std::string name_scope_;
  Device device_;
  Replica replica_;
  std::vector<ParamInfo> params_;
  std::map<std::string, size_t> param_index_;  // name -> its place in params_: a net of many devices has many
  std::map<std::string, std::string> param_to_grad_;
  bool has_backward_pass_ = false;
};

}  // namespace lockstep
