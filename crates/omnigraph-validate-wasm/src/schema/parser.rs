//! `.pg` source → syntax tree (SPEC §1.2). Meaning is checked in `compile`.

use super::lexer::{Lexer, Tok};
use super::types::{SchemaError, Span};
use crate::limits::MAX_TYPE_NESTING;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclKind {
    Interface,
    Node,
    Edge,
}

impl DeclKind {
    pub fn word(self) -> &'static str {
        match self {
            DeclKind::Interface => "interface",
            DeclKind::Node => "node",
            DeclKind::Edge => "edge",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    Named(String, Span),
    Vector(String, Span),
    List(Box<TypeExpr>, bool, Span),
    Enum(Vec<(String, Span)>, Span),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Word(String, Span),
    Str(String, Span),
    Num(String, Span),
    Range(Option<String>, Option<String>, Span),
}

impl Arg {
    pub fn span(&self) -> Span {
        match self {
            Arg::Word(_, s) | Arg::Str(_, s) | Arg::Num(_, s) | Arg::Range(_, _, s) => *s,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub name: String,
    pub args: Option<Vec<Arg>>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PropDecl {
    pub name: String,
    pub ty: TypeExpr,
    pub nullable: bool,
    pub annotations: Vec<Annotation>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    pub kind: DeclKind,
    pub name: String,
    pub span: Span,
    pub implements: Vec<(String, Span)>,
    pub endpoints: Option<((String, Span), (String, Span))>,
    /// Annotations on the declaration's header and in its body.
    pub annotations: Vec<Annotation>,
    pub props: Vec<PropDecl>,
}

pub fn parse(src: &str) -> Result<Vec<Decl>, SchemaError> {
    let mut p = Parser { lexer: Lexer::new(src), peeked: None };
    let mut decls = Vec::new();
    loop {
        let (tok, at) = p.next()?;
        let kind = match &tok {
            Tok::Eof => return Ok(decls),
            Tok::Word(w) if w == "interface" => DeclKind::Interface,
            Tok::Word(w) if w == "node" => DeclKind::Node,
            Tok::Word(w) if w == "edge" => DeclKind::Edge,
            other => {
                return Err(SchemaError::at(
                    at,
                    format!("expected 'node', 'edge' or 'interface', found {}", other.describe()),
                ));
            }
        };
        decls.push(p.decl(kind)?);
    }
}

struct Parser<'s> {
    lexer: Lexer<'s>,
    peeked: Option<(Tok, Span)>,
}

fn is_type_name(w: &str) -> bool {
    w.as_bytes()[0].is_ascii_uppercase()
}

fn is_prop_name(w: &str) -> bool {
    let b = w.as_bytes()[0];
    b.is_ascii_lowercase() || b == b'_'
}

impl Parser<'_> {
    fn next(&mut self) -> Result<(Tok, Span), SchemaError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lexer.next(),
        }
    }

