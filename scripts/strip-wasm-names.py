#!/usr/bin/env python3
"""Removes the custom `name` section from wasm modules, in place. The name
section only carries function names for debuggers and stack traces."""
import sys

from wasm_names import custom_name, sections


def strip(path):
    data = open(path, "rb").read()
    out = bytearray(data[:8])
    for section_id, start, body, end in sections(data):
        if section_id != 0 or custom_name(data, body)[0] != b"name":
            out += data[start:end]
    open(path, "wb").write(bytes(out))


for module in sys.argv[1:]:
    strip(module)
