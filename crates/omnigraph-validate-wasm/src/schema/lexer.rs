//! Tokens of the `.pg` schema language (SPEC §1.1), with line and column.

use super::types::{SchemaError, Span};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A word: keyword, type name, property name or annotation name.
    Word(String),
    Str(String),
    /// An integer literal, sign included.
    Int(String),
    /// A decimal literal `D+.D+`, sign included.
    Decimal(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Colon,
    Comma,
    Question,
    At,
    Arrow,
    DotDot,
    Eof,
}

impl Tok {
    pub fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("'{w}'"),
            Tok::Str(_) => "a string".into(),
            Tok::Int(n) | Tok::Decimal(n) => format!("number {n}"),
            Tok::LBrace => "'{'".into(),
            Tok::RBrace => "'}'".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::Colon => "':'".into(),
            Tok::Comma => "','".into(),
            Tok::Question => "'?'".into(),
            Tok::At => "'@'".into(),
            Tok::Arrow => "'->'".into(),
            Tok::DotDot => "'..'".into(),
            Tok::Eof => "end of file".into(),
        }
    }
}

pub struct Lexer<'s> {
    src: &'s str,
    pos: usize,
    line: u32,
    column: u32,
}

impl<'s> Lexer<'s> {
    pub fn new(src: &'s str) -> Self {
        Lexer { src, pos: 0, line: 1, column: 1 }
    }

    fn peek_byte(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let ch = self.src[self.pos..].chars().next()?;
        self.pos += ch.len_utf8();
        if ch == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(ch)
    }

    pub fn span(&self) -> Span {
        Span { line: self.line, column: self.column }
    }

    fn skip_trivia(&mut self) -> Result<(), SchemaError> {
        loop {
            match (self.peek_byte(0), self.peek_byte(1)) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => {
                    self.bump();
                }
                (Some(b'/'), Some(b'/')) => {
                    while let Some(b) = self.peek_byte(0) {
                        if b == b'\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.span();
                    self.bump();
                    self.bump();
                    loop {
                        match (self.peek_byte(0), self.peek_byte(1)) {
                            (Some(b'*'), Some(b'/')) => {
                                self.bump();
                                self.bump();
                                break;
                            }
                            (Some(_), _) => {
                                self.bump();
                            }
                            (None, _) => {
                                return Err(SchemaError::at(start, "unterminated block comment: add '*/'"));
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// The next token and where it starts.
    pub fn next(&mut self) -> Result<(Tok, Span), SchemaError> {
        self.skip_trivia()?;
        let at = self.span();
        let Some(b) = self.peek_byte(0) else { return Ok((Tok::Eof, at)) };
        let tok = match b {
            b'{' => self.single(Tok::LBrace),
            b'}' => self.single(Tok::RBrace),
            b'(' => self.single(Tok::LParen),
            b')' => self.single(Tok::RParen),
            b'[' => self.single(Tok::LBracket),
            b']' => self.single(Tok::RBracket),
            b':' => self.single(Tok::Colon),
            b',' => self.single(Tok::Comma),
            b'?' => self.single(Tok::Question),
            b'@' => self.single(Tok::At),
            b'.' if self.peek_byte(1) == Some(b'.') => {
                self.bump();
                self.single(Tok::DotDot)
            }
            b'-' if self.peek_byte(1) == Some(b'>') => {
                self.bump();
                self.single(Tok::Arrow)
            }
            b'-' | b'0'..=b'9' => self.number(at)?,
            b'"' => self.string(at)?,
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = self.pos;
                while matches!(self.peek_byte(0), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
                    self.bump();
                }
                Tok::Word(self.src[start..self.pos].to_owned())
            }
            _ => {
                let ch = self.src[self.pos..].chars().next().unwrap_or('?');
                return Err(SchemaError::at(at, format!("unexpected character {ch:?}")));
            }
        };
        Ok((tok, at))
    }

    fn single(&mut self, tok: Tok) -> Tok {
        self.bump();
        tok
    }

    fn number(&mut self, at: Span) -> Result<Tok, SchemaError> {
        let start = self.pos;
        if self.peek_byte(0) == Some(b'-') {
            self.bump();
        }
        let digits = self.pos;
        while matches!(self.peek_byte(0), Some(b'0'..=b'9')) {
            self.bump();
        }
        if self.pos == digits {
            return Err(SchemaError::at(at, "expected digits after '-'"));
        }
        let is_decimal = self.peek_byte(0) == Some(b'.') && matches!(self.peek_byte(1), Some(b'0'..=b'9'));
        if is_decimal {
            self.bump();
            while matches!(self.peek_byte(0), Some(b'0'..=b'9')) {
                self.bump();
            }
        }
        let text = self.src[start..self.pos].to_owned();
        Ok(if is_decimal { Tok::Decimal(text) } else { Tok::Int(text) })
    }

    fn string(&mut self, at: Span) -> Result<Tok, SchemaError> {
        self.bump();
        let mut out = String::new();
        loop {
            let esc_at = self.span();
            match self.bump() {
                None | Some('\n') => return Err(SchemaError::at(at, "unterminated string: add the closing '\"'")),
                Some('"') => return Ok(Tok::Str(out)),
                Some('\\') => match self.bump() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    other => {
                        let got = other.map(|c| format!("\\{c}")).unwrap_or_else(|| "\\".into());
                        return Err(SchemaError::at(
                            esc_at,
                            format!("unknown escape {got:?} in string; use \\\" \\\\ \\n \\r or \\t"),
                        ));
                    }
                },
                Some(ch) => out.push(ch),
            }
        }
    }

    /// An enum value: one or more of ASCII letters, digits, `_`, `-`.
    pub fn enum_value(&mut self) -> Result<Option<(String, Span)>, SchemaError> {
        self.skip_trivia()?;
        let at = self.span();
        let start = self.pos;
        while matches!(self.peek_byte(0), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
            self.bump();
        }
        if self.pos == start {
            return Ok(None);
        }
        Ok(Some((self.src[start..self.pos].to_owned(), at)))
    }
}
