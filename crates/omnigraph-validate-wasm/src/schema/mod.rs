//! The schema language (SPEC §1): `.pg` source → compiled [`Schema`] with a
//! canonical catalog and its hash. More in lib.rs.

mod catalog;
mod check;
mod compile;
mod compiled;
mod lexer;
mod parser;
mod types;

pub use catalog::{Catalog, CatalogAnnotation, CatalogCard, CatalogCheck, CatalogProp, CatalogRange, CatalogType};
pub use types::{
    Bound, CompiledFormError, PropDef, RESERVED_NAMES, RangeRule, Schema, SchemaError, SchemaErrors, TypeDef, UniqueMember,
    ValueType, is_reserved,
};

/// What needs the compiler or the compiled form (the types above them do not).
impl Schema {
    /// Compiles `.pg` source. Every `@check` pattern is checked here.
    pub fn compile(source: &str) -> Result<Schema, SchemaErrors> {
        compile::compile(source)
    }

    /// The compiled form of this schema ([`Schema::from_compiled`] reads it
    /// back): what a host keeps so that no batch compiles the source again.
    pub fn compiled_form(&self) -> Vec<u8> {
        compiled::write(self)
    }

    /// A schema from its [`Schema::compiled_form`], without the source: no
    /// parsing, no hashing, regexes built when first used.
    pub fn from_compiled(form: &[u8]) -> Result<Schema, CompiledFormError> {
        compiled::read(form)
    }

    pub fn catalog(&self) -> &Catalog {
        self.catalog.get()
    }
}

#[cfg(test)]
mod tests {
    use super::types::LINEAR_LOOKUP_MAX;
    use super::*;

    /// Types and properties past [`LINEAR_LOOKUP_MAX`] are found by binary
    /// search over [`name_order`], in a schema compiled from source and in
    /// one read from its compiled form; validating reads no owned catalog.
    #[test]
    fn large_schemas_find_every_name_both_ways() {
        let n = LINEAR_LOOKUP_MAX + 6;
        // Names whose order differs from their declaration order.
        let name = |i: usize| format!("{}{i}", (b'z' - (i % 26) as u8) as char);
        let source: String = (0..n)
            .map(|t| {
                let props: String = (0..n).map(|p| format!("{}: I32? ", name(p))).collect();
                format!("node T{} {{ id: String @key {props}}}\n", name(t))
            })
            .collect();
        let compiled = Schema::compile(&source).unwrap();
        let read = Schema::from_compiled(&compiled.compiled_form()).unwrap();
        for schema in [&compiled, &read] {
            assert!(schema.types.len() > LINEAR_LOOKUP_MAX && schema.types[0].props.len() > LINEAR_LOOKUP_MAX);
            for (i, t) in schema.types.iter().enumerate() {
                assert_eq!(schema.type_index(&t.name), Some(i));
                for (j, p) in t.props.iter().enumerate() {
                    assert_eq!(t.prop(&p.name), Some(j), "{}.{}", t.name, p.name);
                }
                assert_eq!(t.prop("absent"), None);
            }
            assert_eq!(schema.type_index("Tabsent"), None);
        }
        let batch = format!("{{\"type\":\"T{}\",\"data\":{{\"id\":\"a\",\"{}\":1}}}}\n", name(7), name(9));
        let report = crate::validate(&read, &crate::Options::default(), batch.as_bytes());
        assert!(report.ok, "{}", report.to_json());
        assert!(!read.catalog.is_decoded(), "validation decodes no owned catalog");
        assert_eq!(read.catalog(), compiled.catalog());
        assert_eq!(read.compiled_form(), compiled.compiled_form());
    }
}
