//! Syntax tree → [`Schema`]: name resolution, interfaces, constraints, the
//! canonical catalog and its hash. Collects every error it can find.
//!
//! One file of about 700 lines: resolution, interfaces and constraints are
//! one pass over the syntax tree sharing its scope tables; a file per phase
//! would pass them all between files.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::catalog::*;
use super::check::CheckRule;
use super::parser::{Annotation, Arg, Decl, DeclKind, PropDecl, TypeExpr, parse};
use super::types::*;
use crate::limits::{MAX_SCHEMA_BYTES, MAX_VECTOR_DIMENSION};
use crate::suggest::hint as suggest_in;
use crate::float::{format_f32, format_f64};
use crate::report::TableKind;

/// Metadata annotations whose single argument must be a string.
const STRING_METADATA: [&str; 4] = ["description", "instruction", "embed", "rename_from"];

struct Ctx {
    errors: Vec<SchemaError>,
}

impl Ctx {
    fn err(&mut self, span: Span, message: impl Into<String>) {
        self.errors.push(SchemaError::at(span, message));
    }
}

/// A property with everything its annotations said.
#[derive(Clone)]
struct Prop {
    name: String,
    ty: ValueType,
    nullable: bool,
    span: Span,
    key: bool,
    unique: bool,
    index: bool,
    metadata: Vec<CatalogAnnotation>,
}

/// Body/header constraints of a declaration, by property name.
#[derive(Clone, Default)]
struct Constraints {
    keys: Vec<(Vec<String>, Span)>,
    uniques: Vec<(Vec<String>, Span)>,
    indexes: Vec<Vec<String>>,
    ranges: Vec<(String, Option<String>, Option<String>, Span)>,
    checks: Vec<(String, String, Span)>,
    card: Option<(u64, Option<u64>)>,
    metadata: Vec<CatalogAnnotation>,
}

impl Constraints {
    /// Adds another declaration's constraints (an interface's, or the node's own).
    fn extend_from(&mut self, other: &Constraints) {
        self.keys.extend(other.keys.iter().cloned());
        self.uniques.extend(other.uniques.iter().cloned());
        self.indexes.extend(other.indexes.iter().cloned());
        self.ranges.extend(other.ranges.iter().cloned());
        self.checks.extend(other.checks.iter().cloned());
    }
}

/// A declaration after its own members are resolved (before interfaces are merged).
struct Resolved<'d> {
    decl: &'d Decl,
    props: Vec<Prop>,
    cons: Constraints,
}

