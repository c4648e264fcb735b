//! The compiled form of a schema: its catalog (SPEC §1.5, which holds every
//! resolved type, property and constraint) in a compact binary encoding,
//! with the canonical JSON and the schema hash beside it, behind a header
//! naming the validator version. Reading it back rebuilds the same
//! [`Schema`] without parsing `.pg` source, JSON or hashing, so a host that
//! keeps it pays none of that per batch (ABI `og_*_compiled`).
//!
//! Reading a form allocates little: the catalog is read as text borrowed
//! from the form (`Catalog<&str>`), the [`Schema`]'s types are built from
//! that, and the owned [`Catalog`] is decoded only if someone asks for it
//! ([`LazyCatalog`]; validation never does). The host's fresh instance
//! reads a form for every batch, and for a 1-line batch the allocations
//! of reading it were a large part of the batch's cost.
//!
//! `tests/vectors.rs` checks that every schema of the conformance corpus
//! read back gives byte-identical reports, natively; `tests/parity.rs` of
//! the host does the same in wasmtime.

use std::sync::OnceLock;

use super::catalog::{Catalog, CatalogAnnotation, CatalogCard, CatalogCheck, CatalogProp, CatalogRange, CatalogType};
use super::check::CheckRule;
use super::types::{
    Bound, CompiledFormError, LazyCatalog, PropDef, RangeRule, Schema, TypeDef, UniqueMember, ValueType, name_order,
};
use crate::VALIDATOR_VERSION;
use crate::report::TableKind;

/// First word of the header; the number is this layout's version.
const MAGIC: &str = "omnigraph-compiled-schema/1";

/// `<MAGIC> <validator version> <schema hash>\n`, the canonical JSON, then
/// the catalog (see [`Encoded`]).
pub fn write(schema: &Schema) -> Vec<u8> {
    let mut out = format!("{MAGIC} {VALIDATOR_VERSION} {}\n", schema.hash).into_bytes();
    schema.canonical.put(&mut out);
    schema.catalog.put(&mut out);
    out
}

pub fn read(form: &[u8]) -> Result<Schema, CompiledFormError> {
    let bad = |why: &str| CompiledFormError(why.to_owned());
    let newline = form.iter().position(|&b| b == b'\n').ok_or_else(|| bad("no header"))?;
    let header = std::str::from_utf8(&form[..newline]).map_err(|_| bad("header is not UTF-8"))?;
    let mut words = header.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(bad("unknown layout"));
    }
    if words.next() != Some(VALIDATOR_VERSION) {
        return Err(bad("made by another validator version"));
    }
    let hash = words.next().filter(|h| h.starts_with("sha256:") && h.len() == 71).ok_or_else(|| bad("no schema hash"))?;
    if words.next().is_some() {
        return Err(bad("trailing header words"));
    }
    let mut reader = Reader { rest: &form[newline + 1..] };
    let canonical = <&str>::take(&mut reader)?;
    let encoded_catalog = reader.rest;
    let catalog = Catalog::<&str>::take(&mut reader)?;
    if !reader.rest.is_empty() {
        return Err(bad("trailing bytes"));
    }
    if catalog.format != 1 {
        return Err(bad("unknown catalog format"));
    }
    let encoded = LazyCatalog::Encoded { bytes: encoded_catalog.to_vec(), decoded: OnceLock::new() };
    from_catalog(&catalog, encoded, canonical.to_owned(), hash.to_owned())
}

impl LazyCatalog {
    /// Whether the owned catalog exists (built, or decoded since).
    #[cfg(test)]
    pub fn is_decoded(&self) -> bool {
        match self {
            LazyCatalog::Built(_) => true,
            LazyCatalog::Encoded { decoded, .. } => decoded.get().is_some(),
        }
    }

    pub fn get(&self) -> &Catalog {
        match self {
            LazyCatalog::Built(catalog) => catalog,
            LazyCatalog::Encoded { bytes, decoded } => decoded.get_or_init(|| {
                Catalog::take(&mut Reader { rest: bytes }).expect("the catalog read as borrowed text reads as owned")
            }),
        }
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            LazyCatalog::Built(catalog) => catalog.put(out),
            LazyCatalog::Encoded { bytes, .. } => out.extend_from_slice(bytes),
        }
    }
}

