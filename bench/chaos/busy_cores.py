"""Busy loops that keep the machine's cores occupied while a trial runs (the matrix's "busy" load)."""
import subprocess


class BusyCores:
    def __init__(self, count):
        self.processes = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(count)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()
