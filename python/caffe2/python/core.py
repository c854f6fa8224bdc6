"""Caffe2's ``core`` over lockstep's: scopes, blob references, OperatorDefs and standalone nets.

``DeviceOption`` returns the DeviceOption message, as Caffe2's does; everything that takes a device takes it.
"""
from caffe2.proto import caffe2_pb2
from caffe2.python._unsupported import missing_names
from caffe2.python.workspace import GlobalInit  # noqa: F401 (Caffe2's core has it too)
from lockstep.core import (  # noqa: F401 (Caffe2's names, re-exported)
    BlobReference, CreateOperator, CurrentDeviceScope, CurrentNameScope, DataType, DeviceScope, MakeArgument,
    NameScope, Net, ScopedBlobReference, ScopedName)

CPU = caffe2_pb2.CPU
CUDA = caffe2_pb2.CUDA
GPU = CUDA


def DeviceOption(device_type, cuda_gpu_id=0, random_seed=None, node_name=None, device_id=None):
    """A DeviceOption message for ``device_type`` (caffe2_pb2.CPU or CUDA) and its index (``cuda_gpu_id``, or
    ``device_id`` as later Caffe2 names it)."""
    option = caffe2_pb2.DeviceOption(device_type=device_type,
                                     device_id=cuda_gpu_id if device_id is None else device_id)
    if random_seed is not None:
        option.random_seed = random_seed
    if node_name is not None:
        option.node_name = node_name
    return option


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.core")