/// What is left of a compiled form to read.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], CompiledFormError> {
        if self.rest.len() < n {
            return Err(CompiledFormError("truncated".into()));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }
}

/// A value in the compiled form: integers little-endian, a string or list
/// as its `u32` length then its bytes or items, an option as a 0/1 byte
/// then the value, a struct as its fields in declaration order. Text reads
/// as `&'a str` borrowed from the form, or as an owned `String`.
trait Encoded<'a>: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError>;
}

impl Encoded<'_> for u32 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(r: &mut Reader) -> Result<Self, CompiledFormError> {
        Ok(u32::from_le_bytes(r.bytes(4)?.try_into().expect("4 bytes")))
    }
}

impl Encoded<'_> for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(r: &mut Reader) -> Result<Self, CompiledFormError> {
        Ok(u64::from_le_bytes(r.bytes(8)?.try_into().expect("8 bytes")))
    }
}

impl Encoded<'_> for bool {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self as u8);
    }
    fn take(r: &mut Reader) -> Result<Self, CompiledFormError> {
        match r.bytes(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CompiledFormError("bad flag".into())),
        }
    }
}

impl<'a> Encoded<'a> for &'a str {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u32).put(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError> {
        let len = u32::take(r)? as usize;
        std::str::from_utf8(r.bytes(len)?).map_err(|_| CompiledFormError("text is not UTF-8".into()))
    }
}

impl<'a> Encoded<'a> for String {
    fn put(&self, out: &mut Vec<u8>) {
        self.as_str().put(out);
    }
    fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError> {
        <&str>::take(r).map(str::to_owned)
    }
}

impl<'a, T: Encoded<'a>> Encoded<'a> for Option<T> {
    fn put(&self, out: &mut Vec<u8>) {
        self.is_some().put(out);
        if let Some(v) = self {
            v.put(out);
        }
    }
    fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError> {
        Ok(if bool::take(r)? { Some(T::take(r)?) } else { None })
    }
}

impl<'a, T: Encoded<'a>> Encoded<'a> for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u32).put(out);
        for v in self {
            v.put(out);
        }
    }
    fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError> {
        let len = u32::take(r)? as usize;
        // Every item takes at least a byte: a forged length cannot reserve
        // more than the form holds.
        let mut items = Vec::with_capacity(len.min(r.rest.len()));
        for _ in 0..len {
            items.push(T::take(r)?);
        }
        Ok(items)
    }
}

/// [`Encoded`] for a struct: its fields in order (`<S>`: generic in its text).
macro_rules! encoded_struct {
    ($name:ident <S> { $($field:ident),* }) => {
        impl<'a, S: Encoded<'a>> Encoded<'a> for $name<S> {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$field.put(out);)*
            }
            fn take(r: &mut Reader<'a>) -> Result<Self, CompiledFormError> {
                Ok($name { $($field: Encoded::take(r)?),* })
            }
        }
    };
    ($name:ident { $($field:ident),* }) => {
        impl Encoded<'_> for $name {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$field.put(out);)*
            }
            fn take(r: &mut Reader) -> Result<Self, CompiledFormError> {
                Ok($name { $($field: Encoded::take(r)?),* })
            }
        }
    };
}

encoded_struct!(Catalog<S> { format, interfaces, nodes, edges });
encoded_struct!(CatalogType<S> { name, from, to, implements, properties, key, unique, index, ranges, checks, card, metadata });
encoded_struct!(CatalogProp<S> { name, ty, nullable, metadata });
encoded_struct!(CatalogRange<S> { property, min, max });
encoded_struct!(CatalogCheck<S> { property, pattern });
encoded_struct!(CatalogCard { min, max });
encoded_struct!(CatalogAnnotation<S> { name, args });

