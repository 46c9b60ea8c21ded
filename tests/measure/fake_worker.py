#!/usr/bin/env python3
"""A tensortune-worker impostor for the handshake tests.

Answers every framed request (8-byte little-endian length, then JSON) with a
measure.WorkerInfo of the protocol version and build identity given in the
environment (TT_FAKE_PROTOCOL, default 6; TT_FAKE_BUILD_ID, default
"some other build"), as a stale worker or one built from other sources would;
with TT_FAKE_GARBAGE=1, with a frame that is not a saved graph at all. Ignores its arguments (--serve --parent-pid P ...).
"""
import json
import os
import struct
import sys


def main():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return 0
        (size,) = struct.unpack("<Q", head)
        stdin.read(size)
        info = {"build_id": os.environ.get("TT_FAKE_BUILD_ID", "some other build"),
                "pid": os.getpid(),
                "protocol_version": int(os.environ.get("TT_FAKE_PROTOCOL", "7")),
                "type": "measure.WorkerInfo"}
        reply = json.dumps({"format": "tensortune.graph", "nodes": [info], "root": 0,
                            "version": 1}).encode()
        if os.environ.get("TT_FAKE_GARBAGE") == "1":
            reply = b'{"hello": "from somebody else"}'
        stdout.write(struct.pack("<Q", len(reply)) + reply)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
