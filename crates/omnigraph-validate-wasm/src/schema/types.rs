//! The compiled schema's types: what validation reads (`Schema`,
//! `TypeDef`, `ValueType`, the constraints) and a schema's errors. Below
//! the compiler (`compile.rs`), the compiled form (`compiled.rs`) and the
//! lexer and parser, which build them; `mod.rs` re-exports them.

use std::sync::OnceLock;

use serde::Serialize;

use super::catalog::Catalog;
use super::check::CheckRule;
use crate::report::TableKind;

/// 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span {
    pub line: u32,
    pub column: u32,
}

/// A schema's catalog: the one `compile` built, or a compiled form's
/// encoding of it, decoded when first asked for (a batch never asks, so
/// the artifact, whose exports never ask, carries no owned decoder).
#[derive(Debug, Clone)]
pub enum LazyCatalog {
    Built(Catalog),
    Encoded {
        /// The `Encoded` catalog (compiled.rs), which `compiled::read` has read once already.
        bytes: Vec<u8>,
        decoded: OnceLock<Catalog>,
    },
}

/// Names no property or envelope member may use: the envelope's columns and
/// Lance's system columns (SPEC §1.4).
pub const RESERVED_NAMES: [&str; 9] = [
    "_id",
    "_src",
    "_dst",
    "_rowid",
    "_rowaddr",
    "_rowoffset",
    "_row_created_at_version",
    "_row_last_updated_at_version",
    "_tombstone",
];

pub fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.contains(&name)
}

/// One schema error, with a 1-based line and column (in characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SchemaError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl SchemaError {
    pub(crate) fn at(span: Span, message: impl Into<String>) -> Self {
        SchemaError { line: span.line, column: span.column, message: message.into() }
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Every error found in a schema, ordered by position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaErrors {
    pub errors: Vec<SchemaError>,
}

impl std::fmt::Display for SchemaErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, e) in self.errors.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SchemaErrors {}

/// A buffer that is not a [`Schema::compiled_form`] of this validator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledFormError(pub String);

impl std::fmt::Display for CompiledFormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a compiled schema of this validator: {}", self.0)
    }
}

impl std::error::Error for CompiledFormError {}

/// The value types of SPEC §1.3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    String,
    Bool,
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Date,
    DateTime,
    Blob,
    /// `Vector(n)`: exactly n finite Float32 values.
    Vector(u32),
    /// `enum(a, b, …)`, values in written order.
    Enum(Vec<String>),
    /// `[T]`: T is neither a list, a vector nor a blob; items are never null.
    List(Box<ValueType>),
}

impl ValueType {
    /// The scalar type a name spells (`String`, `I32`, …): how `.pg` source
    /// and the catalog both write it.
    pub(crate) fn named(name: &str) -> Option<ValueType> {
        Some(match name {
            "String" => ValueType::String,
            "Bool" => ValueType::Bool,
            "I32" => ValueType::I32,
            "I64" => ValueType::I64,
            "U32" => ValueType::U32,
            "U64" => ValueType::U64,
            "F32" => ValueType::F32,
            "F64" => ValueType::F64,
            "Date" => ValueType::Date,
            "DateTime" => ValueType::DateTime,
            "Blob" => ValueType::Blob,
            _ => return None,
        })
    }

    /// The canonical spelling used in the catalog and in messages.
    pub fn canonical(&self) -> String {
        match self {
            ValueType::String => "String".into(),
            ValueType::Bool => "Bool".into(),
            ValueType::I32 => "I32".into(),
            ValueType::I64 => "I64".into(),
            ValueType::U32 => "U32".into(),
            ValueType::U64 => "U64".into(),
            ValueType::F32 => "F32".into(),
            ValueType::F64 => "F64".into(),
            ValueType::Date => "Date".into(),
            ValueType::DateTime => "DateTime".into(),
            ValueType::Blob => "Blob".into(),
            ValueType::Vector(n) => format!("Vector({n})"),
            ValueType::Enum(values) => format!("enum({})", values.join(", ")),
            ValueType::List(item) => format!("[{}]", item.canonical()),
        }
    }

    pub fn is_integer(&self) -> bool {
        matches!(self, ValueType::I32 | ValueType::I64 | ValueType::U32 | ValueType::U64)
    }