/// The [`Schema`] `compile` built for this catalog (`encoded`, which it
/// keeps): nodes then edges, each sorted by name (the catalog's order),
/// properties as resolved.
fn from_catalog(
    catalog: &Catalog<&str>,
    encoded: LazyCatalog,
    canonical: String,
    hash: String,
) -> Result<Schema, CompiledFormError> {
    let stored: Vec<(TableKind, &CatalogType<&str>)> = catalog
        .nodes
        .iter()
        .map(|t| (TableKind::Node, t))
        .chain(catalog.edges.iter().map(|t| (TableKind::Edge, t)))
        .collect();
    let order = name_order(&stored, |(_, t)| t.name);
    let endpoint = |name: Option<&str>| -> Result<Option<usize>, CompiledFormError> {
        name.map(|n| {
            let at = order.binary_search_by(|&i| stored[i].1.name.cmp(n));
            at.map(|at| order[at]).map_err(|_| CompiledFormError(format!("unknown endpoint type {n}")))
        })
        .transpose()
    };
    let mut types = Vec::with_capacity(stored.len());
    for &(kind, t) in &stored {
        let mut def = type_def(kind, t)?;
        def.from = endpoint(t.from)?;
        def.to = endpoint(t.to)?;
        types.push(def);
    }
    let mut interfaces: Vec<String> = catalog.interfaces.iter().map(|i| i.name.to_owned()).collect();
    interfaces.sort();
    Ok(Schema { types, sorted_types: order, interfaces, catalog: encoded, canonical, hash })
}

