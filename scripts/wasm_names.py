"""Reading a wasm module's sections: the LEB128 integers they are framed
with and the function names of the `name` section (wasm-bindgen writes it;
scripts/build-wasm.sh keeps a copy with it before stripping)."""


def leb(data, p):
    """The unsigned LEB128 integer at `p`, and the position after it."""
    result = shift = 0
    while True:
        byte = data[p]
        p += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, p


def sections(data):
    """(id, start, body start, end) of each section."""
    assert data[:4] == b"\0asm", "not a wasm module"
    p = 8
    while p < len(data):
        size, body = leb(data, p + 1)
        yield data[p], p, body, body + size
        p = body + size


def custom_name(data, body):
    """A custom section's name, and where its payload starts."""
    name_len, name_at = leb(data, body)
    return data[name_at:name_at + name_len], name_at + name_len


def function_names(data):
    """{function index: name} from the `name` section, empty without one."""
    names = {}
    for section_id, _, body, end in sections(data):
        if section_id != 0 or custom_name(data, body)[0] != b"name":
            continue
        p = custom_name(data, body)[1]
        while p < end:
            sub, size_at = data[p], p + 1
            size, sub_body = leb(data, size_at)
            if sub == 1:
                count, q = leb(data, sub_body)
                for _ in range(count):
                    index, q = leb(data, q)
                    length, q = leb(data, q)
                    names[index] = data[q:q + length].decode()
                    q += length
            p = sub_body + size
    return names
