// Mixed precision, as Caffe2's trainer with --dtype float16: the network computes in 16 bits while the
// optimizer keeps float32 master parameters. Casts at the edges of the forward pass do it all: their
// gradients bring float32 gradients back to the master parameters, and a static loss scale keeps float16
// gradients from flushing to zero.
#pragma once

#include <string>

#include "lockstep/model/model_helper.h"

namespace lockstep {

// Makes the forward ops [first_op, end) of model.net() compute in `dtype` (float16 or bfloat16): a Cast of
// `input` and of every parameter they read goes before them (batch normalization keeps its parameters and
// statistics in float32, as cuDNN wants; a CPU convolution converts its float32 filter itself, in the
// reorder into its layout), the ops read the casts instead, and a Cast of `output` back to float32 follows
// them. Returns the float32 output ("<output>_float").
std::string ComputeInLowPrecision(ModelHelper& model, int first_op, const std::string& input,
                                  const std::string& output, DataType dtype);

// Divides the gradient of every trainable parameter of the current name scope by `loss_scale`, in place,
// on the parameter's device: the losses were multiplied by it. Call it in the parameter update builder,
// before the optimizer.
void UnscaleGradients(ModelHelper& model, float loss_scale);

}  // namespace lockstep
