#include "lockstep/parallel/shared_parameters.h"

#include <algorithm>
#include <map>
#include <set>

#include "lockstep/core/enforce.h"
#include "lockstep/core/net_def.h"

namespace lockstep {

void ReadFirstReplicaParameters(NetDef* net, NetDef* init_net, const std::vector<std::string>& scopes,
                                const std::vector<std::string>& parameters) {
  std::map<std::string, std::string> first_of;  // a later replica's parameter -> the first replica's
  for (size_t r = 1; r < scopes.size(); ++r)
    for (const auto& name : parameters) first_of[scopes[r] + name] = scopes[0] + name;
  auto shared = [&](const std::string& blob) { return first_of.count(blob) > 0; };

  for (auto& op : *net->mutable_op()) {
    if (std::any_of(op.output().begin(), op.output().end(), shared))
      throw InvalidInput(
          fmt::format("shared_model: {} writes '{}', a parameter the replicas share; only "
                      "the first replica's update may write parameters",
                      op.type(), op.output(0)));
    for (auto& input : *op.mutable_input())
      if (shared(input)) input = first_of.at(input);
  }
  NetDef kept = *init_net;
  kept.clear_op();
  for (const auto& op : init_net->op()) {
    if (op.output_size() > 0 && std::all_of(op.output().begin(), op.output().end(), shared)) continue;
    if (std::any_of(op.output().begin(), op.output().end(), shared))
      throw InvalidInput(
          fmt::format("shared_model: {} in param_init_net makes a shared parameter beside "
                      "other blobs; initialize each parameter with its own op",
                      op.type()));
    *kept.add_op() = op;
  }
  *init_net = kept;
}

void AddViewsOfFirstReplicaState(NetDef* init_net, const std::vector<std::string>& scopes,
                                 const std::vector<std::string>& state, const Device& device) {
  std::set<std::string> made;
  for (const auto& op : init_net->op()) made.insert(op.output().begin(), op.output().end());
  for (size_t r = 1; r < scopes.size(); ++r)
    for (const auto& name : state)
      if (!made.count(scopes[r] + name)) {
        OperatorDef alias = MakeOperatorDef("Alias", {scopes[0] + name}, {scopes[r] + name});
        SetDevice(&alias, device);
        *init_net->add_op() = alias;
      }
}

}  // namespace lockstep
