"""Caffe2's ``data_parallel_model_utils``: the activations of the first replica; moving them to other
devices (model parallelism) is lockstep's ``devices_per_replica`` instead."""
from caffe2.python._unsupported import missing_names, refuse
from lockstep import data_parallel_model as _dpm


def GetActivationBlobs(model):
    """The blobs the first replica's forward pass computes (not its parameters, gradients or inputs), in the
    order the net computes them."""
    scope = _dpm.GetDeviceScopes(model)[0]
    params = set(model.GetAllParams(scope))
    grads = set(model.param_to_grad.values())
    activations = []
    for op in model.net.Proto().op:
        if op.is_gradient_op:
            break
        for blob in op.output:
            if blob.startswith(scope) and blob not in params and blob not in grads and blob not in activations:
                activations.append(blob)
    return activations


def ShiftActivationDevices(model, activations, shifts):
    refuse("data_parallel_model_utils.ShiftActivationDevices is not supported; lockstep places a replica "
           "on several devices through Parallelize(devices_per_replica=...)")


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.data_parallel_model_utils")
