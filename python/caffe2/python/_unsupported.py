"""How the caffe2 adapters refuse what lockstep does not do: the program stops with one line naming it."""


class Unsupported(SystemExit):
    """Raised for a Caffe2 feature lockstep does not have; uncaught, it prints its one line and exits 1."""

    def __init__(self, what):
        super().__init__(f"caffe2 on lockstep: {what}")


def refuse(what):
    raise Unsupported(what)