    pub fn is_float(&self) -> bool {
        matches!(self, ValueType::F32 | ValueType::F64)
    }

    /// Scalars can be keys: not a list, vector or blob.
    pub fn is_scalar(&self) -> bool {
        !matches!(self, ValueType::List(_) | ValueType::Vector(_) | ValueType::Blob)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PropDef {
    pub name: String,
    pub ty: ValueType,
    pub nullable: bool,
}

/// A member of a `@unique` tuple: a property, or (on edges) an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniqueMember {
    Prop(usize),
    Src,
    Dst,
}

/// A `@range` bound, typed like its property so comparison is exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Int(i128),
    Float(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RangeRule {
    pub prop: usize,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    /// The bounds as written in the catalog, for messages.
    pub text: String,
}

/// Up to this many properties, a linear scan beats a binary search.
pub(super) const LINEAR_LOOKUP_MAX: usize = 24;

/// A stored node or edge type, ready for validation.
#[derive(Debug, Clone)]
pub struct TypeDef {
    pub kind: TableKind,
    pub name: String,
    pub props: Vec<PropDef>,
    /// Indexes into `props` in the order of their names ([`name_order`]), for
    /// lookups whose cost does not depend on hashing (no hash flooding).
    pub sorted_props: Vec<usize>,
    /// Key properties in `@key(…)` order (nodes only).
    pub key: Option<Vec<usize>>,
    pub uniques: Vec<Vec<UniqueMember>>,
    pub ranges: Vec<RangeRule>,
    pub checks: Vec<CheckRule>,
    /// `@card` maximum edges per source node (edges only).
    pub card_max: Option<u64>,
    /// Endpoint node types, as indexes into [`Schema::types`] (edges only).
    pub from: Option<usize>,
    pub to: Option<usize>,
}

impl TypeDef {
    /// The index of property `name`. Every member of every record is looked
    /// up here: small types scan (length first), large ones binary-search.
    pub fn prop(&self, name: &str) -> Option<usize> {
        if self.props.len() <= LINEAR_LOOKUP_MAX {
            let (len, first) = (name.len(), name.as_bytes().first());
            return self.props.iter().position(|p| p.name.len() == len && p.name.as_bytes().first() == first && p.name == name);
        }
        let at = self.sorted_props.binary_search_by(|&i| self.props[i].name.as_str().cmp(name)).ok()?;
        Some(self.sorted_props[at])
    }
}

/// Indexes into `items` in the order of their names: what a binary search
/// by name walks (`TypeDef::sorted_props`, `Schema::sorted_types`).
pub(super) fn name_order<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<usize> {
    order_of(items.iter().map(name).collect())
}

/// [`name_order`]'s sort, one copy of it in the artifact for every caller.
fn order_of(names: Vec<&str>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_unstable_by_key(|&i| names[i]);
    order
}

/// A compiled schema. Types are ordered nodes first, then edges, each by name.
#[derive(Debug, Clone)]
pub struct Schema {
    pub types: Vec<TypeDef>,
    /// Indexes into `types` in the order of their names ([`name_order`]).
    pub(super) sorted_types: Vec<usize>,
    pub(super) interfaces: Vec<String>,
    pub(super) catalog: LazyCatalog,
    pub(super) canonical: String,
    pub(super) hash: String,
}

impl Schema {
    pub fn type_index(&self, name: &str) -> Option<usize> {
        // Called twice per record: a scan for typical schemas, else a binary search.
        if self.types.len() <= LINEAR_LOOKUP_MAX {
            let (len, first) = (name.len(), name.as_bytes().first());
            return self.types.iter().position(|t| t.name.len() == len && t.name.as_bytes().first() == first && t.name == name);
        }
        let at = self.sorted_types.binary_search_by(|&i| self.types[i].name.as_str().cmp(name)).ok()?;
        Some(self.sorted_types[at])
    }

    pub fn is_interface(&self, name: &str) -> bool {
        self.interfaces.iter().any(|i| i == name)
    }

    /// The catalog's canonical JSON (SPEC §1.5).
    pub fn canonical_json(&self) -> &str {
        &self.canonical
    }

    /// `sha256:<hex>` of [`Schema::canonical_json`].
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

