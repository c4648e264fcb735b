"""The Python API: schemas, options, reports, typed errors and the runner's bounds."""

import json

import pytest

import omnigraph_validate as og
from conftest import ROOT

SAMPLES = ROOT / "samples"


def test_the_sample_is_valid(people):
    report = people.validate((SAMPLES / "people.ndjson").read_bytes())
    assert report["ok"] is True
    assert report["errors"] == []
    assert report["rules"]["schema_hash"] == people.hash
    assert report["rules"]["validator"] == people.validator_version == "0.1.0"


def test_the_bad_sample_has_errors(people):
    report = people.validate((SAMPLES / "people-bad.ndjson").read_bytes())
    assert report["ok"] is False
    got = {(e["line"], e["code"]) for e in report["errors"]}
    assert {(1, "range_violation"), (2, "unknown_type"), (3, "unknown_property"), (3, "invalid_date")} <= got
    assert report["error_count"] == len(report["errors"])


def test_validate_json_is_the_exact_report(people):
    data = (SAMPLES / "people-bad.ndjson").read_bytes()
    text = people.validate_json(data)
    assert isinstance(text, str) and not text.endswith("\n")
    assert json.loads(text) == people.validate(data)
    assert og.validate(people.source, data) == people.validate(data)


def test_a_bad_schema_raises_a_typed_error_with_line_and_column():
    with pytest.raises(og.SchemaCompileError) as caught:
        og.compile_schema("node P {\n  a: Strin\n}")
    e = caught.value
    assert (e.line, e.column) == (2, 6)
    assert "Strin" in str(e) and str(e).startswith("2:6: ")
    assert e.errors[0]["line"] == 2 and json.loads(e.errors_json)["errors"] == e.errors
    assert isinstance(e, ValueError)


def test_bad_options_raise():
    schema = og.compile_schema("node P { a: String }")
    with pytest.raises(og.OptionsError, match="invalid options"):
        schema.validate(b"", '{"mode":"sideways"}')
    with pytest.raises(og.OptionsError, match="max_errors"):
        schema.validate(b"", {"max_errors": 0})


def test_options_in_every_form_agree(people):
    data = (SAMPLES / "people-bad.ndjson").read_bytes()
    forms = [{"mode": "append", "max_errors": 2}, '{"mode":"append","max_errors":2}', b'{"mode":"append","max_errors":2}']
    reports = [people.validate_json(data, o) for o in forms]
    assert reports[0] == reports[1] == reports[2]
    report = json.loads(reports[0])
    assert report["rules"]["mode"] == "append" and len(report["errors"]) == 2 and report["errors_truncated"]
    # None and empty options are the defaults, as is {}.
    assert people.validate_json(data) == people.validate_json(data, {}) == people.validate_json(data, b"")


def test_batches_are_bytes(people):
    with pytest.raises(TypeError, match="encode"):
        people.validate('{"type":"Person","data":{"name":"a"}}\n')
    data = (SAMPLES / "people.ndjson").read_bytes()
    assert people.validate(bytearray(data)) == people.validate(memoryview(data)) == people.validate(data)


def test_each_call_gets_a_fresh_instance(people):
    # The same batch gives the same report however many batches ran before.
    data = (SAMPLES / "people-bad.ndjson").read_bytes()
    first = people.validate_json(data)
    for _ in range(3):
        people.validate_json((SAMPLES / "people.ndjson").read_bytes())
    assert people.validate_json(data) == first


def _big_batch(rows):
    return b"".join(
        json.dumps({"type": "Person", "data": {"name": f"p{i}", "age": i % 100, "tags": ["x"] * 20}}).encode() + b"\n"
        for i in range(rows)
    )


def test_the_deadline_stops_a_long_call_and_the_next_call_starts_clean():
    validator = og.Validator(deadline=0.001)
    schema = og.compile_schema((SAMPLES / "people.pg").read_text(encoding="utf-8"), validator)
    with pytest.raises(og.DeadlineExceededError):
        schema.validate(_big_batch(60_000))
    assert schema.validate(b"")["ok"] is True
    validator.close()


def test_the_memory_limit_is_a_typed_error():
    validator = og.Validator(memory_limit=16 << 20)
    schema = og.compile_schema((SAMPLES / "people.pg").read_text(encoding="utf-8"), validator)
    with pytest.raises(og.MemoryLimitError):
        # ~7.8 MB of small rows: passes the input check (twice the input
        # fits), not the artifact's base memory plus the batch and a row,
        # an id and a unique tuple per record.
        schema.validate(b"".join(b'{"type":"Person","data":{"name":"p%d"}}\n' % i for i in range(180_000)))
    with pytest.raises(og.InputTooLargeError):
        schema.validate(b" " * (9 << 20))
    assert schema.validate((SAMPLES / "people.ndjson").read_bytes())["ok"] is True
    validator.close()
