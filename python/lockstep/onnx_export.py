"""ONNX export, as ``lockstep export`` does it: the inference graph of a net of lockstep's operators with its
parameters, built with ONNX's own library and validated by its checker before the file is written
(atomically). SpatialBN exports as BatchNormalization on its running statistics, Dropout is left out, and an
operator without an ONNX mapping stops the export with one line naming it."""
from lockstep import workspace
from lockstep._core import C, InvalidInput

# The geometry options of a checkpoint's model, as `lockstep export` names them.
_CHECKPOINT_OPTIONS = ("model", "image_size", "num_channels", "num_labels", "test_data", "scale", "color_order")


def export_onnx(path, checkpoint=None, *, net=None, input="data", input_shape=None, output=None, softmax=False,
                input_name="data", output_name=None, metadata=None, **options):
    """Writes an ONNX model (opset 13) to ``path`` and returns a summary: node_types, initializers,
    parameter_values, file_bytes, checker ("passed") and opset.

    From a training checkpoint, as ``lockstep export --load_model_path CHECKPOINT``::

        export_onnx("lenet.onnx", "ckpt/lenet_1.safetensors", test_data="fashion-mnist")

    ``options`` are the command's: ``model`` (default: the checkpoint's), ``image_size``, ``num_channels``,
    ``num_labels``, and ``test_data``, whose reader's normalization the model's metadata documents
    (``fashion-mnist`` also sets its geometry).

    From a net built in Python, its parameters taken from the current workspace::

        export_onnx("model.onnx", net=model.net, input="data", input_shape=(1, 3, 32, 32), output="fc")

    ``input`` is the float32 (N, C, H, W) blob the net reads, exported as ``input_name``, ``output`` the blob
    it answers with, exported as ``output_name`` ("logits", or "probabilities" with ``softmax``, which
    appends a Softmax over axis 1). ``metadata`` (a dict of strings) is added to the model's metadata_props.
    """
    default_output = "probabilities" if softmax else "logits"
    if checkpoint is not None:
        if net is not None:
            raise InvalidInput("export_onnx: give a checkpoint or a net, not both")
        unknown = sorted(set(options) - set(_CHECKPOINT_OPTIONS))
        if unknown:
            raise InvalidInput(f"export_onnx: unknown option {unknown[0]}; known: {', '.join(_CHECKPOINT_OPTIONS)}")
        config = C.TrainerConfig()
        config.set("load_model_path", str(checkpoint))
        for name, value in options.items():
            config.set(name, str(value))
        return C.export_onnx_checkpoint(config, set(options), str(path), bool(softmax))
    if net is None:
        raise InvalidInput("export_onnx: give a checkpoint, or a net with its input_shape and output")
    if options:
        raise InvalidInput(f"export_onnx: option {sorted(options)[0]} is for checkpoints; a net takes input, "
                           "input_shape and output")
    if input_shape is None or output is None:
        raise InvalidInput("export_onnx: a net needs input_shape (N, C, H, W) and output (the blob to export)")
    return C.export_onnx_net(workspace._net_bytes(net), workspace.CurrentWorkspace(), str(input),
                             [int(d) for d in input_shape], str(output), str(path), bool(softmax), str(input_name),
                             str(output_name or default_output), {str(k): str(v) for k, v in (metadata or {}).items()})
