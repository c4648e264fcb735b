//! The schema language (SPEC §1): every construct compiles to the expected
//! catalog, and every schema error is reported at its line and column.

use omnigraph_validate_wasm::{Schema, TableKind, UniqueMember, ValueType};

const EXAMPLE: &str = r#"
// The example of SPEC §1.2.
interface Named { name: String @key }
node Person implements Named { age: I32?  email: String? @unique  @range(age, 0..150) }
node Company { name: String @key }
edge Knows: Person -> Person @card(0..500) { since: Date? }
edge WorksAt: Person -> Company @card(0..1)
"#;

fn compile(src: &str) -> Schema {
    Schema::compile(src).unwrap_or_else(|e| panic!("schema failed:\n{e}"))
}

#[test]
fn spec_example_compiles_with_interfaces_resolved() {
    let s = compile(EXAMPLE);
    let names: Vec<_> = s.types.iter().map(|t| (t.kind, t.name.as_str())).collect();
    assert_eq!(
        names,
        [(TableKind::Node, "Company"), (TableKind::Node, "Person"), (TableKind::Edge, "Knows"), (TableKind::Edge, "WorksAt")]
    );
    let person = &s.types[s.type_index("Person").unwrap()];
    let props: Vec<_> = person.props.iter().map(|p| (p.name.as_str(), p.ty.clone(), p.nullable)).collect();
    assert_eq!(
        props,
        [("name", ValueType::String, false), ("age", ValueType::I32, true), ("email", ValueType::String, true)]
    );
    assert_eq!(person.key, Some(vec![0]));
    assert_eq!(person.uniques, vec![vec![UniqueMember::Prop(2)]]);
    assert_eq!(person.ranges.len(), 1);
    let knows = &s.types[s.type_index("Knows").unwrap()];
    assert_eq!(knows.card_max, Some(500));
    assert_eq!(knows.from, s.type_index("Person"));
    let works = &s.types[s.type_index("WorksAt").unwrap()];
    assert_eq!(works.to, s.type_index("Company"));
    assert!(s.is_interface("Named"));
    assert!(s.hash().starts_with("sha256:") && s.hash().len() == 71);
}

#[test]
fn hash_ignores_whitespace_comments_and_declaration_order() {
    let a = compile(EXAMPLE);
    let b = compile(
        "edge WorksAt: Person -> Company @card(0..1)\n/* moved */ edge Knows : Person->Person @card( 0 .. 500 ) {since:Date?}\n\
         node Company{name:String @key}\nnode Person implements Named {age:I32? email:String? @unique @range(age,0..150)}\n\
         interface Named{name:String @key}",
    );
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.canonical_json(), b.canonical_json());
    let c = compile(&EXAMPLE.replace("0..150", "0..151"));
    assert_ne!(a.hash(), c.hash());
}

#[test]
fn canonical_catalog_is_stable() {
    let s = compile("node A @description(\"an A\") { x: [Date]?  v: Vector(3)  c: enum(a, b-c) @index  @range(v2, 0..) v2: F32? }");
    assert_eq!(
        s.canonical_json(),
        r#"{"format":1,"interfaces":[],"nodes":[{"name":"A","implements":[],"properties":[{"name":"x","type":"[Date]","nullable":true,"metadata":[]},{"name":"v","type":"Vector(3)","nullable":false,"metadata":[]},{"name":"c","type":"enum(a, b-c)","nullable":false,"metadata":[]},{"name":"v2","type":"F32","nullable":true,"metadata":[]}],"key":null,"unique":[],"index":[["c"]],"ranges":[{"property":"v2","min":"0","max":null}],"checks":[],"metadata":[{"name":"description","args":["an A"]}]}],"edges":[]}"#
    );
}

