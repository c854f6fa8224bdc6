"""Machines for the partition fault: network namespaces <prefix>_<k> with veth0 at 198.18.0.(k+1)/24, whose
other ends b<k> sit on a bridge in namespace <prefix>_br (as bench/multihost/run.sh builds them). Cutting
machine k takes b<k> down: its cable is pulled, its own interface keeps its address."""
import subprocess


def ip(*args):
    subprocess.run(["ip"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Namespaces:
    def __init__(self, prefix, count):
        self.bridge, self.names = f"{prefix}_br", [f"{prefix}_{k}" for k in range(count)]
        self.created = []
        try:
            self._build()
        except BaseException:
            self.delete()
            raise

    def _build(self):
        ip("netns", "add", self.bridge)
        self.created.append(self.bridge)
        ip("-n", self.bridge, "link", "set", "lo", "up")
        ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
        ip("-n", self.bridge, "link", "set", "br0", "up")
        for k, name in enumerate(self.names):
            ip("netns", "add", name)
            self.created.append(name)
            ip("-n", name, "link", "set", "lo", "up")
            ip("-n", name, "link", "add", "veth0", "type", "veth", "peer", "name", f"b{k}", "netns", self.bridge)
            ip("-n", self.bridge, "link", "set", f"b{k}", "master", "br0")
            ip("-n", self.bridge, "link", "set", f"b{k}", "up")
            ip("-n", name, "addr", "add", f"198.18.0.{k + 1}/24", "dev", "veth0")
            ip("-n", name, "link", "set", "veth0", "up")

    def cut(self, k):
        ip("-n", self.bridge, "link", "set", f"b{k}", "down")

    def restore(self, k):
        ip("-n", self.bridge, "link", "set", f"b{k}", "up")

    def delete(self):
        for name in reversed(self.created):
            subprocess.run(["ip", "netns", "delete", name], check=False, stderr=subprocess.DEVNULL)
        self.created = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.delete()
