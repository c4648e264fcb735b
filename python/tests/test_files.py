"""Files larger than one batch: split as the CLI's `load` splits them, every
batch validated, errors reported with file line numbers."""

import json

import pytest

import omnigraph_validate as og
from conftest import ROOT


def person(name, **data):
    return json.dumps({"type": "Person", "data": {"name": name, **data}})


def knows(a, b, **data):
    return json.dumps({"edge": "Knows", "from": a, "to": b, **({"data": data} if data else {})})


def write(tmp_path, lines, name="batch.ndjson", eol="\n"):
    path = tmp_path / name
    path.write_bytes("".join(line + eol for line in lines).encode("utf-8"))
    return path


# An edge before the nodes it joins, a blank line, a bad node (line 8) and a
# bad edge (line 13).
LINES = [
    knows("p1", "p2", since="2020-01-01"),                 # 1
    person("p1", age=30),                                  # 2
    person("p2", age=31),                                  # 3
    "",                                                    # 4
    person("p3"),                                          # 5
    knows("p2", "p3"),                                     # 6
    person("p4", age=40),                                  # 7
    person("p5", nmae="x"),                                # 8: unknown_property
    person("p6"),                                          # 9
    knows("p3", "p4"),                                     # 10
    person("p7"),                                          # 11
    person("p8"),                                          # 12
    knows("p5", "p6", since="2023-02-29"),                 # 13: invalid_date
    person("p9"),                                          # 14
]


def offsets(lines):
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line.encode("utf-8")) + 1
    return out


def batch_line(batch, i):
    """The text of a batch's line ``i`` (0-based), read from LINES."""
    return LINES[batch.lines[i][0] - 1]


def test_a_file_over_one_batch_is_split_nodes_first_with_file_lines(people, tmp_path):
    path = write(tmp_path, LINES)
    result = people.validate_file(path, batch_rows=3)
    assert len(result.batches) > 1
    phases = [b.phase for b in result.batches]
    assert phases == sorted(phases, key=["nodes", "edges"].index), "nodes first, then edges"
    for batch in result.batches:
        tables = [og.probe_line(bytes(batch_line(batch, i), "utf-8")) for i in range(len(batch.lines))]
        assert batch.lines and max(tables.count(t) for t in tables if t != (None, None)) <= 3
        assert json.loads(batch.report_json) == batch.report
    # Every file line is in exactly one batch; each pass keeps file order.
    seen = [line for b in result.batches for line, _ in b.lines]
    assert sorted(seen) == list(range(1, len(LINES) + 1))
    edge_lines = [i + 1 for i, line in enumerate(LINES) if line.startswith('{"edge"')]
    assert [l for b in result.batches if b.phase == "edges" for l, _ in b.lines] == edge_lines
    # Errors with their file lines and offsets; the validator's own fields stay batch-relative.
    assert not result.ok
    assert [(e["file_line"], e["code"]) for e in result.errors] == [(8, "unknown_property"), (13, "invalid_date")]
    starts = offsets(LINES)
    for e in result.errors:
        assert e["file_offset"] == starts[e["file_line"] - 1]
        batch = result.batches[e["batch"]]
        assert batch.file_line(e["line"]) == e["file_line"]
        assert e["message"].startswith(f"line {e['line']}: ")
    assert result.error_count == 2
    assert result.error_lines("people.ndjson") == [
        f"people.ndjson:{e['file_line']}: {e['code']}: {e['message']}" for e in result.errors
    ]
    # Edges whose nodes went in other batches are external references, with file lines.
    assert {(r["file_line"], r["id"]) for r in result.external_refs} >= {(1, "p1"), (1, "p2")}


def test_split_errors_are_the_whole_files_errors_in_file_lines(people, tmp_path):
    path = write(tmp_path, LINES)
    whole = people.validate(path.read_bytes())
    split = people.validate_file(path, batch_rows=2)
    assert {(e["line"], e["offset"], e["code"], e["path"]) for e in whole["errors"]} == {
        (e["file_line"], e["file_offset"], e["code"], e["path"]) for e in split.errors
    }
    assert split.records == whole["stats"]["records"]


def test_the_byte_bound_splits_too(people, tmp_path):
    path = write(tmp_path, LINES)
    result = people.validate_file(path, batch_bytes=120)
    assert len(result.batches) > 2
    assert all(len(bytes(b.report_json, "utf-8")) > 0 and b.report["stats"]["bytes"] <= 120 for b in result.batches)
    assert [(e["file_line"], e["code"]) for e in result.errors] == [(8, "unknown_property"), (13, "invalid_date")]


