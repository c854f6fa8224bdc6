"""Caffe2's ``timeout_guard``: a block that must finish in time, or the process ends with one line (a
stalled collective must not hang a job; lockstep's own collectives also time out)."""
import contextlib
import os
import sys
import threading

from caffe2.python._unsupported import missing_names


@contextlib.contextmanager
def CompleteInTimeOrDie(timeout_secs):
    """Ends the process with status 1 when the block has not finished after ``timeout_secs`` seconds."""
    def die():
        sys.stderr.write(f"timeout_guard: a block did not complete in {timeout_secs} s; exiting\n")
        sys.stderr.flush()
        os._exit(1)

    watchdog = threading.Timer(timeout_secs, die)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()


def EuthanizeIfNecessary(timeout_secs=120):
    """Ends the process if it is still alive ``timeout_secs`` seconds from now (after the main thread ends)."""
    def die():
        os._exit(1)

    watchdog = threading.Timer(timeout_secs, die)
    watchdog.daemon = True
    watchdog.start()


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.timeout_guard")
