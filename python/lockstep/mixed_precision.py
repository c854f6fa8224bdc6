"""Mixed precision, as the command line's ``--dtype``: the forward pass computes in 16 bits while the
parameters, their gradients and the update stay float32 (build_sgd, or build_multi_precision_sgd, as usual)."""
from lockstep import core
from lockstep._core import C


def compute_in(model, dtype, blob_in, build):
    """Calls ``build()``, which adds forward ops that read ``blob_in`` and returns their output blob, and makes
    those ops compute in ``dtype``: "bfloat16" (GPUs, and CPUs with AVX512_BF16 or AMX) or "float16" (GPUs).

    Casts of ``blob_in`` and of every parameter the ops read go before them, so the parameters' gradients
    come back float32; batch normalization keeps its statistics, scale and bias in float32. Returns the
    output cast back to float32, for the loss. Use it in the forward_pass_builder_fun of Parallelize::

        pred = mixed_precision.compute_in(model, "bfloat16", "data",
                                          lambda: models.build("resnet50", model, "data", ...))
    """
    with model.scopes():
        first_op = model._cpp.op_count
        blob_out = build()
        return core.BlobReference(C.compute_in_low_precision(
            model._cpp, first_op, model._scope_name(blob_in), model._scope_name(blob_out), str(dtype)))
