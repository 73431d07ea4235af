#!/usr/bin/env python3
"""Writes tests/fuzz/corpus_proto/: the socket attacks of issue 25 as inputs
of tests/fuzz/fuzz_client_proto.c (byte 0: fds that ride along, byte 1:
where, then the stream; see there). Run from the repository root."""
import os
import struct

HDR = struct.Struct("<IHHQ")  # vy_msg_header: len, opcode, nfds, unique
HELLO, MAP, SYNC, UNMAP, COPY = 16, 17, 18, 19, 20


def msg(op, body=b"", nfds=0, length=None):
    return HDR.pack(HDR.size + len(body) if length is None else length, op, nfds, 1) + body


hello = msg(HELLO, struct.pack("<IIIiQ", 2, 2, 0, 0, 0))
many = 200 + 16  # byte 0 past 200: (216 - 200) * 8 + 4 = 132 fds
cases = {
    "hello": (0, 0, hello),
    "hello_twice": (0, 0, hello + hello),
    "hello_map": (1, 0, hello + msg(MAP, struct.pack("<II", 0, 0), 1)),
    "hello_copy": (2, 0, hello + msg(COPY, struct.pack("<IIQ", 0, 1, 4096), 2)),
    "hello_sync_unmap": (0, 0, hello + msg(SYNC, struct.pack("<Q", 1)) + msg(UNMAP, struct.pack("<Q", 1))),
    "map_before_hello": (1, 0, msg(MAP, struct.pack("<II", 0, 0), 1)),
    "truncated_header": (0, 0, hello[:9]),
    "len_under_header": (0, 0, msg(HELLO, length=8)),
    "oversized_len": (0, 0, msg(HELLO, length=60 << 20)),
    "over_4096": (0, 0, msg(HELLO, b"x" * 4096)),
    "partial_body_with_fds": (3, 0, msg(MAP, b"\0" * 100, 3, length=4000)),
    "too_many_fds": (many, 0, msg(MAP, struct.pack("<II", 0, 0), 128)),
    "fds_not_in_header": (3, 0, msg(MAP, struct.pack("<II", 0, 0), 0)),
    "extra_fds_sync": (3, 0, hello + msg(SYNC, struct.pack("<Q", 1), 3)),
    "fds_mid_stream": (2, 3, hello + msg(COPY, struct.pack("<IIQ", 0, 1, 4096), 2)),
    "unknown_opcode": (0, 0, hello + msg(999, b"junk")),
    "garbage": (0, 0, b"\xff" * 64),
}
out = "tests/fuzz/corpus_proto"
os.makedirs(out, exist_ok=True)
for name, (nfds, at, stream) in cases.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([nfds, at]) + stream)
