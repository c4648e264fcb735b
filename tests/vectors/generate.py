#!/usr/bin/env python3
"""Writes the inputs of the conformance corpus: one folder per case with
schema.pg, input.ndjson and options.json. The expected report.json of each
case is written only by the blessing command (see tests/vectors/README.md),
which prints every change.

A case's folder name ends in `__` and the error codes it must produce
(`+`-separated, sorted), or `__ok`; the runner checks that the blessed report
has exactly those codes, so a wrong expectation cannot be blessed silently.

Run: python3 tests/vectors/generate.py   (idempotent; rewrites inputs only)
"""
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))

SCHEMAS = {
    "people": """// The example schema of SPEC §1.2, with a tighter @card for tests.
interface Named { name: String @key }
node Person implements Named { age: I32?  email: String? @unique  @range(age, 0..150) }
node Company { name: String @key  founded: Date? }
edge Knows: Person -> Person @card(0..3) { since: Date? }
edge WorksAt: Person -> Company @card(0..1)
""",
    "types": """/* Every value type, all nullable. */
node T {
  s: String?
  b: Bool?
  i32: I32?
  i64: I64?
  u32: U32?
  u64: U64?
  f32: F32?
  f64: F64?
  d: Date?
  dt: DateTime?
  blob: Blob?
  v: Vector(3)?
  tags: [String]?
  nums: [I64]?
  days: [Date]?
  color: enum(red, green, dark-blue)?
}
""",
    "required": """node R { name: String  n: I32  tags: [String] }
""",
    "keys": """node Sensor { region: String  serial: String  @key(region, serial) }
node Num { n: I64 @key }
node Flt { x: F64 @key }
node Day { d: Date @key }
node Moment { t: DateTime @key }
node Flag { b: Bool @key }
node Level { k: enum(low, high) @key }
edge Reads: Sensor -> Num
""",
    "rules": """node Code { code: String @key  @check(code, "^[A-Z]{3}-[0-9]+$") }
node Word { w: String?  @check(w, "b") }
node Meter {
  id: String @key
  x: F32?
  y: F64?
  big: U64?
  neg: I64?
  @range(x, 0..0.1)
  @range(y, -1.5..)
  @range(big, ..18446744073709551614)
  @range(neg, -9223372036854775808..-1)
}
edge Follows: Code -> Code @unique(src, dst) { weight: I32? }
""",
}


def rec(**kw):
    return json.dumps(kw, separators=(",", ":"), ensure_ascii=False)


def node(type_name, id=None, **data):
    r = {"type": type_name}
    if id is not None:
        r["id"] = id
    if data:
        r["data"] = data
    return rec(**r)


def edge(e, frm, to, id=None, **data):
    r = {"edge": e}
    if id is not None:
        r["id"] = id
    r["from"] = frm
    r["to"] = to
    if data:
        r["data"] = data
    return rec(**r)


def lines(*ls):
    return "".join(l + "\n" for l in ls)


def meter(**data):
    """A node Meter record: Meter declares a property named `id`."""
    return rec(type="Meter", data=data)


def t(**data):
    """A node T record (types schema)."""
    return node("T", **data)


CASES = []


def case(name, codes, schema, text, options=None):
    suffix = "ok" if not codes else "+".join(sorted(set(codes)))
    CASES.append((f"{name}__{suffix}", schema, text, options or {}))


P = "people"
ADA = node("Person", name="Ada", age=36)
BOB = node("Person", name="Bob")