    fn peek(&mut self) -> Result<&Tok, SchemaError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next()?);
        }
        Ok(&self.peeked.as_ref().expect("just filled").0)
    }

    fn expect(&mut self, want: Tok, context: &str) -> Result<Span, SchemaError> {
        let (tok, at) = self.next()?;
        if tok == want {
            Ok(at)
        } else {
            Err(SchemaError::at(at, format!("expected {} {context}, found {}", want.describe(), tok.describe())))
        }
    }

    fn type_name(&mut self, context: &str) -> Result<(String, Span), SchemaError> {
        let (tok, at) = self.next()?;
        match tok {
            Tok::Word(w) if is_type_name(&w) => Ok((w, at)),
            Tok::Word(w) => Err(SchemaError::at(
                at,
                format!("type name '{w}' must start with an uppercase ASCII letter ({context})"),
            )),
            other => Err(SchemaError::at(at, format!("expected a type name {context}, found {}", other.describe()))),
        }
    }

    fn decl(&mut self, kind: DeclKind) -> Result<Decl, SchemaError> {
        let (name, name_span) = self.type_name(&format!("after '{}'", kind.word()))?;
        let mut decl = Decl {
            kind,
            name,
            span: name_span,
            implements: Vec::new(),
            endpoints: None,
            annotations: Vec::new(),
            props: Vec::new(),
        };
        if kind == DeclKind::Edge {
            self.expect(Tok::Colon, &format!("after edge name '{}' (write `edge {}: From -> To`)", decl.name, decl.name))?;
            let from = self.type_name("for the edge's source")?;
            self.expect(Tok::Arrow, "between the edge's endpoints")?;
            let to = self.type_name("for the edge's target")?;
            decl.endpoints = Some((from, to));
        }
        while *self.peek()? == Tok::At {
            decl.annotations.push(self.annotation()?);
        }
        if kind == DeclKind::Node && matches!(self.peek()?, Tok::Word(w) if w == "implements") {
            self.next()?;
            loop {
                decl.implements.push(self.type_name("after 'implements'")?);
                if *self.peek()? != Tok::Comma {
                    break;
                }
                self.next()?;
            }
            // Annotations may also follow the `implements` list.
            while *self.peek()? == Tok::At {
                decl.annotations.push(self.annotation()?);
            }
        }
        match self.peek()? {
            Tok::LBrace => {}
            _ if kind == DeclKind::Edge => return Ok(decl),
            _ => {
                let (tok, at) = self.next()?;
                return Err(SchemaError::at(
                    at,
                    format!("expected '{{' to open the body of {} '{}', found {}", kind.word(), decl.name, tok.describe()),
                ));
            }
        }
        self.next()?;
        loop {
            let (tok, at) = self.next()?;
            match tok {
                Tok::RBrace => return Ok(decl),
                Tok::At => {
                    self.peeked = Some((Tok::At, at));
                    decl.annotations.push(self.annotation()?);
                }
                Tok::Word(w) if is_prop_name(&w) => {
                    let (prop, body_level) = self.property(w, at)?;
                    decl.props.push(prop);
                    decl.annotations.extend(body_level);
                }
                Tok::Word(w) => {
                    return Err(SchemaError::at(
                        at,
                        format!("property name '{w}' must start with a lowercase ASCII letter or '_'"),
                    ));
                }
                Tok::Eof => {
                    return Err(SchemaError::at(
                        at,
                        format!("unterminated body of {} '{}': add '}}'", kind.word(), decl.name),
                    ));
                }
                other => {
                    return Err(SchemaError::at(
                        at,
                        format!("expected a property, an annotation or '}}', found {}", other.describe()),
                    ));
                }
            }
        }
    }

    /// A property and its annotations. Annotations that are body constraints
    /// (`@range`, `@check`, `@card`, and `@key/@unique/@index` with arguments)
    /// may follow a property on the same line; they are returned apart.
    fn property(&mut self, name: String, span: Span) -> Result<(PropDecl, Vec<Annotation>), SchemaError> {
        self.expect(Tok::Colon, &format!("after property name '{name}' (write `{name}: Type`)"))?;
        let ty = self.type_expr()?;
        let nullable = if *self.peek()? == Tok::Question {
            self.next()?;
            true
        } else {
            false
        };
        let mut annotations = Vec::new();
        let mut body_level = Vec::new();
        while *self.peek()? == Tok::At {
            let a = self.annotation()?;
            let constraint = match a.name.as_str() {
                "range" | "check" | "card" => true,
                "key" | "unique" | "index" => a.args.is_some(),
                _ => false,
            };
            if constraint { body_level.push(a) } else { annotations.push(a) }
        }
        Ok((PropDecl { name, ty, nullable, annotations, span }, body_level))
    }

    fn type_expr(&mut self) -> Result<TypeExpr, SchemaError> {
        self.type_expr_within(0)
    }

    /// A type inside `lists` list brackets. The depth is bounded: the parser
    /// recurses per `[`, and a schema of `[[[…` must not exhaust the stack.
    fn type_expr_within(&mut self, lists: usize) -> Result<TypeExpr, SchemaError> {
        let (tok, at) = self.next()?;
        match tok {
            Tok::LBracket => {
                if lists == MAX_TYPE_NESTING {
                    return Err(SchemaError::at(at, format!("list types nest at most {MAX_TYPE_NESTING} deep")));
                }
                let inner = self.type_expr_within(lists + 1)?;
                let item_nullable = if *self.peek()? == Tok::Question {
                    self.next()?;
                    true
                } else {
                    false
                };
                self.expect(Tok::RBracket, "to close the list type")?;
                Ok(TypeExpr::List(Box::new(inner), item_nullable, at))
            }
            Tok::Word(w) if w == "enum" => {
                self.expect(Tok::LParen, "after 'enum'")?;
                let mut values = Vec::new();
                loop {
                    let Some(value) = self.lexer.enum_value()? else {
                        let (tok, at) = self.next()?;
                        return Err(SchemaError::at(
                            at,
                            format!("expected an enum value (letters, digits, '_' or '-'), found {}", tok.describe()),
                        ));
                    };
                    values.push(value);
                    let (tok, at) = self.next()?;
                    match tok {
                        Tok::Comma => {}
                        Tok::RParen => return Ok(TypeExpr::Enum(values, at)),
                        other => {
                            return Err(SchemaError::at(
                                at,
                                format!("expected ',' or ')' in enum values, found {}", other.describe()),
                            ));
                        }
                    }
                }
            }
            Tok::Word(w) if w == "Vector" => {
                self.expect(Tok::LParen, "after 'Vector' (write `Vector(384)`)")?;
                let (tok, dim_at) = self.next()?;
                let Tok::Int(dim) = tok else {
                    return Err(SchemaError::at(dim_at, format!("expected the vector dimension, found {}", tok.describe())));
                };
                self.expect(Tok::RParen, "after the vector dimension")?;
                Ok(TypeExpr::Vector(dim, dim_at))
            }
            Tok::Word(w) => Ok(TypeExpr::Named(w, at)),
            other => Err(SchemaError::at(at, format!("expected a type, found {}", other.describe()))),
        }
    }

    fn annotation(&mut self) -> Result<Annotation, SchemaError> {
        let at = self.expect(Tok::At, "")?;
        let (tok, name_at) = self.next()?;
        let Tok::Word(name) = tok else {
            return Err(SchemaError::at(name_at, format!("expected an annotation name after '@', found {}", tok.describe())));
        };
        if *self.peek()? != Tok::LParen {
            return Ok(Annotation { name, args: None, span: at });
        }
        self.next()?;
        let mut args = Vec::new();
        if *self.peek()? == Tok::RParen {
            self.next()?;
            return Ok(Annotation { name, args: Some(args), span: at });
        }
        loop {
            args.push(self.arg()?);
            let (tok, at2) = self.next()?;
            match tok {
                Tok::Comma => {}
                Tok::RParen => return Ok(Annotation { name, args: Some(args), span: at }),
                other => {
                    return Err(SchemaError::at(
                        at2,
                        format!("expected ',' or ')' in the arguments of @{name}, found {}", other.describe()),
                    ));
                }
            }
        }
    }

    fn arg(&mut self) -> Result<Arg, SchemaError> {
        let (tok, at) = self.next()?;
        match tok {
            Tok::Word(w) => Ok(Arg::Word(w, at)),
            Tok::Str(s) => Ok(Arg::Str(s, at)),
            Tok::DotDot => Ok(Arg::Range(None, self.range_end()?, at)),
            Tok::Int(n) | Tok::Decimal(n) => {
                if *self.peek()? == Tok::DotDot {
                    self.next()?;
                    Ok(Arg::Range(Some(n), self.range_end()?, at))
                } else {
                    Ok(Arg::Num(n, at))
                }
            }
            other => Err(SchemaError::at(at, format!("expected an annotation argument, found {}", other.describe()))),
        }
    }

    fn range_end(&mut self) -> Result<Option<String>, SchemaError> {
        if matches!(self.peek()?, Tok::Int(_) | Tok::Decimal(_)) {
            match self.next()?.0 {
                Tok::Int(n) | Tok::Decimal(n) => Ok(Some(n)),
                _ => unreachable!("peeked a number"),
            }
        } else {
            Ok(None)
        }
    }
}
