"""Caffe2's ``models.resnet.create_resnet50`` over lockstep's ResNet-50 (the model zoo's, built in C++ in
Caffe2's layout, pooled globally at the end as Caffe2's is)."""
from caffe2.python import brew
from caffe2.python._unsupported import missing_names, refuse
from caffe2.python.modeling.initializers import Initializer
from lockstep import models

# brew.arg_scope arguments that ask for what lockstep does anyway (NCHW, cuDNN's and cuBLAS's own choices).
_WHAT_LOCKSTEP_DOES = {"order", "use_cudnn", "cudnn_exhaustive_search", "ws_nbytes_limit", "enable_tensor_core"}


def create_resnet50(model, data, num_input_channels, num_labels, label=None, is_test=False, no_loss=False,
                    no_bias=0, conv1_kernel=7, conv1_stride=2, final_avg_kernel=7):
    """The logits with ``no_loss``; else (softmax, loss) with ``label``, or the softmax without.

    lockstep's convolutions have no bias whatever ``no_bias`` says: each is followed by batch normalization,
    which subtracts any constant bias, so the network computes the same. final_avg_kernel is accepted as
    Caffe2 accepts it: its final pool is global."""
    if (conv1_kernel, conv1_stride) != (7, 2):
        refuse(f"create_resnet50: conv1_kernel={conv1_kernel}, conv1_stride={conv1_stride} is not supported; "
               "lockstep's ResNet-50 starts with a 7x7 convolution of stride 2")
    # Caffe2's trainer wraps this call in brew.arg_scope (its initializers, float16_compute): the zoo's layers
    # do not read it, so a scope that asks for anything but the defaults is refused, not silently dropped.
    scoped = sorted({name for _, arguments in getattr(brew._scopes, "stack", []) for name, value in arguments.items()
                     if name not in _WHAT_LOCKSTEP_DOES and value not in (None, False, Initializer)})
    if scoped:
        refuse(f"create_resnet50 inside brew.arg_scope({', '.join(scoped)}) is not supported; lockstep's ResNet-50 "
               "keeps float32 parameters with its own initializers (lockstep.mixed_precision computes in 16 bits)")
    logits = models.build("resnet50", model, data, num_channels=num_input_channels, num_labels=num_labels,
                          is_test=is_test)
    if no_loss:
        return logits
    if label is not None:
        return model.net.SoftmaxWithLoss([logits, label], ["softmax", "loss"])
    return model.net.Softmax(logits, "softmax")


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.models.resnet")