fn type_def(kind: TableKind, t: &CatalogType<&str>) -> Result<TypeDef, CompiledFormError> {
    let bad = |what: String| CompiledFormError(format!("type {}: {what}", t.name));
    let props: Vec<PropDef> = t
        .properties
        .iter()
        .map(|p| {
            let ty = value_type(p.ty).ok_or_else(|| bad(format!("unknown property type {}", p.ty)))?;
            Ok(PropDef { name: p.name.to_owned(), ty, nullable: p.nullable })
        })
        .collect::<Result<_, CompiledFormError>>()?;
    let prop = |name: &str| {
        props.iter().position(|p| p.name == name).ok_or_else(|| bad(format!("unknown property {name}")))
    };
    let key = t.key.as_ref().map(|names| names.iter().map(|n| prop(n)).collect::<Result<Vec<_>, _>>()).transpose()?;
    let uniques = t
        .unique
        .iter()
        .map(|names| {
            names
                .iter()
                .map(|&n| match (prop(n), kind, n) {
                    (Ok(i), _, _) => Ok(UniqueMember::Prop(i)),
                    (Err(_), TableKind::Edge, "src") => Ok(UniqueMember::Src),
                    (Err(_), TableKind::Edge, "dst") => Ok(UniqueMember::Dst),
                    (Err(e), _, _) => Err(e),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ranges = t
        .ranges
        .iter()
        .map(|r| {
            let i = prop(r.property)?;
            let bound = |text: Option<&str>| {
                text.map(|s| range_bound(&props[i].ty, s).ok_or_else(|| bad(format!("bad bound {s}")))).transpose()
            };
            let text = format!("{}..{}", r.min.unwrap_or(""), r.max.unwrap_or(""));
            Ok(RangeRule { prop: i, min: bound(r.min)?, max: bound(r.max)?, text })
        })
        .collect::<Result<Vec<_>, CompiledFormError>>()?;
    let checks = t
        .checks
        .iter()
        .map(|c| Ok(CheckRule::accepted(prop(c.property)?, c.pattern.to_owned())))
        .collect::<Result<Vec<_>, CompiledFormError>>()?;
    Ok(TypeDef {
        kind,
        name: t.name.to_owned(),
        sorted_props: name_order(&props, |p| &p.name),
        props,
        key,
        uniques,
        ranges,
        checks,
        card_max: t.card.as_ref().and_then(|c| c.max),
        from: None,
        to: None,
    })
}

/// A bound in its canonical text, typed like `compile` typed it.
fn range_bound(ty: &ValueType, text: &str) -> Option<Bound> {
    match ty {
        ty if ty.is_integer() => text.parse::<i128>().ok().map(Bound::Int),
        ValueType::F32 => text.parse::<f32>().ok().map(|v| Bound::Float(v as f64)),
        ValueType::F64 => text.parse::<f64>().ok().map(Bound::Float),
        _ => None,
    }
}

/// The inverse of [`ValueType::canonical`].
fn value_type(text: &str) -> Option<ValueType> {
    if let Some(scalar) = ValueType::named(text) {
        return Some(scalar);
    }
    Some(if let Some(n) = text.strip_prefix("Vector(").and_then(|t| t.strip_suffix(')')) {
        ValueType::Vector(n.parse().ok()?)
    } else if let Some(values) = text.strip_prefix("enum(").and_then(|t| t.strip_suffix(')')) {
        ValueType::Enum(values.split(", ").map(str::to_owned).collect())
    } else {
        let item = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'))?;
        ValueType::List(Box::new(value_type(item)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_type_reads_back_from_its_canonical_spelling() {
        let all = [
            "String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime", "Blob", "Vector(3)",
            "enum(a, b-c, D_1)", "[String]", "[enum(x, y)]", "[Date]",
        ];
        for text in all {
            assert_eq!(value_type(text).map(|t| t.canonical()).as_deref(), Some(text));
        }
        for bad in ["Str", "Vector(x)", "[Blob", "enum(a"] {
            assert_eq!(value_type(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_form_reads_back_to_the_same_schema() {
        let source = include_str!("../../../../samples/people.pg");
        let schema = Schema::compile(source).unwrap();
        let back = Schema::from_compiled(&schema.compiled_form()).unwrap();
        assert_eq!(back.hash(), schema.hash());
        assert_eq!(back.canonical_json(), schema.canonical_json());
        assert_eq!(back.catalog(), schema.catalog());
        assert_eq!(format!("{:?}", back.types), format!("{:?}", schema.types));
        assert_eq!(back.sorted_types, schema.sorted_types);
        assert_eq!(back.interfaces, schema.interfaces);
    }

    proptest::proptest! {
        // Any damage to a form is refused or read, never a panic or an
        // allocation the form's size does not bound.
        #[test]
        fn damaged_forms_never_panic(at in 0usize..4096, byte in proptest::prelude::any::<u8>(), cut in 0usize..4096) {
            let mut form = Schema::compile(include_str!("../../../../samples/people.pg")).unwrap().compiled_form();
            let at = at % form.len();
            form[at] = byte;
            form.truncate(form.len() - cut % form.len());
            let _ = Schema::from_compiled(&form);
        }
    }

    /// `form` with the first (or last) `from` replaced by `to`.
    fn replaced(form: &[u8], from: &[u8], to: &[u8], last: bool) -> Vec<u8> {
        let mut hits = form.windows(from.len()).enumerate().filter(|(_, w)| *w == from).map(|(i, _)| i);
        let at = if last { hits.next_back() } else { hits.next() }.expect("present");
        [&form[..at], to, &form[at + from.len()..]].concat()
    }

    /// The schema fuzz target's finding: `-0` compiled to a bound of −0.0
    /// whose canonical text is `0`, so the form read back held +0.0 (equal in
    /// every comparison, but not the same schema).
    #[test]
    fn negative_zero_bounds_read_back_as_compiled() {
        let source = "node M { id: String @key  x: F32?  y: F64?  @range(x, -0..-0.0)  @range(y, -0.000..) }";
        let schema = Schema::compile(source).unwrap();
        let back = Schema::from_compiled(&schema.compiled_form()).unwrap();
        assert_eq!(format!("{:?}", back.types), format!("{:?}", schema.types));
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        let form = Schema::compile("node P { name: String @key }").unwrap().compiled_form();
        for (bad, why) in [
            (b"".to_vec(), "no header"),
            (b"\xff\n{}".to_vec(), "not UTF-8"),
            (replaced(&form, MAGIC.as_bytes(), b"other/1", false), "unknown layout"),
            (replaced(&form, VALIDATOR_VERSION.as_bytes(), b"0.0.0-other", false), "another validator version"),
            (replaced(&form, b"sha256:", b"md5:", false), "no schema hash"),
            (form[..form.len() - 1].to_vec(), "truncated"),
            ([&form[..], b"x"].concat(), "trailing bytes"),
            // The last "String" is the property's type in the binary catalog.
            (replaced(&form, b"String", b"Strong", true), "unknown property type"),
        ] {
            let err = Schema::from_compiled(&bad).err().unwrap_or_else(|| panic!("accepted: {why}"));
            assert!(err.0.contains(why), "{err} should say {why}");
        }
    }
}