pub fn compile(source: &str) -> Result<Schema, SchemaErrors> {
    if source.len() > MAX_SCHEMA_BYTES {
        return Err(SchemaErrors {
            errors: vec![SchemaError {
                line: 1,
                column: 1,
                message: format!("schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}", source.len()),
            }],
        });
    }
    let decls = parse(source).map_err(|e| SchemaErrors { errors: vec![e] })?;
    let mut cx = Ctx { errors: Vec::new() };

    let mut by_name: HashMap<&str, &Decl> = HashMap::new();
    let mut lower: HashMap<String, &Decl> = HashMap::new();
    for d in &decls {
        if let Some(first) = by_name.get(d.name.as_str()) {
            cx.err(d.span, format!("type '{}' is already declared at line {}", d.name, first.span.line));
            continue;
        }
        by_name.insert(&d.name, d);
        if d.kind != DeclKind::Interface {
            if let Some(first) = lower.get(&d.name.to_ascii_lowercase()) {
                cx.err(
                    d.span,
                    format!(
                        "{} '{}' differs from '{}' (line {}) only in case; table names must differ ignoring case",
                        d.kind.word(),
                        d.name,
                        first.name,
                        first.span.line
                    ),
                );
            }
            lower.insert(d.name.to_ascii_lowercase(), d);
        }
    }

    let resolved: Vec<Resolved> = decls.iter().map(|d| resolve_decl(&mut cx, d)).collect();
    let interfaces: HashMap<&str, &Resolved> =
        resolved.iter().filter(|r| r.decl.kind == DeclKind::Interface).map(|r| (r.decl.name.as_str(), r)).collect();

    let mut catalog = Catalog { format: 1, interfaces: Vec::new(), nodes: Vec::new(), edges: Vec::new() };
    let mut stored: Vec<(TypeDef, Vec<(String, Span)>)> = Vec::new();

    for r in &resolved {
        let d = r.decl;
        if by_name.get(d.name.as_str()).is_some_and(|first| !std::ptr::eq(*first, d)) {
            continue;
        }
        let (props, cons) = match d.kind {
            DeclKind::Node => merge_interfaces(&mut cx, r, &interfaces),
            _ => (r.props.clone(), r.cons.clone()),
        };
        let mut endpoints = Vec::new();
        if let Some((from, to)) = &d.endpoints {
            for (name, span) in [from, to] {
                match by_name.get(name.as_str()).map(|x| x.kind) {
                    Some(DeclKind::Node) => {}
                    Some(kind) => cx.err(*span, format!("edge endpoint '{name}' is an {}; endpoints must be node types", kind.word())),
                    None => cx.err(*span, format!("edge endpoint '{name}' is not declared{}", suggest_in(name, by_name.keys().copied()))),
                }
                endpoints.push((name.clone(), *span));
            }
        }
        let (def, cat) = build_type(&mut cx, d, props, cons);
        match d.kind {
            DeclKind::Interface => catalog.interfaces.push(cat),
            DeclKind::Node => {
                catalog.nodes.push(cat);
                stored.push((def, endpoints));
            }
            DeclKind::Edge => {
                catalog.edges.push(cat);
                stored.push((def, endpoints));
            }
        }
    }

    if !cx.errors.is_empty() {
        cx.errors.sort();
        cx.errors.dedup();
        return Err(SchemaErrors { errors: cx.errors });
    }

    for list in [&mut catalog.interfaces, &mut catalog.nodes, &mut catalog.edges] {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    stored.sort_by(|(a, _), (b, _)| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    let index: HashMap<String, usize> = stored.iter().enumerate().map(|(i, (t, _))| (t.name.clone(), i)).collect();
    let types: Vec<TypeDef> = stored
        .into_iter()
        .map(|(mut t, endpoints)| {
            if let [from, to] = endpoints.as_slice() {
                t.from = index.get(&from.0).copied();
                t.to = index.get(&to.0).copied();
            }
            t
        })
        .collect();

    let canonical = serde_json::to_string(&catalog).expect("catalog serializes");
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hash = String::with_capacity(71);
    hash.push_str("sha256:");
    for b in digest {
        hash.push_str(&format!("{b:02x}"));
    }
    let mut interfaces: Vec<String> = catalog.interfaces.iter().map(|i| i.name.clone()).collect();
    interfaces.sort();
    let sorted_types = name_order(&types, |t| &t.name);
    Ok(Schema { types, sorted_types, interfaces, catalog: LazyCatalog::Built(catalog), canonical, hash })
}

/// Resolves one declaration's own properties and annotations.
fn resolve_decl<'d>(cx: &mut Ctx, d: &'d Decl) -> Resolved<'d> {
    let mut props: Vec<Prop> = Vec::new();
    for p in &d.props {
        if let Some(first) = props.iter().find(|q| q.name == p.name) {
            cx.err(p.span, format!("property '{}' is already declared at line {}", p.name, first.span.line));
            continue;
        }
        if is_reserved(&p.name) {
            cx.err(
                p.span,
                format!("property name '{}' is reserved (system columns: {}); choose another name", p.name, RESERVED_NAMES.join(", ")),
            );
        }
        if let Some(prop) = resolve_prop(cx, p) {
            props.push(prop);
        }
    }
    let mut cons = Constraints::default();
    for a in &d.annotations {
        type_annotation(cx, d, a, &mut cons);
    }
    Resolved { decl: d, props, cons }
}