# --- framing (SPEC §2.1) ---------------------------------------------------
case("basic_nodes_and_edge", [], P, lines(ADA, BOB, edge("Knows", "Ada", "Bob", since="2026-01-02")))
case("empty_batch", [], P, "")
case("only_blank_lines", [], P, "\n  \n\t\n")
case("crlf_lines", [], P, ADA + "\r\n" + BOB + "\r\n")
case("missing_final_newline", [], P, ADA + "\n" + BOB)
case("blank_lines_keep_numbering", ["unknown_property"], P, lines(ADA, "", "   ", node("Person", name="Cy", nmae="x")))
case("byte_order_mark", ["byte_order_mark"], P, "\ufeff" + lines(ADA))
case("invalid_utf8", ["invalid_utf8"], P, lines(ADA).encode() + b'{"type":"Person","data":{"name":"\xff"}}\n')
case("invalid_utf8_overlong", ["invalid_utf8"], P, b'{"type":"Person","data":{"name":"\xc0\xaf"}}\n')
case("two_records_one_line", ["trailing_content"], P, ADA + BOB + "\n")
case("trailing_garbage", ["trailing_content"], P, ADA + " x\n")
case("record_over_lines", ["multiline_record"], P, '{"type":"Person",\n "data":{"name":"Ada"}\n}\n' + lines(BOB))
case("pretty_printed_record", ["multiline_record"], P, json.dumps({"type": "Person", "data": {"name": "Ada"}}, indent=2) + "\n")
case("record_unterminated", ["multiline_record"], P, lines(ADA, '{"type":"Person","data":{"name":"Bob"}'))
case("json_trailing_comma", ["json_syntax"], P, lines('{"type":"Person","data":{"name":"Ada",}}'))
case("json_single_quotes", ["json_syntax"], P, lines("{'type':'Person'}"))
case("json_leading_zero", ["json_syntax"], P, lines('{"type":"Person","data":{"name":"Ada","age":036}}'))
case("json_nan", ["json_syntax"], P, lines('{"type":"Person","data":{"name":"Ada","age":NaN}}'))
case("json_bad_escape", ["json_syntax"], P, lines('{"type":"Person","data":{"name":"A\\x"}}'))
case("json_unquoted_key", ["json_syntax"], P, lines('{type:"Person"}'))
case("json_control_char", ["json_syntax"], P, lines('{"type":"Person","data":{"name":"A\tB"}}'))
case("lone_high_surrogate", ["lone_surrogate"], P, lines('{"type":"Person","data":{"name":"\\ud800x"}}'))
case("lone_low_surrogate", ["lone_surrogate"], P, lines('{"type":"Person","data":{"name":"\\udc00"}}'))
case("surrogate_pair_ok", [], P, lines('{"type":"Person","data":{"name":"\\ud83d\\ude00"}}'))
case("escaped_key_and_value", [], P, lines('{"typ\\u0065":"Person","data":{"nam\\u0065":"\\"Ada\\"\\n"}}'))
case("duplicate_member_top", ["duplicate_member"], P, lines('{"type":"Person","type":"Person","data":{"name":"Ada"}}'))
case("duplicate_member_data", ["duplicate_member"], P, lines('{"type":"Person","data":{"name":"Ada","name":"Bob"}}'))
case("duplicate_member_deep", ["duplicate_member", "unknown_property"], P,
     lines('{"type":"Person","data":{"name":"Ada","extra":{"a":[{"b":1,"b":2}]}}}'))
case("duplicate_member_in_mismatched_value", ["duplicate_member", "type_mismatch"], P,
     lines('{"type":"Person","data":{"name":"Ada","age":{"x":1,"x":2}}}'))
deep64 = '{"type":"Person","data":{"name":"Ada","x":' + "[" * 62 + "]" * 62 + "}}"
deep65 = '{"type":"Person","data":{"name":"Ada","x":' + "[" * 63 + "]" * 63 + "}}"
case("nesting_64_deep", ["unknown_property"], P, lines(deep64))
case("nesting_65_deep", ["json_too_complex"], P, lines(deep65))
case("structure_limit", ["json_too_complex"], "types", lines(t(nums=list(range(20)))), {"limits": {"max_json_structure": 16}})
case("structure_limit_exact", [], "types", lines(t(nums=[1, 2])), {"limits": {"max_json_structure": 11}})
case("line_too_long", ["line_too_long"], P, lines(ADA, node("Person", name="x" * 80)), {"limits": {"max_line_bytes": 64}})
case("batch_bytes_limit", ["batch_bytes_limit"], P, lines(ADA, BOB, ADA), {"limits": {"max_batch_bytes": 100}})
case("huge_integer_literal", ["out_of_range"], P, lines(node("Person", name="Ada", age=int("9" * 100))))

