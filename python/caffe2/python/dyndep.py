"""Caffe2's ``dyndep``: lockstep's operators are built into the library, so there is no library to load."""
from caffe2.python._unsupported import missing_names


def InitOpsLibrary(name):
    """Loads nothing: every lockstep operator is registered when the library loads."""


def GetOpsLibraries():
    return []


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.dyndep")
