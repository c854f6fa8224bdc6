"""A redis-server of the chaos matrix's own on a free loopback port, without persistence (a restart comes back
empty, as a server that lost its state), killed and restarted on the same port by the redis fault."""
import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, directory):
        self.directory, self.port, self.process = directory, free_port(), None
        self.start()

    @property
    def address(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        log = open(os.path.join(self.directory, "redis.log"), "a")
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.directory, "--daemonize", "no", "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}; see {log.name}")

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