fn resolve_type(cx: &mut Ctx, t: &TypeExpr) -> Option<ValueType> {
    match t {
        TypeExpr::Named(name, span) => Some(match ValueType::named(name) {
            Some(ty) => ty,
            None => {
                let other = name.as_str();
                const KNOWN: [&str; 14] = [
                    "String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime", "Blob", "Vector", "enum", "[T]",
                ];
                cx.err(
                    *span,
                    format!("unknown type '{other}'{}; property types are {}", suggest_in(other, KNOWN.into_iter()), KNOWN.join(", ")),
                );
                return None;
            }
        }),
        TypeExpr::Vector(dim, span) => match dim.parse::<u32>() {
            Ok(n) if (1..=MAX_VECTOR_DIMENSION).contains(&n) => Some(ValueType::Vector(n)),
            _ => {
                cx.err(*span, format!("vector dimension {dim} is out of range; use 1 to {MAX_VECTOR_DIMENSION}"));
                None
            }
        },
        TypeExpr::Enum(values, _) => {
            let mut out: Vec<String> = Vec::new();
            for (v, vspan) in values {
                if out.contains(v) {
                    cx.err(*vspan, format!("enum value '{v}' is listed twice"));
                } else {
                    out.push(v.clone());
                }
            }
            Some(ValueType::Enum(out))
        }
        TypeExpr::List(inner, item_nullable, span) => {
            let item = resolve_type(cx, inner)?;
            if *item_nullable {
                cx.err(*span, "list items cannot be null: write [T] and make the list itself nullable with [T]?");
                return None;
            }
            match item {
                ValueType::Blob | ValueType::Vector(_) | ValueType::List(_) => {
                    cx.err(*span, format!("lists of {} are not supported; list items must be scalars other than Blob", item.canonical()));
                    None
                }
                item => Some(ValueType::List(Box::new(item))),
            }
        }
    }
}

fn resolve_prop(cx: &mut Ctx, p: &PropDecl) -> Option<Prop> {
    let ty = resolve_type(cx, &p.ty)?;
    let mut prop = Prop {
        name: p.name.clone(),
        ty,
        nullable: p.nullable,
        span: p.span,
        key: false,
        unique: false,
        index: false,
        metadata: Vec::new(),
    };
    for a in &p.annotations {
        let flag = match a.name.as_str() {
            "key" => Some(&mut prop.key),
            "unique" => Some(&mut prop.unique),
            "index" => Some(&mut prop.index),
            _ => None,
        };
        // The parser moved constraints with arguments to the body.
        match flag {
            Some(flag) => *flag = true,
            None => prop.metadata.push(metadata(cx, a)),
        }
    }
    Some(prop)
}

fn metadata(cx: &mut Ctx, a: &Annotation) -> CatalogAnnotation {
    if STRING_METADATA.contains(&a.name.as_str()) && !matches!(a.args.as_deref(), Some([Arg::Str(..)])) {
        cx.err(a.span, format!("@{} takes one string argument: @{}(\"…\")", a.name, a.name));
    }
    let args = a.args.as_ref().map(|args| {
        args.iter()
            .map(|arg| match arg {
                Arg::Word(w, _) | Arg::Str(w, _) | Arg::Num(w, _) => w.clone(),
                Arg::Range(lo, hi, _) => {
                    format!("{}..{}", lo.as_deref().unwrap_or(""), hi.as_deref().unwrap_or(""))
                }
            })
            .collect()
    });
    CatalogAnnotation { name: a.name.clone(), args }
}

/// Property names listed as words, e.g. `@key(a, b)`.
fn name_list(cx: &mut Ctx, a: &Annotation) -> Option<Vec<String>> {
    let Some(args) = a.args.as_ref().filter(|args| !args.is_empty()) else {
        cx.err(a.span, format!("@{} in a body names its properties: @{}(a, b)", a.name, a.name));
        return None;
    };
    let mut names: Vec<String> = Vec::new();
    for arg in args {
        match arg {
            Arg::Word(w, span) => {
                if names.contains(w) {
                    cx.err(*span, format!("'{w}' is listed twice in @{}", a.name));
                }
                names.push(w.clone());
            }
            other => {
                cx.err(other.span(), format!("@{} takes property names", a.name));
                return None;
            }
        }
    }
    Some(names)
}

