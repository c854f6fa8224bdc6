"""Caffe2's ``dyndep``: lockstep's operators are built into the library, so there is no library to load."""


def InitOpsLibrary(name):
    """Loads nothing: every lockstep operator is registered when the library loads."""


def GetOpsLibraries():
    return []