# --- envelope (SPEC §2.2) --------------------------------------------------
case("not_an_object_array", ["not_an_object"], P, lines('[{"type":"Person"}]'))
case("not_an_object_string", ["not_an_object"], P, lines('"Person"'))
case("not_an_object_number", ["not_an_object"], P, lines("42"))
case("not_an_object_null", ["not_an_object"], P, lines("null"))
case("envelope_both_kinds", ["envelope_kind"], P, lines('{"type":"Person","edge":"Knows","from":"a","to":"b"}'))
case("envelope_neither_kind", ["envelope_kind"], P, lines('{"id":"x","data":{}}'))
case("envelope_empty_object", ["envelope_kind"], P, lines("{}"))
case("unknown_top_member", ["unknown_field"], P, lines('{"type":"Person","data":{"name":"Ada"},"label":"x"}'))
case("unknown_top_member_suggestion", ["envelope_kind", "unknown_field"], P, lines('{"typ":"Person","data":{"name":"Ada"}}'))
case("reserved_top_member", ["reserved_field"], P, lines('{"type":"Person","data":{"name":"Ada"},"_rowid":1}'))
case("reserved_in_data", ["reserved_field"], P, lines('{"type":"Person","data":{"name":"Ada","_id":"x"}}'))
case("reserved_tombstone_in_data", ["reserved_field"], P, lines('{"type":"Person","data":{"name":"Ada","_tombstone":true}}'))
case("edge_missing_from", ["missing_field"], P, lines(ADA, '{"edge":"Knows","to":"Ada"}'))
case("edge_missing_to", ["missing_field"], P, lines(ADA, '{"edge":"Knows","from":"Ada"}'))
case("node_with_from", ["unknown_field"], P, lines('{"type":"Person","from":"x","data":{"name":"Ada"}}'))
case("id_not_string", ["wrong_json_type"], P, lines('{"type":"Person","id":7,"data":{"name":"Ada"}}'))
case("type_not_string", ["envelope_kind", "wrong_json_type"], P, lines('{"type":["Person"],"data":{"name":"Ada"}}'))
case("from_not_string", ["missing_field", "wrong_json_type"], P, lines(ADA, '{"edge":"Knows","from":1,"to":"Ada"}'))
case("data_not_object", ["null_not_allowed", "wrong_json_type"], P, lines('{"type":"Person","data":["Ada"]}'))
case("data_before_type", [], P, lines('{"data":{"name":"Ada","age":3},"type":"Person"}'))
case("data_before_type_errors", ["type_mismatch"], P, lines('{"data":{"name":"Ada","age":"3"},"type":"Person"}'))
case("data_absent", ["null_not_allowed"], P, lines('{"type":"Person"}'))
case("unknown_type", ["unknown_type"], P, lines('{"type":"Robot","data":{}}'))
case("unknown_type_suggestion", ["unknown_type"], P, lines('{"type":"Persn","data":{"name":"Ada"}}'))
case("type_names_case_sensitive", ["unknown_type"], P, lines('{"type":"person","data":{"name":"Ada"}}'))
case("edge_type_as_node", ["unknown_type"], P, lines('{"type":"Knows","data":{}}'))
case("node_type_as_edge", ["unknown_type"], P, lines('{"edge":"Person","from":"a","to":"b"}'))
case("interface_is_not_stored", ["unknown_type"], P, lines('{"type":"Named","data":{"name":"Ada"}}'))
case("unknown_property", ["unknown_property"], P, lines(node("Person", name="Ada", nmae="x")))
case("unknown_property_long_name", ["unknown_property"], P, lines(node("Person", **{"name": "Ada", "q" * 300: 1})))
case("data_id_undeclared", ["unknown_field"], P, lines('{"type":"Person","data":{"name":"Ada","id":"p1"}}'))
case("data_id_declared", [], "rules", lines('{"type":"Meter","data":{"id":"m1"}}'))
case("data_id_declared_top_id_matches", [], "rules", lines('{"type":"Meter","id":"m1","data":{"id":"m1"}}'))

# --- values (SPEC §1.3) ----------------------------------------------------
T = "types"
case("all_types_ok", [], T, lines(t(s="x", b=True, i32=-5, i64=2**40, u32=7, u64=2**63, f32=1.5, f64=-2.25e-8,
                                     d="2026-01-02", dt="2026-01-02T03:04:05Z", blob="base64:aGk=", v=[1, 2.5, -3],
                                     tags=["a", "b"], nums=[1, -2], days=["2024-02-29", 19000], color="dark-blue")))
case("all_nulls_ok", [], T, lines(t(s=None, b=None, i32=None, v=None, tags=None, color=None), t()))
case("string_mismatch", ["type_mismatch"], T, lines(t(s=5)))
case("bool_ok", [], T, lines(t(b=False)))
case("bool_mismatch", ["type_mismatch"], T, lines(t(b="true")))
case("bool_number", ["type_mismatch"], T, lines(t(b=1)))
for name, lo, hi in [("i32", -2**31, 2**31 - 1), ("i64", -2**63, 2**63 - 1), ("u32", 0, 2**32 - 1), ("u64", 0, 2**64 - 1)]:
    case(f"{name}_min", [], T, lines(t(**{name: lo})))
    case(f"{name}_max", [], T, lines(t(**{name: hi})))
    case(f"{name}_min_minus_1", ["out_of_range"], T, lines(t(**{name: lo - 1})))
    case(f"{name}_max_plus_1", ["out_of_range"], T, lines(t(**{name: hi + 1})))
