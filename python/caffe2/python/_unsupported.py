"""How the caffe2 adapters refuse what lockstep does not do: the program stops with one line naming it."""


class Unsupported(SystemExit):
    """Raised for a Caffe2 feature lockstep does not have; uncaught, it prints its one line and exits 1."""

    def __init__(self, what):
        super().__init__(f"caffe2 on lockstep: {what}")


def refuse(what):
    raise Unsupported(what)


def missing_names(module_name):
    """A module ``__getattr__`` (PEP 562) for a Caffe2 adapter: a name of Caffe2's that the adapter lacks
    stops the program with one line naming it, instead of an AttributeError from deep in a program."""
    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        refuse(f"{module_name}.{name} is not supported")
    return __getattr__


class MissingModules:
    """A finder placed last on sys.meta_path: a ``caffe2.python`` module that lockstep has no adapter for
    (net_drawer, memonger, ...) stops the program with one line naming it."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith("caffe2."):
            refuse(f"{fullname} is not supported")
        return None