#[test]
fn every_type_and_annotation_parses() {
    let s = compile(
        r#"
        node All @instruction("load me") @custom(1, x, "s", 1..2) {
          s: String  b: Bool  i: I32  j: I64  u: U32  w: U64  f: F32  g: F64
          d: Date  t: DateTime  blob: Blob?  v: Vector(65536)?  l: [I64]?  e: enum(x, Y_1, -z)
          id: String @description("a user id") @embed("s") @rename_from("old_id")
          _private: I32?
          @key(s, i)  @unique(j, u)  @index(f, g)  @check(s, "^a")  @range(g, -1.5..2.5)  @range(w, ..10)
        }
        node Other { k: String @key @unique @index }
        edge E: All -> Other @card(0..7) @unique(src, dst) { weight: F64? @index }
        edge F: Other -> Other
        "#,
    );
    let all = &s.types[s.type_index("All").unwrap()];
    assert_eq!(all.props.len(), 16);
    assert_eq!(all.key, Some(vec![all.prop("s").unwrap(), all.prop("i").unwrap()]));
    assert_eq!(all.props[all.prop("v").unwrap()].ty, ValueType::Vector(65536));
    assert_eq!(all.props[all.prop("e").unwrap()].ty, ValueType::Enum(vec!["x".into(), "Y_1".into(), "-z".into()]));
    let e = &s.types[s.type_index("E").unwrap()];
    assert_eq!(e.uniques, vec![vec![UniqueMember::Src, UniqueMember::Dst]]);
    assert_eq!(e.card_max, Some(7));
    let cat = s.catalog();
    assert_eq!(cat.edges[0].card.as_ref().unwrap().min, 0);
    assert_eq!(cat.nodes[0].metadata[1].name, "custom");
    assert_eq!(cat.nodes[0].metadata[1].args, Some(vec!["1".into(), "x".into(), "s".into(), "1..2".into()]));
}

#[test]
fn annotations_may_come_before_or_after_implements() {
    let a = compile("interface I { a: String @key } node N @description(\"x\") implements I {}");
    let b = compile("interface I { a: String @key } node N implements I @description(\"x\") {}");
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.catalog().nodes[0].metadata[0].name, "description");
}

#[test]
fn node_may_redeclare_an_interface_property_identically() {
    let s = compile("interface I { a: String @key } node N implements I { a: String @index b: I32? }");
    let n = &s.types[0];
    assert_eq!(n.props.len(), 2);
    assert_eq!(s.catalog().nodes[0].index, vec![vec!["a".to_string()]]);
}

/// (source, line, column, message fragment)
const ERRORS: &[(&str, u32, u32, &str)] = &[
    ("node person {}", 1, 6, "must start with an uppercase"),
    ("node P { Name: String }", 1, 10, "must start with a lowercase"),
    ("node P { a: Strin }", 1, 13, "unknown type 'Strin' (did you mean 'String'?)"),
    ("node P { a: String }\nnode P { b: I32 }", 2, 6, "type 'P' is already declared at line 1"),
    ("edge Knows: A -> A\nedge KNOWS: A -> A\nnode A {}", 2, 6, "only in case"),
    ("node P { a: String a: I32 }", 1, 20, "property 'a' is already declared"),
    ("node P { _id: String }", 1, 10, "reserved"),
    ("node P { _rowaddr: String }", 1, 10, "reserved"),
    ("node P { a: Vector(0) }", 1, 20, "vector dimension 0 is out of range"),
    ("node P { a: Vector(65537) }", 1, 20, "out of range"),
    ("node P { a: [Blob] }", 1, 13, "lists of Blob are not supported"),
    ("node P { a: [[I32]] }", 1, 13, "lists of [I32] are not supported"),
    ("node P { a: [I32?] }", 1, 13, "list items cannot be null"),
    ("node P { a: enum(x, x) }", 1, 21, "listed twice"),
    ("node P { a: String? @key }", 1, 10, "keys must be non-nullable scalars"),
    ("node P { a: [String] @key }", 1, 10, "keys must be non-nullable scalars"),
    ("node P { a: String @key b: String @key(b) }", 1, 35, "more than one @key"),
    ("edge E: A -> A { a: String @key }\nnode A {}", 1, 18, "@key is only for nodes"),
    ("node P { @card(0..1) }", 1, 10, "only allowed on edges"),
    ("edge E: A -> A @card(2..1)\nnode A {}", 1, 16, "minimum 2 is above its maximum 1"),
    ("edge E: A -> A @card(x)\nnode A {}", 1, 16, "non-negative integer bounds"),
    ("edge E: A -> A @card(1..)\nnode A {}", 1, 16, "minimum 1 cannot be enforced at ingestion"),
    ("edge E: A -> A @card(2..5)\nnode A {}", 1, 16, "minimum 2 cannot be enforced at ingestion"),
    ("edge E: A -> B\nnode A {}", 1, 14, "edge endpoint 'B' is not declared"),
    ("edge E: A -> I\nnode A {}\ninterface I {}", 1, 14, "endpoints must be node types"),
    ("node P implements Q {}", 1, 19, "'Q' is not an interface"),
    ("interface I { a: String } node P implements I { a: I32 }", 1, 49, "must be identical"),
    ("node P { a: I32 @range(a, 0..x) }", 1, 30, "expected ',' or ')' in the arguments of @range"),
    ("node P { a: I32 @range(a, 5) }", 1, 17, "@range takes a property and bounds"),
    ("node P { a: String @range(a, 0..1) }", 1, 20, "@range needs a numeric property"),
    ("node P { a: I32 @range(a, 0.5..1) }", 1, 17, "must be an integer"),
    ("node P { a: F64 @range(a, 2..1) }", 1, 17, "lower bound 2 is above upper bound 1"),
    ("node P { a: I32 @range(b, 0..1) }", 1, 17, "names 'b', which is not a property"),
    ("node P { a: I32 @check(a, \"x\") }", 1, 17, "@check needs a String property"),
    ("node P { a: String @check(a, \"(\") }", 1, 20, "invalid regex"),
    ("node P { a: String @check(a) }", 1, 20, "@check takes a property and a regex"),
    // Unicode property classes are left out of the artifact (docs/rulebook.md).
    ("node P { a: String @check(a, \"\\\\p{Greek}\") }", 1, 20, "Unicode property classes"),
    ("node P { a: String @check(a, \"[\\\\pL0-9]\") }", 1, 20, "Unicode property classes"),
    ("node P { a: String @unique(b) }", 1, 20, "@unique names 'b'"),
    ("node P { a: String @unique(src) }", 1, 20, "@unique names 'src'"),
    ("node P { a: [String] @unique(a) }", 1, 22, "unique members must be scalars"),
    ("node P { a: String @description(5) }", 1, 20, "takes one string argument"),
    ("node P { a: String", 1, 19, "unterminated body"),
    ("node P { a: String /* open", 1, 20, "unterminated block comment"),
    ("node P @description(\"x) {}", 1, 21, "unterminated string"),
    ("node P @description(\"\\q\") {}", 1, 22, "unknown escape"),
    ("nod P {}", 1, 1, "expected 'node', 'edge' or 'interface'"),
    ("edge E A -> A", 1, 8, "expected ':'"),
    ("node P { a String }", 1, 12, "expected ':'"),
    ("node P { a: # }", 1, 13, "unexpected character '#'"),
];

