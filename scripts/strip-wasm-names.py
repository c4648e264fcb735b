#!/usr/bin/env python3
"""Removes the custom `name` section from wasm modules, in place. The name
section only carries function names for debuggers and stack traces."""
import sys


def leb(data, p):
    result = shift = 0
    while True:
        byte = data[p]
        p += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, p


def strip(path):
    data = open(path, "rb").read()
    assert data[:4] == b"\0asm", f"{path} is not a wasm module"
    out = bytearray(data[:8])
    p = 8
    while p < len(data):
        start = p
        section_id = data[p]
        size, body = leb(data, p + 1)
        end = body + size
        keep = True
        if section_id == 0:
            name_len, name_at = leb(data, body)
            keep = data[name_at:name_at + name_len] != b"name"
        if keep:
            out += data[start:end]
        p = end
    open(path, "wb").write(bytes(out))


for module in sys.argv[1:]:
    strip(module)
