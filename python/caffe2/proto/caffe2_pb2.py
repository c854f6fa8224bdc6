"""Caffe2's caffe2_pb2: lockstep's messages (NetDef, OperatorDef, Argument, DeviceOption, TensorProto,
TensorProtos), which keep caffe2.proto's field numbers, and the device type constants."""
from lockstep.lockstep_pb2 import *  # noqa: F401,F403 (the messages, re-exported)
from lockstep.lockstep_pb2 import DeviceOption, NetDef, OperatorDef  # noqa: F401 (named for readers)

# Caffe2's DeviceType values; lockstep runs CPU and CUDA.
CPU = 0
CUDA = 1