#[test]
fn every_schema_error_has_its_position_and_an_actionable_message() {
    let mut failures = Vec::new();
    for (src, line, column, fragment) in ERRORS {
        match Schema::compile(src) {
            Ok(_) => failures.push(format!("{src:?}: compiled, expected an error")),
            Err(errors) => {
                let hit = errors.errors.iter().any(|e| e.line == *line && e.column == *column && e.message.contains(fragment));
                if !hit {
                    failures.push(format!("{src:?}: want {line}:{column} containing {fragment:?}, got:\n{errors}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn check_regexes_have_unicode_classes_and_case_folding() {
    let s = compile(r#"node P { a: String @check(a, "^\\w+$")  b: String? @check(b, "(?i)^straße$") }"#);
    let ok = omnigraph_validate_wasm::validate(
        &s,
        &omnigraph_validate_wasm::Options::default(),
        "{\"type\":\"P\",\"data\":{\"a\":\"héllo\",\"b\":\"STRASSE\"}}\n".as_bytes(),
    );
    // \w is Unicode-aware; (?i) folds simple case (ß does not fold to SS).
    assert_eq!(ok.errors.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["/data/b"]);
}

#[test]
fn several_errors_are_reported_at_once_in_order() {
    let errors = Schema::compile("node P { a: Foo  b: Bar }\nnode Q { _id: I32 }").unwrap_err();
    let positions: Vec<_> = errors.errors.iter().map(|e| (e.line, e.column)).collect();
    assert_eq!(positions, [(1, 13), (1, 21), (2, 10)]);
}

#[test]
fn oversized_schema_is_refused() {
    let huge = format!("node P {{ a: String }}\n{}", " ".repeat(omnigraph_validate_wasm::limits::MAX_SCHEMA_BYTES));
    assert!(Schema::compile(&huge).unwrap_err().errors[0].message.contains("limit"));
}

#[test]
fn deeply_nested_list_types_are_a_schema_error_not_a_stack_overflow() {
    // 100,000 levels fit in the schema size bound; the parser must not recurse per level.
    let source = format!("node T {{ a: {}I32{} }}", "[".repeat(100_000), "]".repeat(100_000));
    let errors = Schema::compile(&source).unwrap_err().to_string();
    assert!(errors.contains("list types nest at most 8 deep"), "{errors}");
}
