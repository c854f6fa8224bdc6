// What every shard of a job must agree on before the first step: lockstep's version, the replica's parameters
// and shapes, its state blobs, the gradient buckets (the order of the collectives) and their wire dtype, plus
// whatever the caller adds (the trainer adds its hyper-parameters). A mismatch stops every shard before any
// collective runs, with a message that names the first differing shard and entry.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lockstep/parallel/data_parallel.h"

namespace lockstep {

class Rendezvous;

using Fingerprint = std::vector<std::pair<std::string, std::string>>;  // (entry, value), in a fixed order

Fingerprint ModelFingerprint(const ModelHelper& model, const DataParallelModel& parallel);

// Exchanges fingerprints through the rendezvous; throws InvalidInput when any shard's differs from shard 0's.
void AgreeOnModel(Rendezvous* rendezvous, const Fingerprint& mine);

// The first difference between shard 0's fingerprint and another's, or "" when they agree.
std::string FirstDifference(const Fingerprint& first, const Fingerprint& other, int other_shard);

}  // namespace lockstep
