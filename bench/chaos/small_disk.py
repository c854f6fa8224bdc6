"""A small tmpfs for the disk-full fault: the job's store and checkpoints live on it, and a filler file takes
every free byte while the job trains."""
import errno
import os
import subprocess


class SmallDisk:
    def __init__(self, path, megabytes):
        self.path, self.filler = path, os.path.join(path, "filler")
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0755", "tmpfs", path], check=True)

    def fill(self):
        """Writes the filler until the disk is full (in 64 KiB, then 4 KiB pieces); returns the bytes written."""
        written = 0
        with open(self.filler, "ab", buffering=0) as f:
            for piece in (65536, 4096):
                try:
                    while True:
                        written += f.write(b"\0" * piece)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
        return written

    def free(self):
        if os.path.exists(self.filler):
            os.remove(self.filler)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        subprocess.run(["umount", self.path], check=False)
        if os.path.ismount(self.path):
            subprocess.run(["umount", "-l", self.path], check=False)
