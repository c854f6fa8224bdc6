// Caffe2's shared_model, for CPU replicas: every replica computes with the first replica's trainable
// parameters, which alone are updated, so the others keep no copy of them and no optimizer state. Their
// parameter names stay, as views of the first replica's (Alias), for the nets that read them by name (an
// evaluation net built without sharing). The results are those of equal copies: the same values are read.
#pragma once

#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// In `net`, the replicas of `scopes` after the first read the first's copy of each parameter in
// `parameters` (unscoped names), and init_net no longer makes theirs.
void ReadFirstReplicaParameters(NetDef* net, NetDef* init_net, const std::vector<std::string>& scopes,
                                const std::vector<std::string>& parameters);

// Appends to init_net, on `device`, an Alias for each blob of the first replica's state (`state`, unscoped)
// that a later replica does not make itself: the shared parameters and their optimizer state. Every replica
// then has every state blob, as the broadcast of the state and the nets built without sharing expect.
void AddViewsOfFirstReplicaState(NetDef* init_net, const std::vector<std::string>& scopes,
                                 const std::vector<std::string>& state, const Device& device);

}  // namespace lockstep