case("int_with_fraction", ["type_mismatch"], T, lines('{"type":"T","data":{"i32":1.0}}'))
case("int_with_exponent", ["type_mismatch"], T, lines('{"type":"T","data":{"i64":1e2}}'))
case("int_negative_zero", [], T, lines('{"type":"T","data":{"i32":-0}}'))
case("int_as_string", ["type_mismatch"], T, lines(t(i32="5")))
case("f32_ok", [], T, lines(t(f32=0.1)))
case("f32_max", [], T, lines('{"type":"T","data":{"f32":3.4028235e38}}'))
case("f32_overflow", ["out_of_range"], T, lines('{"type":"T","data":{"f32":3.5e38}}'))
case("f32_integer_literal", [], T, lines(t(f32=16777217)))
case("f64_overflow", ["out_of_range"], T, lines('{"type":"T","data":{"f64":1e309}}'))
case("f64_underflow_to_zero", [], T, lines('{"type":"T","data":{"f64":1e-400}}'))
case("f64_huge_integer", [], T, lines('{"type":"T","data":{"f64":123456789012345678901234567890}}'))
case("f64_exponent_forms", [], T, lines('{"type":"T","data":{"f64":1E+2}}', '{"type":"T","data":{"f64":-0.5e-3}}'))
case("float_as_string", ["type_mismatch"], T, lines(t(f64="1.5")))
case("date_ok", [], T, lines(t(d="2026-11-29")))
case("date_leap_day", [], T, lines(t(d="2024-02-29"), t(d="2000-02-29")))
case("date_not_leap_year", ["invalid_date"], T, lines(t(d="2023-02-29")))
case("date_century_not_leap", ["invalid_date"], T, lines(t(d="1900-02-29")))
case("date_month_13", ["invalid_date"], T, lines(t(d="2026-13-01")))
case("date_day_32", ["invalid_date"], T, lines(t(d="2026-01-32")))
case("date_short_form", ["invalid_date"], T, lines(t(d="2026-1-2")))
case("date_with_time", ["invalid_date"], T, lines(t(d="2026-01-02T00:00:00Z")))
case("date_year_bounds", [], T, lines(t(d="0000-01-01"), t(d="9999-12-31")))
case("date_days_integer", [], T, lines(t(d=0), t(d=-1), t(d=20000)))
case("date_days_fraction", ["invalid_date"], T, lines(t(d=1.5)))
case("date_days_out_of_range", ["invalid_date"], T, lines(t(d=3000000)))
case("date_bool", ["type_mismatch"], T, lines(t(d=True)))
case("datetime_utc", [], T, lines(t(dt="2026-01-02T03:04:05Z")))
case("datetime_lowercase", [], T, lines(t(dt="2026-01-02t03:04:05z")))
case("datetime_offsets", [], T, lines(t(dt="2026-01-02T03:04:05+05:30"), t(dt="2026-01-02T03:04:05-08:00")))
case("datetime_fraction_micro", [], T, lines(t(dt="2026-01-02T03:04:05.123456Z"), t(dt="2026-01-02T03:04:05.1Z")))
case("datetime_fraction_nano_zero", [], T, lines(t(dt="2026-01-02T03:04:05.123456000Z")))
case("datetime_fraction_nano_lossy", ["invalid_datetime"], T, lines(t(dt="2026-01-02T03:04:05.123456789Z")))
case("datetime_fraction_10_digits", ["invalid_datetime"], T, lines(t(dt="2026-01-02T03:04:05.1234560000Z")))
case("datetime_no_offset", ["invalid_datetime"], T, lines(t(dt="2026-01-02T03:04:05")))
case("datetime_no_seconds", ["invalid_datetime"], T, lines(t(dt="2026-01-02T03:04Z")))
case("datetime_space_separator", ["invalid_datetime"], T, lines(t(dt="2026-01-02 03:04:05Z")))
case("datetime_leap_second", ["invalid_datetime"], T, lines(t(dt="2016-12-31T23:59:60Z")))
case("datetime_offset_no_colon", ["invalid_datetime"], T, lines(t(dt="2026-01-02T03:04:05+0530")))
case("datetime_hour_24", ["invalid_datetime"], T, lines(t(dt="2026-01-02T24:00:00Z")))
case("datetime_bad_date", ["invalid_datetime"], T, lines(t(dt="2026-02-30T00:00:00Z")))
case("datetime_past_year_9999", ["invalid_datetime"], T, lines(t(dt="9999-12-31T23:00:00-05:00")))
case("datetime_millis", [], T, lines(t(dt=0), t(dt=1767323045123), t(dt=-1000)))
case("datetime_millis_out_of_range", ["invalid_datetime"], T, lines(t(dt=2**62)))
case("datetime_millis_fraction", ["invalid_datetime"], T, lines(t(dt=1.5)))
case("blob_ok", [], T, lines(t(blob="base64:aGVsbG8="), t(blob="base64:AAEC")))
case("blob_empty", [], T, lines(t(blob="base64:")))
case("blob_missing_padding", ["invalid_base64"], T, lines(t(blob="base64:aGk")))
case("blob_noncanonical_bits", ["invalid_base64"], T, lines(t(blob="base64:aGl=")))
case("blob_bad_character", ["invalid_base64"], T, lines(t(blob="base64:a-k=")))
case("blob_url_safe_alphabet", ["invalid_base64"], T, lines(t(blob="base64:__8=")))
case("blob_external_reference", ["external_blob_not_allowed"], T, lines(t(blob="s3://bucket/key")))
case("blob_number", ["type_mismatch"], T, lines(t(blob=5)))
case("vector_ok", [], T, lines(t(v=[0, 1e-3, -2])))
case("vector_too_short", ["vector_dimension"], T, lines(t(v=[1, 2])))
case("vector_too_long", ["vector_dimension"], T, lines(t(v=[1, 2, 3, 4])))
case("vector_empty", ["vector_dimension"], T, lines(t(v=[])))
case("vector_overflow_f32", ["out_of_range"], T, lines('{"type":"T","data":{"v":[1,1e39,2]}}'))
case("vector_string_item", ["type_mismatch"], T, lines(t(v=[1, "2", 3])))
case("vector_null_item", ["type_mismatch"], T, lines(t(v=[1, None, 3])))
case("vector_not_array", ["type_mismatch"], T, lines(t(v="1,2,3")))
case("list_ok", [], T, lines(t(tags=["a", "b"], nums=[1, 2], days=["2026-01-01"])))
case("list_empty", [], T, lines(t(tags=[], nums=[])))
case("list_null_item", ["null_not_allowed"], T, lines(t(tags=["a", None])))
case("list_wrong_item", ["type_mismatch"], T, lines(t(nums=[1, "2"])))
case("list_item_out_of_range", ["out_of_range"], T, lines(t(nums=[2**63])))
case("list_bad_date_item", ["invalid_date"], T, lines(t(days=["2026-01-01", "2026-02-31"])))
case("list_not_array", ["type_mismatch"], T, lines(t(tags="a")))
case("enum_ok", [], T, lines(t(color="red"), t(color="dark-blue")))
case("enum_not_member", ["not_in_enum"], T, lines(t(color="blue")))
case("enum_case_mismatch", ["not_in_enum"], T, lines(t(color="Red")))
case("enum_number", ["type_mismatch"], T, lines(t(color=1)))
R = "required"
case("required_ok", [], R, lines(node("R", name="a", n=1, tags=[])))
case("required_null", ["null_not_allowed"], R, lines(node("R", name=None, n=1, tags=[])))
case("required_missing", ["null_not_allowed"], R, lines(node("R", name="a", tags=[])))
case("required_list_null", ["null_not_allowed"], R, lines(node("R", name="a", n=1, tags=None)))
case("required_all_missing", ["null_not_allowed"], R, lines('{"type":"R","data":{}}'))
case("error_order_within_line", ["out_of_range", "type_mismatch", "unknown_property"], T,
     lines('{"type":"T","data":{"zz":1,"i32":99999999999,"s":1}}'))