def test_a_file_that_fits_is_one_batch_as_it_is(people, tmp_path):
    path = write(tmp_path, LINES)
    result = people.validate_file(path)
    assert [b.phase for b in result.batches] == ["all"]
    assert result.batches[0].report_json == people.validate_json(path.read_bytes())
    assert [(e["file_line"], e["line"]) for e in result.errors] == [(8, 8), (13, 13)]
    sample = people.validate_file(ROOT / "samples" / "people.ndjson")
    assert sample.ok and sample.records == 5 and sample.errors == []


def test_crlf_lines_and_a_last_line_without_lf(people, tmp_path):
    path = write(tmp_path, LINES, eol="\r\n")
    path.write_bytes(path.read_bytes() + person("p10", nmae="y").encode())
    result = people.validate_file(path, batch_rows=4)
    # Sorted by file line, though line 15 (a node) was in an earlier batch than line 13 (an edge).
    assert [(e["file_line"], e["code"]) for e in result.errors] == [
        (8, "unknown_property"), (13, "invalid_date"), (15, "unknown_property")
    ]


def test_a_batch_refused_for_a_bound_is_halved_until_it_fits(people, tmp_path):
    # 28 Arrow bytes per Person row: at most 2 rows per batch fit 60 bytes.
    lines = [person(f"p{i}") for i in range(7)]
    path = write(tmp_path, lines)
    options = {"limits": {"max_table_bytes": 60}}
    assert people.validate(path.read_bytes(), options)["errors"][0]["code"] == "table_bytes_limit"
    result = people.validate_file(path, options)
    assert result.ok, result.error_lines()
    assert all(len(b.lines) <= 2 for b in result.batches)
    assert [l for b in result.batches for l, _ in b.lines] == list(range(1, 8))
    # Without halving, the bound is reported.
    unsplit = people.validate_file(path, options, split_on_bounds=False)
    assert [b.phase for b in unsplit.batches] == ["all"] and unsplit.errors[0]["code"] == "table_bytes_limit"


def test_batch_bounds_are_clamped_to_the_options_bounds(people, tmp_path):
    path = write(tmp_path, [person(f"p{i}") for i in range(5)])
    result = people.validate_file(path, {"limits": {"max_table_rows": 2}})
    assert result.ok and [len(b.lines) for b in result.batches] == [2, 2, 1]


def test_a_line_longer_than_a_batch_is_refused(people, tmp_path):
    path = write(tmp_path, [person("a"), person("b" * 500), person("c")])
    with pytest.raises(og.BatchSplitError, match="line 2 .* longer than one batch"):
        people.validate_file(path, batch_bytes=200)


def test_bad_options_are_refused_before_the_file_is_read(people, tmp_path):
    with pytest.raises(og.OptionsError):
        people.validate_file(tmp_path / "does-not-exist.ndjson", {"mode": "sideways"})


def test_an_empty_file_is_one_empty_batch(people, tmp_path):
    path = tmp_path / "empty.ndjson"
    path.write_bytes(b"")
    result = people.validate_file(path)
    assert result.ok and len(result.batches) == 1 and result.records == 0


def test_a_line_is_read_as_the_cli_reads_it():
    cases = json.loads((ROOT / "tests" / "split" / "probe-lines.json").read_text("utf-8"))["cases"]
    for case in cases:
        node, edge = og.probe_line(case["line"].encode("utf-8"))
        assert (edge is not None, edge if edge is not None else node) == (case["edge"], case["table"]), case["line"]
        assert og.is_edge_record(case["line"].encode("utf-8")) == case["edge"]
    # As serde reads them (lines the validator refuses either way).
    assert og.probe_line(b'["Person","Knows"]\n') == ("Person", "Knows")  # a struct from a sequence
    assert og.probe_line(b'{"edge":"Knows","edge":"Knows","x":1}\n') == (None, None)  # duplicate field
    assert og.probe_line(b'{"edge":"K\xff"}\n') == (None, None)


def test_rows_are_counted_per_table_so_a_file_whose_every_type_fits_is_one_batch(people, tmp_path):
    # 3 people and 3 Knows edges: 6 lines, 3 rows of each table.
    lines = [person("a"), person("b"), knows("a", "b"), person("c"), knows("b", "c"), knows("c", "a")]
    path = write(tmp_path, lines)
    whole = people.validate_file(path, batch_rows=3)
    assert [(b.phase, len(b.lines)) for b in whole.batches] == [("all", 6)] and whole.ok
    # One more person: the people table is over, so the file is split, and
    # each pass's batch holds up to 3 of a table (the edges' pass is one batch).
    path = write(tmp_path, lines + [person("d")])
    split = people.validate_file(path, batch_rows=3)
    assert [(b.phase, [l for l, _ in b.lines]) for b in split.batches] == [
        ("nodes", [1, 2, 4]), ("nodes", [7]), ("edges", [3, 5, 6])
    ]
