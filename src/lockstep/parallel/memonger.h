// Memory optimisation by renaming (Caffe2's memonger): blobs whose lifetimes in a net do not overlap get one
// name, so they share one Tensor, whose buffer grows to the largest of them. Results are unchanged.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct MemongerOptions {
  // Only blobs under one of these name scopes (none: every blob); a device's blobs share with its own only.
  std::vector<std::string> namescopes;
  std::set<std::string> keep;      // never renamed: parameter gradients, losses, blobs other nets read, ...
  bool share_activations = false;  // also share forward-pass blobs; by default only gradient blobs
  // Bytes of every blob the net writes (e.g. the capacities after one step without sharing). When given, a
  // blob goes to the free buffer that fits it best; without them, to the most recently freed one.
  std::map<std::string, size_t> blob_bytes;
  std::set<std::string> scratch;  // written and never read, yet no result: they share like any other
};

// What the names of shared blobs hold: "<namescope>__shared_<k>".
inline constexpr char kSharedBlobMarker[] = "__shared_";

// Returns `net` with blobs renamed so that blobs with disjoint lifetimes share a name (and so a buffer).
// A blob may be renamed when it is under a namescope, not kept, not an external input or output of the
// net, written before it is read (a blob read first carries state across runs), read by some op (a blob
// only written is a result the caller fetches) unless it is scratch, not touched by a collective
// op, and not a workspace object (OpSchema::ObjectInputs). Two blobs share only if the last op using one
// comes strictly before the first op writing the other, so no op ever reads one and writes the other.
NetDef ShareBlobs(const NetDef& net, const MemongerOptions& options);

// The same blobs at byte offsets of one buffer per device instead (options.blob_bytes must size them), which
// wastes less than renaming: greedy by size, the largest first, each at the lowest offset free of every
// placed blob whose lifetime overlaps its own (offsets and sizes rounded up to 64 bytes). A blob that reuses
// bytes of an earlier one gets it as a control input of the op that first writes it, so that a DAG executor
// runs that op after every use of the earlier blob. Placed blobs are renamed PlacedName(net, blob), so that
// no other net of the workspace (an evaluation net built with the same layer names) writes into the buffer.
// Returns each device's buffer (the device of the op that first writes a blob) and its size;
// PlacedBlob::buffer indexes them.
struct PlacedBlob {
  std::string name;  // as the net named it before
  int buffer = 0;
  size_t offset = 0, bytes = 0;
};
std::vector<std::pair<Device, size_t>> PlaceBlobs(NetDef* net, const MemongerOptions& options,
                                                  std::vector<PlacedBlob>* placed);
// "cpu_0/conv1__train": the name a placed blob gets in `net`.
std::string PlacedName(const NetDef& net, const std::string& blob);

}  // namespace lockstep
