//! The compiled catalog in its canonical JSON form (SPEC §1.5). Field order
//! is the struct order; types are sorted by name; nothing positional (lines,
//! columns) is included, so whitespace and comments never change the hash.
//! It is complete: a compiled schema is rebuilt from it (`compiled.rs`).
//!
//! Its text is `S`: owned `String`s as `compile` builds it, or `&str`s
//! borrowed from a compiled form that `compiled.rs` reads without copying.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Catalog<S = String> {
    /// Version of this JSON form.
    pub format: u32,
    pub interfaces: Vec<CatalogType<S>>,
    pub nodes: Vec<CatalogType<S>>,
    pub edges: Vec<CatalogType<S>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogType<S = String> {
    pub name: S,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<S>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<S>,
    pub implements: Vec<S>,
    pub properties: Vec<CatalogProp<S>>,
    pub key: Option<Vec<S>>,
    pub unique: Vec<Vec<S>>,
    pub index: Vec<Vec<S>>,
    pub ranges: Vec<CatalogRange<S>>,
    pub checks: Vec<CatalogCheck<S>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<CatalogCard>,
    pub metadata: Vec<CatalogAnnotation<S>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogProp<S = String> {
    pub name: S,
    #[serde(rename = "type")]
    pub ty: S,
    pub nullable: bool,
    pub metadata: Vec<CatalogAnnotation<S>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogRange<S = String> {
    pub property: S,
    pub min: Option<S>,
    pub max: Option<S>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogCheck<S = String> {
    pub property: S,
    pub pattern: S,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogCard {
    pub min: u64,
    pub max: Option<u64>,
}

/// A metadata annotation (`@description`, `@embed`, unknown ones…) with its
/// arguments rendered as text (`lo..hi` for ranges).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogAnnotation<S = String> {
    pub name: S,
    pub args: Option<Vec<S>>,
}