# --- identity (SPEC §2.3, §2.4) ---------------------------------------------
K = "keys"
case("key_derived", [], P, lines(node("Person", name="Ada")))
case("key_id_matches", [], P, lines(node("Person", id="Ada", name="Ada")))
case("key_id_noncanonical", ["noncanonical_id"], P, lines(node("Person", id="ada", name="Ada")))
case("composite_key_ok", [], K, lines(node("Sensor", id='["north","SN-42"]', region="north", serial="SN-42")))
case("composite_key_spaces", ["noncanonical_id"], K, lines(node("Sensor", id='["north", "SN-42"]', region="north", serial="SN-42")))
case("composite_key_escaping", [], K, lines(node("Sensor", id='["a\\"b","c"]', region='a"b', serial="c")))
case("int_key_canonical", [], K, lines(node("Num", id="-7", n=-7), node("Num", id="0", n=0)))
case("int_key_leading_zero", ["noncanonical_id"], K, lines(node("Num", id="07", n=7)))
case("float_key_canonical", [], K, lines(node("Flt", id="1.5", x=1.5), node("Flt", id="1", x=1.0), node("Flt", id="1e+21", x=1e21)))
case("float_key_negative_zero", [], K, lines('{"type":"Flt","id":"0","data":{"x":-0.0}}'))
case("float_key_noncanonical", ["noncanonical_id"], K, lines(node("Flt", id="1.0", x=1.0)))
case("date_key", [], K, lines(node("Day", id="2026-01-02", d="2026-01-02"), node("Day", id="1970-01-02", d=1)))
case("datetime_key_utc", [], K, lines(node("Moment", id="2026-01-02T02:04:05.000000Z", t="2026-01-02T03:04:05+01:00")))
case("datetime_key_noncanonical", ["noncanonical_id"], K, lines(node("Moment", id="2026-01-02T03:04:05Z", t="2026-01-02T03:04:05Z")))
case("bool_and_enum_keys", [], K, lines(node("Flag", id="true", b=True), node("Level", id="high", k="high")))
case("edge_to_composite_key", [], K,
     lines(node("Sensor", region="n", serial="1"), node("Num", n=5), edge("Reads", '["n","1"]', "5")))
case("duplicate_id_append", ["duplicate_id"], P, lines(ADA, node("Person", name="Ada", age=37)), {"mode": "append"})
case("duplicate_id_overwrite", ["duplicate_id"], P, lines(ADA, node("Person", name="Ada", age=37)), {"mode": "overwrite"})
case("duplicate_id_merge_folds", [], P, lines(ADA, BOB, node("Person", name="Ada", age=37)))
case("duplicate_edge_id_merge_folds", [], P,
     lines(ADA, BOB, edge("Knows", "Ada", "Bob", id="k1"), edge("Knows", "Bob", "Ada", id="k1")))