fn type_annotation(cx: &mut Ctx, d: &Decl, a: &Annotation, cons: &mut Constraints) {
    match a.name.as_str() {
        "key" => {
            if d.kind == DeclKind::Edge {
                cx.err(a.span, "edges are identified by their id; @key is only for nodes (use @unique on an edge)");
            } else if let Some(names) = name_list(cx, a) {
                cons.keys.push((names, a.span));
            }
        }
        "unique" => {
            if let Some(names) = name_list(cx, a) {
                cons.uniques.push((names, a.span));
            }
        }
        "index" => {
            if let Some(names) = name_list(cx, a) {
                cons.indexes.push(names);
            }
        }
        "range" => match a.args.as_deref() {
            Some([Arg::Word(p, _), Arg::Range(lo, hi, _)]) if lo.is_some() || hi.is_some() => {
                cons.ranges.push((p.clone(), lo.clone(), hi.clone(), a.span));
            }
            _ => cx.err(a.span, "@range takes a property and bounds: @range(p, lo..hi), @range(p, lo..) or @range(p, ..hi)"),
        },
        "check" => match a.args.as_deref() {
            Some([Arg::Word(p, _), Arg::Str(re, _)]) => cons.checks.push((p.clone(), re.clone(), a.span)),
            _ => cx.err(a.span, "@check takes a property and a regex string: @check(p, \"^[a-z]+$\")"),
        },
        "card" => {
            if d.kind != DeclKind::Edge {
                cx.err(a.span, "@card limits edges per source node; it is only allowed on edges");
                return;
            }
            let parsed = match a.args.as_deref() {
                Some([Arg::Range(Some(lo), hi, _)]) => {
                    let lo = lo.parse::<u64>().ok();
                    let hi = match hi {
                        Some(h) => h.parse::<u64>().ok().map(Some),
                        None => Some(None),
                    };
                    lo.zip(hi)
                }
                _ => None,
            };
            match parsed {
                Some((lo, Some(hi))) if lo > hi => cx.err(a.span, format!("@card minimum {lo} is above its maximum {hi}")),
                // docs/rulebook.md: a source node and its edges may arrive in
                // different batches (split files send nodes first), so no
                // commit could be refused for a minimum without refusing
                // valid imports; a minimum that is never checked would be a lie.
                Some((lo, _)) if lo > 0 => cx.err(
                    a.span,
                    format!(
                        "@card minimum {lo} cannot be enforced at ingestion (a node and its edges may arrive in different \
                         batches); write @card(0..max) or @card(0..) and check minimums in queries"
                    ),
                ),
                Some(card) if cons.card.is_none() => cons.card = Some(card),
                Some(_) => cx.err(a.span, "@card is given twice"),
                None => cx.err(a.span, "@card takes non-negative integer bounds: @card(0..1) or @card(0..)"),
            }
        }
        _ => cons.metadata.push(metadata(cx, a)),
    }
}

