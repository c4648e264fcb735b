"""The conformance corpus (tests/vectors): every report byte for byte, as in
native code, wasmtime (Rust), Node and Chromium. Options are the raw bytes of
options.json, passed as the Rust parity test passes them; report.json is the
report plus a newline."""

import json

import pytest

import omnigraph_validate as og
from conftest import VECTORS, case_names

CASES = case_names()


def read_case(name):
    d = VECTORS / name
    return {
        "schema": (d / "schema.pg").read_bytes().decode("utf-8"),
        "options": (d / "options.json").read_bytes(),
        "input": (d / "input.ndjson").read_bytes(),
        "expected": (d / "report.json").read_bytes().decode("utf-8"),
    }


def test_the_corpus_is_all_there():
    assert len(CASES) >= 150


@pytest.mark.parametrize("name", CASES)
def test_corpus_report_is_byte_identical(name):
    case = read_case(name)
    schema = og.compile_schema(case["schema"])
    actual = schema.validate_json(case["input"], case["options"]) + "\n"
    assert actual == case["expected"], f"python: {name}"
    # Options as a dict, and the report as a dict, agree.
    assert schema.validate(case["input"], json.loads(case["options"])) == json.loads(case["expected"])
    # The one-shot call hands the artifact the source, not a compiled form.
    assert og.validate(case["schema"], case["input"], case["options"]) == json.loads(case["expected"])