case("duplicate_edge_id_append", ["duplicate_id"], P,
     lines(ADA, BOB, edge("Knows", "Ada", "Bob", id="k1"), edge("Knows", "Bob", "Ada", id="k1")), {"mode": "append"})
case("generated_ids_never_collide", [], "types", lines(t(s="a"), t(s="a")), {"mode": "append"})
case("same_id_different_types", [], "rules",
     lines(node("Code", code="ABC-1"), meter(id="ABC-1")), {"mode": "append"})

# --- constraints (SPEC §2.5) -------------------------------------------------
case("unique_violation", ["unique_violation"], P,
     lines(node("Person", name="Ada", email="a@x"), node("Person", name="Bob", email="a@x")))
case("unique_null_exempt", [], P, lines(node("Person", name="Ada", email=None), node("Person", name="Bob")))
case("unique_after_fold", [], P,
     lines(node("Person", name="Ada", email="a@x"), node("Person", name="Ada", email="b@x"), node("Person", name="Bob", email="a@x")))
# A clash counted while the batch streams is gone once a fold removes its first row.
case("unique_clash_before_fold", [], P,
     lines(node("Person", name="Ada", email="a@x"), node("Person", name="Bob", email="a@x"), node("Person", name="Ada", email="b@x")))
case("unique_edge_endpoints", ["unique_violation"], "rules",
     lines(node("Code", code="ABC-1"), node("Code", code="ABC-2"), edge("Follows", "ABC-1", "ABC-2", id="f1"),
           edge("Follows", "ABC-1", "ABC-2", id="f2")))
case("range_bounds_inclusive", [], P, lines(node("Person", name="A", age=0), node("Person", name="B", age=150)))
case("range_below", ["range_violation"], P, lines(node("Person", name="A", age=-1)))
case("range_above", ["range_violation"], P, lines(node("Person", name="A", age=151)))
case("range_f32_bound_in_width", [], "rules", lines(meter(id="m", x=0.1)))
case("range_f32_above", ["range_violation"], "rules", lines(meter(id="m", x=0.10001)))
case("range_f64_open_upper", [], "rules", lines(meter(id="m", y=-1.5), meter(id="n", y=1e300)))
case("range_f64_below", ["range_violation"], "rules", lines(meter(id="m", y=-1.5000001)))
case("range_u64_exact", ["range_violation"], "rules",
     lines(meter(id="a", big=18446744073709551614), meter(id="b", big=18446744073709551615)))
case("range_i64_exact", ["range_violation"], "rules",
     lines(meter(id="a", neg=-9223372036854775808), meter(id="b", neg=0)))
case("check_ok", [], "rules", lines(node("Code", code="ABC-123")))
case("check_violation", ["check_violation"], "rules", lines(node("Code", code="abc-123")))
case("check_unanchored", [], "rules", lines(node("Word", w="abc")))
case("check_unanchored_violation", ["check_violation"], "rules", lines(node("Word", w="xyz")))
case("card_at_max", [], P, lines(ADA, BOB, *[edge("Knows", "Ada", "Bob", id=f"k{i}") for i in range(3)]))
case("card_exceeded", ["card_violation"], P, lines(ADA, BOB, *[edge("Knows", "Ada", "Bob", id=f"k{i}") for i in range(5)]))
case("card_one", ["card_violation"], P,
     lines(ADA, node("Company", name="Acme"), node("Company", name="Beta"), edge("WorksAt", "Ada", "Acme"), edge("WorksAt", "Ada", "Beta")))
case("card_counts_after_fold", [], P,
     lines(ADA, node("Company", name="Acme"), edge("WorksAt", "Ada", "Acme", id="w1"), edge("WorksAt", "Ada", "Acme", id="w1")))
case("card_over_before_fold", [], P,
     lines(ADA, BOB, node("Company", name="Acme"), node("Company", name="Beta"), edge("WorksAt", "Ada", "Acme", id="w1"),
           edge("WorksAt", "Ada", "Beta", id="w2"), edge("WorksAt", "Bob", "Acme", id="w1")))
case("endpoints_in_batch", [], P, lines(ADA, BOB, edge("Knows", "Ada", "Bob"), edge("Knows", "Bob", "Ada")))
case("external_refs_listed", [], P, lines(ADA, edge("Knows", "Ada", "Zed"), edge("WorksAt", "Yan", "Acme")))
case("edge_before_its_nodes", [], P, lines(edge("Knows", "Ada", "Bob"), ADA, BOB))
case("folded_edge_external_end_not_listed", [], P,
     lines(ADA, edge("Knows", "Ada", "Zed", id="k1"), edge("Knows", "Ada", "Ada", id="k1")))
