"""lockstep: synchronous data-parallel training in native C++, driven from Python.

The modules follow Caffe2's: ``model_helper.ModelHelper`` holds a model's nets, ``brew`` adds layers,
``data_parallel_model.Parallelize`` replicates a model over devices and machines, ``optimizer`` adds the
update and ``workspace`` feeds, runs and fetches. Python only builds graphs; every step runs in the C++ core.
Importing the package loads nothing compiled; the modules that need the core load it.
"""

from lockstep._version import __version__  # noqa: F401 (the project's version)


def export_onnx(path, checkpoint=None, **kwargs):
    """ONNX export of a checkpoint or a net (lockstep.onnx_export.export_onnx, which documents it)."""
    from lockstep.onnx_export import export_onnx as export

    return export(path, checkpoint, **kwargs)
