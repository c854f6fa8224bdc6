// Model placement: layers on several devices. A blob lives on the device of the op that last wrote it (or of
// its fill in the init net); an op may only read blobs that live on its own device, so a placed net carries a
// Copy at every boundary. Placement comes from DeviceScope while building, from a map of layer names to
// devices, or from a split of the forward pass into stages of balanced cost. A Copy runs on the device it
// writes to; collective ops read every device's blobs themselves. Workspace objects (a communicator,
// OpSchema::ObjectInputs) are in no device's memory and never copied.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/schema.h"
#include "lockstep/model/model_helper.h"

namespace lockstep {

// Inserts a Copy "<blob>@<device>" before each op that reads a blob living on another device; one copy per
// (value, device) serves every later reader there until the blob is written again. Blobs that neither net
// writes live with their first reader. Copies feeding a gradient op are gradient ops themselves. Throws when
// an op updates in place a blob that lives elsewhere. Returns the number of copies inserted.
int InsertCopies(NetDef* net, const NetDef& init_net);

// Throws InvalidInput naming the first op (other than Copy and collectives) that reads a blob living on
// another device.
void CheckPlacement(const NetDef& net, const NetDef& init_net);

// Places the ops from index stage_starts[s] up to the next start (the last stage runs to the end of the net)
// on devices[s]; each parameter moves to the device of its first reader among them. Ops before
// stage_starts[0] keep their device.
void PlaceStages(ModelHelper& model, const std::vector<int>& stage_starts,
                 const std::vector<Device>& devices);

// Places by layer: each (layer, device) starts that device at the op that writes the layer's output
// (model.Scoped(layer)) and runs until the next listed layer. Throws on a layer the net does not have or a
// device not in `available`.
void PlaceLayers(ModelHelper& model, const std::vector<std::pair<std::string, Device>>& from_layer,
                 const std::vector<Device>& available);

// Splits ops [first_op, end) of model.net() into `stages` contiguous stages of about equal estimated cost
// (multiply-adds of Conv and FC, elements written by the rest) and returns each stage's first op. `shapes`
// gives the shapes of the blobs the ops read that are not parameters (the input batch). Throws when there
// are more stages than ops.
std::vector<int> BalancedStageStarts(const ModelHelper& model, int first_op, int stages,
                                     std::map<std::string, TensorShape> shapes);

}  // namespace lockstep