case("duplicate_edge_external_end_not_listed", ["duplicate_id"], P,
     lines(ADA, edge("Knows", "Ada", "Ada", id="k1"), edge("Knows", "Ada", "Zed", id="k1")), {"mode": "append"})
case("endpoint_wrong_type_is_external", [], P, lines(node("Company", name="Acme"), edge("Knows", "Acme", "Acme")))
case("overwrite_dangling_endpoint", ["dangling_endpoint"], P, lines(ADA, edge("Knows", "Ada", "Zed")), {"mode": "overwrite"})
case("overwrite_unnamed_type_external", [], P, lines(edge("Knows", "Ada", "Zed")), {"mode": "overwrite"})
case("edge_with_invalid_node_skipped", ["range_violation"], P, lines(node("Person", name="Ada", age=900), edge("Knows", "Ada", "Ada")))

# --- bounds and report shape (SPEC §3, §5) ------------------------------------
case("table_rows_limit", ["table_rows_limit"], P, lines(ADA, BOB, node("Person", name="Cy")), {"limits": {"max_table_rows": 2}})
case("table_rows_limit_after_fold", [], P, lines(ADA, BOB, ADA), {"limits": {"max_table_rows": 2}})
case("table_rows_limit_overwrite_exempt", [], P, lines(ADA, BOB, node("Person", name="Cy")), {"mode": "overwrite", "limits": {"max_table_rows": 2}})
case("table_bytes_limit", ["table_bytes_limit"], P, lines(ADA, BOB, node("Person", name="C" * 40)), {"limits": {"max_table_bytes": 60}})
case("table_bytes_counted_before_fold", [], P, lines(node("Person", name="Ada", email="e" * 80), ADA, BOB),
     {"limits": {"max_table_bytes": 60}})
case("total_arrow_bytes_limit", ["table_bytes_limit"], P,
     lines(ADA, node("Company", name="Acme"), node("Company", name="Beta")), {"limits": {"max_total_arrow_bytes": 60}})
case("error_cap_truncates", ["unknown_property"], P,
     lines(*[node("Person", name=f"p{i}", nmae=1) for i in range(5)]), {"max_errors": 2})
case("many_errors_one_line", ["not_in_enum", "out_of_range", "type_mismatch"], T,
     lines('{"type":"T","data":{"color":"x","u32":-1,"b":0,"s":true}}'))
case("echo_is_truncated", ["not_in_enum"], T, lines(t(color="x" * 500)))
LONG = "k" * 200
case("duplicate_member_long_names", ["duplicate_member", "unknown_field", "unknown_property"], P,
     lines(f'{{"type":"Person","data":{{"name":"Ada"}},"{LONG}":1,"{LONG}":2}}',
           f'{{"type":"Person","data":{{"name":"Ada","{LONG}":1,"{LONG}":2}}}}',
           f'{{"type":"Person","data":{{"name":"Ada","extra":{{"{LONG}":1,"{LONG}":2}}}}}}'))
case("mode_in_rules_append", [], P, lines(ADA), {"mode": "append"})
case("keyed_parse_bytes_limit", ["batch_bytes_limit"], P, lines(ADA, BOB, node("Person", name="Cy")),
     {"limits": {"max_keyed_parse_bytes": 120}})
case("keyed_parse_bytes_after_fold", [], P, lines(ADA, BOB, ADA), {"limits": {"max_keyed_parse_bytes": 120}})
case("keyed_parse_bytes_counted_before_fold", [], P, lines(node("Person", name="Ada", email="e" * 200), ADA, BOB),
     {"limits": {"max_keyed_parse_bytes": 120}})
case("keyed_parse_bytes_overwrite_exempt", [], P, lines(ADA, BOB, node("Person", name="Cy")),
     {"mode": "overwrite", "limits": {"max_keyed_parse_bytes": 120}})

