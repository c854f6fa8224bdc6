// The memory plan of a net, made before its first run: the bytes of every blob from the operators' shape
// functions, buffers shared between blobs whose lifetimes do not overlap (parallel/memonger.h, best fit by
// size), and the tensor memory this gives each device.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/schema.h"

namespace lockstep {

// One device's tensor memory, in bytes.
struct MemoryUse {
  size_t parameters = 0;   // trainable parameters
  size_t state = 0;        // the rest that the init net makes: optimizer state, BN statistics, counters
  size_t gradients = 0;    // parameter gradients
  size_t activations = 0;  // what else the net writes (activations, their gradients, unread outputs), shared
  size_t unshared_activations = 0;  // the same, one buffer per blob
  // The evaluation net's activations and operator scratch, which stay beside the training net's.
  size_t evaluation = 0;
  // What the operators need only while they run: oneDNN's copies and workspaces, cuDNN's workspace.
  size_t scratch = 0;
  size_t Total() const { return parameters + state + gradients + activations + evaluation + scratch; }
};

struct MemoryPlan {
  std::map<std::string, MemoryUse> devices;  // by device, "cpu:0"
  std::string unknown;                       // why the sizes are unknown; empty when the plan has them
  size_t Total() const;
};

struct MemoryPlanOptions {
  bool share = true;                 // share buffers (else only measure)
  std::vector<std::string> scopes;   // blobs share only within a scope (a replica's device)
  std::set<std::string> keep;        // never shared: losses, parameter gradients, blobs read after a run
  std::set<std::string> scratch;     // written, never read and no result (MemongerOptions::scratch)
  std::set<std::string> parameters;  // trainable parameters (full names)
  std::set<std::string> gradients;   // their gradients
  // Shapes of the blobs that no shape function gives (what the readers produce), by full name.
  std::map<std::string, TensorShape> given;
};

// Rewrites `net` (when options.share) so that blobs whose lifetimes do not overlap share memory, and returns
// the plan. With every size known the blobs get offsets in one arena per device (core/buffer_placement.h,
// applied when a workspace creates the net); else blobs share names, most recently freed buffer first.
// init_net makes the state that `net` reads.
MemoryPlan PlanMemory(NetDef* net, const NetDef& init_net, const MemoryPlanOptions& options);

// The plan in lines of text, one per device and a total, e.g. "cpu:0 1.52 GiB: parameters 97.5 MiB, ...".
std::string DescribeMemoryPlan(const MemoryPlan& plan);

// "1.52 GiB", "97.5 MiB", "512 KiB".
std::string FormatBytes(double bytes);

}  // namespace lockstep
