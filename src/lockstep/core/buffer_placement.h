// Blobs placed at byte offsets in one buffer (an arena) per device, as a memory plan decides: written into a
// NetDef's arguments, and applied when a workspace creates or runs the net, so that every way of running a
// net (C++, the command line, Python) gets the same memory.
#pragma once

#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

class Workspace;

struct Arena {
  Device device;
  size_t bytes = 0;
};

struct BufferPlacement {
  std::string blob;
  int arena = 0;  // index into the arenas
  size_t offset = 0, bytes = 0;
};

// Replaces the net's placement arguments with these arenas and placements.
void WriteBufferPlacement(NetDef* net, const std::vector<Arena>& arenas,
                          const std::vector<BufferPlacement>& placements);
std::vector<Arena> ReadArenas(const NetDef& net);
std::vector<BufferPlacement> ReadBufferPlacements(const NetDef& net);

// Whether the argument is one of the placement's (executor settings copied between nets leave them out).
bool IsBufferPlacementArgument(const Argument& arg);

// Allocates the net's arenas and makes each placed blob use its slice (Tensor::ShareStorage): a blob resized
// past its slice leaves it for a buffer of its own. A net without placement changes nothing.
void ApplyBufferPlacement(const NetDef& net, Workspace* ws);

}  // namespace lockstep