# --- compat mode (SPEC §2.6) ----------------------------------------------------
C = {"strict": False}
case("compat_two_records_one_line", [], P, ADA + BOB + "\n", C)
case("compat_record_over_lines", [], P, '{"type":"Person",\n "data":{"name":"Ada"}\n}\n' + lines(BOB), C)
case("compat_duplicate_member_last_wins", [], P, lines('{"type":"Person","data":{"name":"Ada","age":1,"age":2}}'), C)
case("compat_unknown_members_ignored", [], P, lines('{"type":"Person","label":1,"data":{"name":"Ada","nick":"A","_id":"x"}}'), C)
case("compat_wrong_type_nullable_is_null", [], P, lines('{"type":"Person","data":{"name":"Ada","age":"36"}}'), C)
case("compat_wrong_type_required_fails", ["null_not_allowed"], R, lines('{"type":"R","data":{"name":"a","n":"1","tags":[]}}'), C)
case("compat_wrong_list_item_nulls_list", [], T, lines(t(nums=[1, "2"])), C)
case("compat_data_not_object", [], T, lines('{"type":"T","data":"oops"}'), C)
case("compat_data_not_object_required", ["null_not_allowed"], R, lines('{"type":"R","data":5}'), C)
case("compat_bad_date_still_error", ["invalid_date"], T, lines(t(d="2026-02-30")), C)
case("compat_bad_datetime_still_error", ["invalid_datetime"], T, lines(t(dt="yesterday")), C)
case("compat_syntax_error_recovers", ["json_syntax"], P, lines('{"type":"Person",,}', BOB), C)
case("compat_bom_tolerated", [], P, "\ufeff" + lines(ADA), C)
case("compat_out_of_range_still_error", ["out_of_range"], T, lines(t(i32=2**40)), C)
case("compat_unknown_type_still_error", ["unknown_type"], P, lines('{"type":"Robot"}'), C)
case("compat_wrong_scalars_are_null", [], T, lines(t(color=1, b="yes", f64="1.5", s=[1], u64={})), C)
case("compat_wrong_list_item_required_fails", ["null_not_allowed"], R, lines(node("R", name="a", n=1, tags=[1])), C)
case("compat_wrong_list_item_and_bad_item", ["out_of_range"], T, lines(t(nums=["x", 2**64])), C)
case("compat_int_fraction_still_error", ["type_mismatch"], T, lines('{"type":"T","data":{"i32":1.5}}'), C)
case("compat_list_not_array", ["type_mismatch"], T, lines(t(tags="a")), C)
case("compat_date_wrong_kind", ["type_mismatch"], T, lines(t(d=True)), C)
case("compat_datetime_wrong_kind", ["type_mismatch"], T, lines(t(dt=[2026])), C)
case("compat_date_list_item_wrong_kind", ["type_mismatch"], T, lines(t(days=["2026-01-01", True])), C)
case("compat_vector_wrong_kind", ["type_mismatch"], T, lines(t(v="1,2,3")), C)
case("compat_vector_wrong_item", ["type_mismatch"], T, lines(t(v=[1, "2", 3])), C)
case("compat_blob_wrong_kind", ["type_mismatch"], T, lines(t(blob=5)), C)
case("compat_duplicate_type_last_wins", [], P, lines('{"type":"Company","data":{"name":"Ada","age":36},"type":"Person"}'), C)

# --- legacy identity (SPEC §2.3) -------------------------------------------------
L = {"legacy_identity": True}
case("legacy_data_id_is_identity", [], T,
     lines('{"type":"T","data":{"id":"t1","s":"a"}}', '{"type":"T","data":{"id":"t1","s":"b"}}', '{"type":"T","id":"t2"}'), L)
case("legacy_data_id_duplicate_append", ["duplicate_id"], T,
     lines('{"type":"T","data":{"id":"t1"}}', '{"type":"T","id":"t1"}'), {"mode": "append", **L})
case("legacy_both_ids", ["ambiguous_id"], T, lines('{"type":"T","id":"t1","data":{"id":"t1"}}'), L)
case("legacy_data_id_not_string", ["wrong_json_type"], T, lines('{"type":"T","data":{"id":7}}'), L)
case("legacy_data_id_twice", ["duplicate_member"], T, lines('{"type":"T","data":{"id":"a","id":"b"}}'), L)
case("legacy_keyed_data_id_matches", [], P, lines('{"type":"Person","data":{"id":"Ada","name":"Ada"}}'), L)
case("legacy_keyed_data_id_noncanonical", ["noncanonical_id"], P, lines('{"type":"Person","data":{"id":"ada","name":"Ada"}}'), L)
case("legacy_edge_data_id", [], P,
     lines(ADA, BOB, '{"edge":"Knows","from":"Ada","to":"Bob","data":{"id":"k1"}}',
           '{"edge":"Knows","from":"Bob","to":"Ada","data":{"id":"k1"}}'), L)
case("legacy_declared_id_is_a_property", [], "rules", lines('{"type":"Meter","id":"m1","data":{"id":"m1"}}'), L)
case("legacy_compat_data_id", [], T, lines('{"type":"T","data":{"id":"t1"}} {"type":"T","data":{"id":"t1","s":"x"}}'),
     {"strict": False, **L})


def write(path, content):
    data = content if isinstance(content, bytes) else content.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)


def main():
    names = set()
    for name, schema, text, options in CASES:
        assert name not in names, name
        names.add(name)
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        write(os.path.join(d, "schema.pg"), SCHEMAS[schema])
        write(os.path.join(d, "input.ndjson"), text)
        write(os.path.join(d, "options.json"), json.dumps(options, sort_keys=True) + "\n")
    for entry in os.listdir(HERE):
        p = os.path.join(HERE, entry)
        if os.path.isdir(p) and entry not in names:
            shutil.rmtree(p)
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