/// A node's properties: its interfaces' first (in `implements` order), then
/// its own; a redeclared property keeps the interface's position and must
/// have the identical type.
fn merge_interfaces(cx: &mut Ctx, r: &Resolved, interfaces: &HashMap<&str, &Resolved>) -> (Vec<Prop>, Constraints) {
    let mut props: Vec<Prop> = Vec::new();
    let mut cons = Constraints::default();
    for (name, span) in &r.decl.implements {
        let Some(iface) = interfaces.get(name.as_str()) else {
            cx.err(
                *span,
                format!("'{name}' is not an interface{}", suggest_in(name, interfaces.keys().copied())),
            );
            continue;
        };
        for p in &iface.props {
            match props.iter_mut().find(|q| q.name == p.name) {
                Some(q) if q.ty != p.ty || q.nullable != p.nullable => cx.err(
                    *span,
                    format!("interfaces disagree on property '{}': {} vs {}", p.name, show(q), show(p)),
                ),
                Some(q) => merge_flags(q, p),
                None => props.push(p.clone()),
            }
        }
        cons.extend_from(&iface.cons);
    }
    for p in &r.props {
        match props.iter_mut().find(|q| q.name == p.name) {
            Some(q) if q.ty != p.ty || q.nullable != p.nullable => cx.err(
                p.span,
                format!("property '{}' redeclares an interface property as {}; it must be identical ({})", p.name, show(p), show(q)),
            ),
            Some(q) => merge_flags(q, p),
            None => props.push(p.clone()),
        }
    }
    cons.extend_from(&r.cons);
    // Type-level metadata is the node's own, not its interfaces'.
    cons.metadata = r.cons.metadata.clone();
    (props, cons)
}

fn merge_flags(into: &mut Prop, from: &Prop) {
    into.key |= from.key;
    into.unique |= from.unique;
    into.index |= from.index;
    for m in &from.metadata {
        if !into.metadata.contains(m) {
            into.metadata.push(m.clone());
        }
    }
}

fn show(p: &Prop) -> String {
    format!("{}{}", p.ty.canonical(), if p.nullable { "?" } else { "" })
}

