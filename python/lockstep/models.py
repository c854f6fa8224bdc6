"""The model zoo of the command line, for Python builder functions: each adds the named network's forward
pass on ``data`` under the current scopes and returns its logits blob. Names: lenet, resnet18, resnet34,
resnet50, resnet101, wrn-<depth>-<width>."""
from lockstep import core
from lockstep._core import C


def build(name, model, data, num_channels=3, image_size=224, num_labels=1000, is_test=False):
    model._zoo_model = name  # checkpoint.save records it, and lockstep eval builds it again from the name
    with model.scopes():
        return core.BlobReference(C.build_model(name, model._cpp, model._scope_name(data), int(num_channels),
                                                int(image_size), int(num_labels), bool(is_test)))


def create_resnet50(model, data, num_input_channels, num_labels, image_size=224, is_test=False, **kwargs):
    """ResNet-50 as Caffe2's ``resnet.create_resnet50`` (no_bias and label are accepted and implied)."""
    kwargs.pop("no_bias", None)
    kwargs.pop("label", None)
    if kwargs:
        raise TypeError(f"create_resnet50: unexpected arguments {', '.join(sorted(kwargs))}")
    return build("resnet50", model, data, num_input_channels, image_size, num_labels, is_test)


def known():
    return C.known_models()
