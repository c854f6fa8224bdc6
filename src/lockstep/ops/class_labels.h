// Checks shared by the ops that read class labels next to per-class scores (SoftmaxWithLoss, Accuracy).
#pragma once

#include "lockstep/core/net_def.h"

namespace lockstep {

// scores is (N, D) float; labels must be (N) or (N, 1) int32. `what` names the scores in messages.
inline void CheckClassLabelShapes(const OperatorDef& def, const char* what, const Shape& scores,
                                  const Shape& labels, DataType label_type) {
  if (scores.size() != 2)
    FailOperator(def, fmt::format("{} must be (N, D), got {}", what, ShapeToString(scores)));
  bool labels_ok =
      (labels == Shape{scores[0]} || labels == Shape{scores[0], 1}) && label_type == DataType::kInt32;
  if (!labels_ok)
    FailOperator(def, fmt::format("labels must be int32 of shape ({}) or ({}, 1) to match {} {}, got {} {}",
                                  scores[0], scores[0], what, ShapeToString(scores), DataTypeName(label_type),
                                  ShapeToString(labels)));
}

// SoftmaxWithLoss's inputs: class-label shapes, and a batch that is not empty (its mean loss is undefined).
inline void CheckSoftmaxWithLossShapes(const OperatorDef& def, const Shape& logits, const Shape& labels,
                                       DataType label_type) {
  CheckClassLabelShapes(def, "logits", logits, labels, label_type);
  if (logits[0] == 0) FailOperator(def, "the batch is empty; the mean loss is undefined");
}

// SoftmaxWithLossGradient's inputs: SoftmaxWithLoss's, the softmax it wrote and a scalar dloss.
inline void CheckSoftmaxWithLossGradientInputs(const OperatorDef& def, const Tensor& logits,
                                               const Tensor& labels, const Tensor& softmax,
                                               const Tensor& dloss) {
  CheckSoftmaxWithLossShapes(def, logits.shape(), labels.shape(), labels.dtype());
  if (softmax.shape() != logits.shape() || dloss.numel() != 1)
    FailOperator(def, fmt::format("softmax must be {} and dloss a scalar, got {} and {}",
                                  ShapeToString(logits.shape()), ShapeToString(softmax.shape()),
                                  ShapeToString(dloss.shape())));
}

// The label of `row`, which must index one of the `classes` columns.
inline int32_t CheckedClassLabel(const OperatorDef& def, const int32_t* labels, int64_t row,
                                 int64_t classes) {
  int32_t label = labels[row];
  if (label < 0 || label >= classes)
    FailOperator(def, fmt::format("label {} of row {} is outside [0, {}); labels must index the {} classes",
                                  label, row, classes, classes));
  return label;
}

}  // namespace lockstep