fn push_unique(list: &mut Vec<Vec<String>>, item: Vec<String>) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Checks constraints against the final property list and builds the
/// runtime type and its catalog entry.
fn build_type(cx: &mut Ctx, d: &Decl, props: Vec<Prop>, cons: Constraints) -> (TypeDef, CatalogType) {
    let kind = if d.kind == DeclKind::Edge { TableKind::Edge } else { TableKind::Node };
    let prop_index: HashMap<String, usize> = props.iter().enumerate().map(|(i, p)| (p.name.clone(), i)).collect();
    let lookup = |cx: &mut Ctx, name: &str, span: Span, what: &str| -> Option<usize> {
        let found = prop_index.get(name).copied();
        if found.is_none() {
            cx.err(
                span,
                format!(
                    "{what} names '{name}', which is not a property of {} '{}'{}",
                    d.kind.word(),
                    d.name,
                    suggest_in(name, props.iter().map(|p| p.name.as_str()))
                ),
            );
        }
        found
    };

    // Keys: property-level flags form one key in property order.
    let mut keys: Vec<(Vec<String>, Span)> = Vec::new();
    let flagged: Vec<&Prop> = props.iter().filter(|p| p.key).collect();
    if !flagged.is_empty() {
        if d.kind == DeclKind::Edge {
            cx.err(flagged[0].span, "edges are identified by their id; @key is only for nodes (use @unique on an edge)");
        } else {
            keys.push((flagged.iter().map(|p| p.name.clone()).collect(), flagged[0].span));
        }
    }
    for k in cons.keys {
        if !keys.iter().any(|(names, _)| *names == k.0) {
            keys.push(k);
        }
    }
    if keys.len() > 1 {
        cx.err(keys[1].1, format!("{} '{}' has more than one @key; a node has at most one", d.kind.word(), d.name));
    }
    let mut key_idx = None;
    if let Some((names, span)) = keys.first() {
        let mut idx = Vec::new();
        for n in names {
            if let Some(i) = lookup(cx, n, *span, "@key") {
                let p = &props[i];
                if p.nullable || !p.ty.is_scalar() {
                    cx.err(
                        *span,
                        format!("key property '{}' is {}; keys must be non-nullable scalars (not lists, vectors or blobs)", n, show(p)),
                    );
                }
                idx.push(i);
            }
        }
        key_idx = Some(idx);
    }

    let mut unique_names: Vec<Vec<String>> = Vec::new();
    let mut uniques: Vec<Vec<UniqueMember>> = Vec::new();
    let prop_uniques = props.iter().filter(|p| p.unique).map(|p| (vec![p.name.clone()], p.span));
    for (names, span) in prop_uniques.collect::<Vec<_>>().into_iter().chain(cons.uniques) {
        if unique_names.contains(&names) {
            continue;
        }
        let mut members = Vec::new();
        for n in &names {
            match (prop_index.get(n), d.kind, n.as_str()) {
                (Some(i), _, _) => members.push(UniqueMember::Prop(*i)),
                (None, DeclKind::Edge, "src") => members.push(UniqueMember::Src),
                (None, DeclKind::Edge, "dst") => members.push(UniqueMember::Dst),
                _ => {
                    lookup(cx, n, span, "@unique");
                }
            }
        }
        if let Some(bad) = members.iter().find_map(|m| match m {
            UniqueMember::Prop(i) if !props[*i].ty.is_scalar() => Some(&props[*i]),
            _ => None,
        }) {
            cx.err(span, format!("@unique member '{}' is {}; unique members must be scalars", bad.name, show(bad)));
        }
        unique_names.push(names);
        uniques.push(members);
    }

    let mut index_names: Vec<Vec<String>> = Vec::new();
    for p in props.iter().filter(|p| p.index) {
        push_unique(&mut index_names, vec![p.name.clone()]);
    }
    for names in cons.indexes {
        for n in &names {
            let endpoint = d.kind == DeclKind::Edge && (n == "src" || n == "dst");
            if !endpoint && !prop_index.contains_key(n) {
                lookup(cx, n, d.span, "@index");
            }
        }
        push_unique(&mut index_names, names);
    }

    let mut ranges = Vec::new();
    let mut cat_ranges = Vec::new();
    for (name, lo, hi, span) in cons.ranges {
        let Some(i) = lookup(cx, &name, span, "@range") else { continue };
        let ty = &props[i].ty;
        if !ty.is_integer() && !ty.is_float() {
            cx.err(span, format!("@range needs a numeric property; '{name}' is {}", ty.canonical()));
            continue;
        }
        let min = lo.as_deref().and_then(|t| bound(cx, ty, t, span));
        let max = hi.as_deref().and_then(|t| bound(cx, ty, t, span));
        if lo.is_some() != min.is_some() || hi.is_some() != max.is_some() {
            continue;
        }
        if let (Some(a), Some(b)) = (&min, &max) {
            let inverted = match (a.0, b.0) {
                (Bound::Int(x), Bound::Int(y)) => x > y,
                (Bound::Float(x), Bound::Float(y)) => x > y,
                _ => false,
            };
            if inverted {
                cx.err(span, format!("@range({name}, …): lower bound {} is above upper bound {}", a.1, b.1));
                continue;
            }
        }
        let text = format!(
            "{}..{}",
            min.as_ref().map(|m| m.1.as_str()).unwrap_or(""),
            max.as_ref().map(|m| m.1.as_str()).unwrap_or("")
        );
        cat_ranges.push(CatalogRange {
            property: name.clone(),
            min: min.as_ref().map(|m| m.1.clone()),
            max: max.as_ref().map(|m| m.1.clone()),
        });
        ranges.push(RangeRule { prop: i, min: min.map(|m| m.0), max: max.map(|m| m.0), text });
    }

    let mut checks = Vec::new();
    let mut cat_checks = Vec::new();
    for (name, pattern, span) in cons.checks {
        let Some(i) = lookup(cx, &name, span, "@check") else { continue };
        if props[i].ty != ValueType::String {
            cx.err(span, format!("@check needs a String property; '{name}' is {}", props[i].ty.canonical()));
            continue;
        }
        if uses_unicode_property_class(&pattern) {
            cx.err(span, format!("@check({name}, …): Unicode property classes (\\p{{…}}) are not supported; use explicit character ranges"));
            continue;
        }
        match CheckRule::compile(i, pattern.clone()) {
            Ok(rule) => {
                cat_checks.push(CatalogCheck { property: name, pattern });
                checks.push(rule);
            }
            Err(e) => {
                let detail = e.to_string();
                let first = detail.lines().last().unwrap_or("invalid pattern").trim();
                cx.err(span, format!("@check({name}, …): invalid regex: {first}"));
            }
        }
    }

    let cat = CatalogType {
        name: d.name.clone(),
        from: d.endpoints.as_ref().map(|(f, _)| f.0.clone()),
        to: d.endpoints.as_ref().map(|(_, t)| t.0.clone()),
        implements: d.implements.iter().map(|(n, _)| n.clone()).collect(),
        properties: props
            .iter()
            .map(|p| CatalogProp { name: p.name.clone(), ty: p.ty.canonical(), nullable: p.nullable, metadata: p.metadata.clone() })
            .collect(),
        key: keys.first().map(|(names, _)| names.clone()),
        unique: unique_names,
        index: index_names,
        ranges: cat_ranges,
        checks: cat_checks,
        card: if d.kind == DeclKind::Edge {
            let (min, max) = cons.card.unwrap_or((0, None));
            Some(CatalogCard { min, max })
        } else {
            None
        },
        metadata: cons.metadata,
    };
    let prop_defs: Vec<PropDef> =
        props.iter().map(|p| PropDef { name: p.name.clone(), ty: p.ty.clone(), nullable: p.nullable }).collect();
    let def = TypeDef {
        kind,
        name: d.name.clone(),
        sorted_props: name_order(&prop_defs, |p| &p.name),
        props: prop_defs,
        key: key_idx,
        uniques,
        ranges,
        checks,
        card_max: cons.card.and_then(|c| c.1),
        from: None,
        to: None,
    };
    (def, cat)
}

