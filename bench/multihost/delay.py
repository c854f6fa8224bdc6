#!/usr/bin/python3
"""Adds a fixed one-way latency to the packets that an iptables NFQUEUE rule hands to queue --queue, in the
network namespace it runs in: each packet is accepted --delay_ms after it arrived, in arrival order. For
kernels without netem (sch_netem), e.g. `iptables-legacy -A INPUT -i veth0 -j NFQUEUE --queue-num 0` in a
namespace, then `delay.py --delay_ms 1` there. Stdlib only: nfnetlink_queue over a raw netlink socket, packet
metadata only (no payload copied), verdicts in batches. Runs until SIGTERM or SIGINT.
"""
import argparse
import collections
import ctypes
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1, 4
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1
PR_SET_TIMERSLACK = 29


def attribute(kind, payload):
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def message(kind, queue, attributes, flags=NLM_F_REQUEST):
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attributes)
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, 0, 0) + body


def configure(sock, queue):
    """Binds the queue: metadata only, 64k packets at most, GSO packets whole, accept when full."""
    for attrs in ([attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0))],
                  [attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
                   attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 65536)),
                   attribute(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN)),
                   attribute(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN))]):
        sock.send(message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK))
        data = sock.recv(65536)
        _, kind = struct.unpack_from("=IH", data)
        error = struct.unpack_from("=i", data, 16)[0] if kind == NLMSG_ERROR else 0
        if error:
            hint = "needs root" if error == -1 else "is another program bound to it?"
            sys.exit(f"delay.py: configuring queue {queue} failed: error {-error} ({hint})")


def packet_ids(data):
    """The packet ids of the NFQNL_MSG_PACKET messages in one netlink read."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        if length < 16:
            return
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + 20  # after nlmsghdr and nfgenmsg
            while at + 4 <= offset + length:
                size, attr = struct.unpack_from("=HH", data, at)
                if size < 4:
                    break
                if attr & 0x7FFF == NFQA_PACKET_HDR:
                    yield struct.unpack_from("!I", data, at + 4)[0]
                at += (size + 3) & ~3
        offset += (length + 3) & ~3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay_ms", type=float, required=True, help="one-way latency to add, ms")
    parser.add_argument("--queue", type=int, default=0, help="NFQUEUE number (0)")
    args = parser.parse_args()
    if args.delay_ms < 0:
        parser.error(f"--delay_ms must be >= 0, got {args.delay_ms}")
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    configure(sock, args.queue)
    print(f"delay.py: queue {args.queue} bound, {args.delay_ms} ms", flush=True)  # the caller waits for it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # select() sleeps up to the timer slack (50 us by default) past its timeout: 1 ns keeps releases on time
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)
    delay = args.delay_ms / 1000
    held = collections.deque()  # (release time, packet id), in arrival order
    buffer = bytearray(1 << 20)  # reused: a fresh 1 MiB object per read costs more than the packet
    view = memoryview(buffer)
    while True:
        # select() waits with microsecond resolution (poll and epoll: milliseconds)
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        if select.select([sock], [], [], timeout)[0]:
            now = time.monotonic()
            for packet in packet_ids(view[:sock.recv_into(buffer)]):
                held.append((now + delay, packet))
        now = time.monotonic()
        last = None
        while held and held[0][0] <= now:
            last = held.popleft()[1]
        if last is not None:  # accepts every queued packet up to this id
            sock.send(message(NFQNL_MSG_VERDICT_BATCH, args.queue,
                              [attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, last))]))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
