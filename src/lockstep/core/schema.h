// Operator schemas: declared once per type next to the operator, checked once when an operator is created.
// A schema states arity, which outputs may overwrite which inputs, and how output shapes follow from inputs.
#pragma once

#include <climits>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct TensorShape {
  Shape dims;
  DataType dtype = DataType::kFloat;
};

using ShapeInference =
    std::function<std::vector<TensorShape>(const OperatorDef& def, const std::vector<TensorShape>& inputs)>;

class OpSchema {
 public:
  explicit OpSchema(std::string type) : type_(std::move(type)) {}

  OpSchema& NumInputs(int n) { return NumInputs(n, n); }
  OpSchema& NumInputs(int min, int max);
  OpSchema& NumOutputs(int n) { return NumOutputs(n, n); }
  OpSchema& NumOutputs(int min, int max);
  // Output `output` may be the same blob as input `input` (computed in place).
  OpSchema& AllowInplace(std::set<std::pair<int, int>> pairs);
  // Output i may be the same blob as input i, for every i (ops with any number of inputs).
  OpSchema& AllowInplaceSameIndex() {
    inplace_same_index_ = true;
    return *this;
  }
  // Output `output` must be the same blob as input `input` (e.g. parameter updates).
  OpSchema& EnforceInplace(std::set<std::pair<int, int>> pairs);
  OpSchema& ShapeFunction(ShapeInference function);
  // Output i has the shape and dtype of input i.
  OpSchema& IdentityShape();
  // The op reads and writes the blobs of several devices (a gradient allreduce, a broadcast): executors run
  // it on a communication thread of its own so that it overlaps with the devices' compute.
  OpSchema& Collective() {
    collective_ = true;
    return *this;
  }
  bool collective() const { return collective_; }

  // Throws InvalidInput naming the operator when the def breaks this schema.
  void Verify(const OperatorDef& def) const;
  bool HasShapeFunction() const { return static_cast<bool>(infer_); }
  std::vector<TensorShape> InferShapes(const OperatorDef& def, const std::vector<TensorShape>& inputs) const;
  const std::string& type() const { return type_; }

 private:
  std::string type_;
  int min_inputs_ = 0, max_inputs_ = INT_MAX, min_outputs_ = 0, max_outputs_ = INT_MAX;
  std::set<std::pair<int, int>> allow_inplace_, enforce_inplace_;
  ShapeInference infer_;
  bool collective_ = false;
  bool inplace_same_index_ = false;
};

// True when the op's type is registered with OpSchema::Collective().
bool IsCollective(const OperatorDef& op);

class SchemaRegistry {
 public:
  static OpSchema& Register(const std::string& type);  // refuses duplicates
  static const OpSchema* Find(const std::string& type);
};

// Runs the shape functions of a whole net from the shapes of its external inputs; every blob the net writes
// gets an entry. Throws if an op has no shape function or its inputs are unknown.
std::map<std::string, TensorShape> InferNetShapes(const NetDef& net,
                                                  std::map<std::string, TensorShape> shapes);

}  // namespace lockstep

#define LOCKSTEP_SCHEMA_CONCAT_(a, b) a##b
#define LOCKSTEP_SCHEMA_NAME_(a, b) LOCKSTEP_SCHEMA_CONCAT_(a, b)
#define LOCKSTEP_OPERATOR_SCHEMA(type)                                                                 \
  static ::lockstep::OpSchema& LOCKSTEP_SCHEMA_NAME_(schema_##type##_, __COUNTER__) [[maybe_unused]] = \
      ::lockstep::SchemaRegistry::Register(#type)