/// True if the pattern names a Unicode property class (`\p{…}`, `\P{…}`).
/// Decided on the syntax tree, so it does not depend on which Unicode tables
/// a build happens to link (the artifact links none).
fn uses_unicode_property_class(pattern: &str) -> bool {
    use regex_syntax::ast::{Ast, ClassSetItem, Visitor, parse::Parser, visit};
    struct Finder;
    impl Visitor for Finder {
        type Output = ();
        type Err = ();
        fn finish(self) -> Result<(), ()> {
            Ok(())
        }
        fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
            if matches!(ast, Ast::ClassUnicode(_)) { Err(()) } else { Ok(()) }
        }
        fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), ()> {
            if matches!(item, ClassSetItem::Unicode(_)) { Err(()) } else { Ok(()) }
        }
    }
    // A pattern that does not parse is reported by the regex builder.
    Parser::new().parse(pattern).is_ok_and(|ast| visit(&ast, Finder).is_err())
}

/// A range bound typed like the property, with its canonical text.
fn bound(cx: &mut Ctx, ty: &ValueType, text: &str, span: Span) -> Option<(Bound, String)> {
    if ty.is_integer() {
        match text.parse::<i128>() {
            Ok(v) => Some((Bound::Int(v), v.to_string())),
            Err(_) => {
                cx.err(span, format!("@range bound {text} must be an integer for a {} property", ty.canonical()));
                None
            }
        }
    } else if *ty == ValueType::F32 {
        // `+ 0.0` turns −0 into +0: the canonical text writes both as `0`,
        // and a compiled form, which keeps the text, must read back the
        // same bound.
        match text.parse::<f32>().map(|v| v + 0.0) {
            Ok(v) if v.is_finite() => Some((Bound::Float(v as f64), format_f32(v))),
            _ => {
                cx.err(span, format!("@range bound {text} is not a finite F32"));
                None
            }
        }
    } else {
        match text.parse::<f64>().map(|v| v + 0.0) {
            Ok(v) if v.is_finite() => Some((Bound::Float(v), format_f64(v))),
            _ => {
                cx.err(span, format!("@range bound {text} is not a finite F64"));
                None
            }
        }
    }
}

