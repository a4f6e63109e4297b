//! A strict JSON (RFC 8259) reader that keeps the byte span of every value and key, so a
//! diagnostic about a JSON experiment can point at the exact text, as it does in KDL.
//!
//! serde_json, the JSON crate already in the tree, keeps no positions; this reader is small
//! because JSON is, and it only parses: what the values mean is `resolve::from_json`'s business.
//! It stops at the first syntax error (JSON has no recovery points worth guessing at).

use miette::SourceSpan;

/// Nesting deeper than this is refused rather than recursed into (no experiment comes close).
const MAX_DEPTH: usize = crate::nesting::MAX_NESTING;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// The number's text, exactly as written (the caller decides integer or float).
    Number(String),
    String(String),
    Array(Vec<Spanned>),
    Object(Vec<Member>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned {
    pub value: Json,
    pub span: SourceSpan,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    pub key: String,
    /// The key with its quotes.
    pub key_span: SourceSpan,
    pub value: Spanned,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub span: SourceSpan,
    pub message: String,
    pub label: String,
}

/// Parses one JSON document (surrounding whitespace allowed, nothing else).
pub(crate) fn parse(text: &str) -> Result<Spanned, SyntaxError> {
    let mut reader = Reader { text, pos: 0 };
    reader.skip_space();
    let value = reader.value(0)?;
    reader.skip_space();
    if reader.pos < text.len() {
        return Err(reader.error_here("unexpected text after the JSON value", "not expected here"));
    }
    Ok(value)
}

struct Reader<'t> {
    text: &'t str,
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// An error on the character at the reading position (or the end of the text).
    fn error_here(&self, message: &str, label: &str) -> SyntaxError {
        let len = self.text[self.pos..]
            .chars()
            .next()
            .map_or(0, char::len_utf8);
        SyntaxError {
            span: SourceSpan::new(self.pos.into(), len),
            message: message.into(),
            label: label.into(),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Spanned, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error_here("JSON nested too deeply", "too deep"));
        }
        let start = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Json::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => Json::Number(self.number()?),
            Some(b't') => self.word("true", Json::Bool(true))?,
            Some(b'f') => self.word("false", Json::Bool(false))?,
            Some(b'n') => self.word("null", Json::Null)?,
            None => {
                return Err(self.error_here(
                    "the JSON text ends where a value is expected",
                    "value expected",
                ));
            }
            Some(_) => {
                return Err(self.error_here(
                    "expected a JSON value (object, array, string, number, true, false or null)",
                    "not a JSON value",
                ));
            }
        };
        Ok(Spanned {
            value,
            span: SourceSpan::new(start.into(), self.pos - start),
        })
    }

    fn word(&mut self, word: &str, value: Json) -> Result<Json, SyntaxError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error_here(
                "expected a JSON value (object, array, string, number, true, false or null)",
                "not a JSON value",
            ))
        }
    }

    fn expect(&mut self, byte: u8, message: &str, label: &str) -> Result<(), SyntaxError> {
        self.skip_space();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error_here(message, label))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        self.pos += 1;
        let mut members = Vec::new();
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            if self.peek() != Some(b'"') {
                let message = if self.peek() == Some(b'}') {
                    "a comma before `}`: JSON allows no trailing comma"
                } else {
                    "expected a key in double quotes"
                };
                return Err(self.error_here(message, "key expected"));
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = SourceSpan::new(key_start.into(), self.pos - key_start);
            self.expect(b':', "expected `:` after the key", "`:` expected")?;
            self.skip_space();
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(members));
                }
                _ => {
                    return Err(self
                        .error_here("expected `,` or `}` after the value", "`,` or `}` expected"));
                }
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_space();
            if self.peek() == Some(b']') {
                return Err(self.error_here(
                    "a comma before `]`: JSON allows no trailing comma",
                    "value expected",
                ));
            }
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => {
                    return Err(self
                        .error_here("expected `,` or `]` after the value", "`,` or `]` expected"));
                }
            }
        }
    }

    fn number(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let digits = |pos: &mut usize| {
            let from = *pos;
            while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos - from
        };
        let mut pos = self.pos;
        if bytes[pos] == b'-' {
            pos += 1;
        }
        let int_start = pos;
        let int_digits = digits(&mut pos);
        let leading_zero = int_digits > 1 && bytes[int_start] == b'0';
        let mut ok = int_digits > 0 && !leading_zero;
        if ok && bytes.get(pos) == Some(&b'.') {
            pos += 1;
            ok = digits(&mut pos) > 0;
        }
        if ok && matches!(bytes.get(pos), Some(b'e' | b'E')) {
            pos += 1;
            if matches!(bytes.get(pos), Some(b'+' | b'-')) {
                pos += 1;
            }
            ok = digits(&mut pos) > 0;
        }
        if !ok {
            self.pos = pos.min(self.text.len());
            return Err(SyntaxError {
                span: SourceSpan::new(
                    start.into(),
                    (pos - start).max(1).min(self.text.len() - start),
                ),
                message: "malformed JSON number".into(),
                label: "not a number".into(),
            });
        }
        self.pos = pos;
        Ok(self.text[start..pos].to_string())
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.pos..].chars().next() else {
                return Err(SyntaxError {
                    span: SourceSpan::new(start.into(), 1),
                    message: "string not closed".into(),
                    label: "this string has no closing `\"`".into(),
                });
            };
            match c {
                '"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                '\\' => out.push(self.escape()?),
                c if (c as u32) < 0x20 => {
                    return Err(self.error_here(
                        "control character in a string (write \\n, \\t or \\u00XX)",
                        "not allowed in a JSON string",
                    ));
                }
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn escape(&mut self) -> Result<char, SyntaxError> {
        let at = self.pos;
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(self.error_here("string not closed", "escape at the end of the text"));
        };
        self.pos += 1;
        let simple = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(at),
            _ => {
                self.pos = at;
                return Err(SyntaxError {
                    span: SourceSpan::new(at.into(), 2.min(self.text.len() - at)),
                    message: "unknown escape in a string".into(),
                    label: "JSON escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX".into(),
                });
            }
        };
        Ok(simple)
    }

    fn hex4(&mut self, at: usize) -> Result<u32, SyntaxError> {
        let digits = self.text.get(self.pos..self.pos + 4);
        match digits.and_then(|d| {
            u32::from_str_radix(d, 16)
                .ok()
                .filter(|_| d.bytes().all(|b| b.is_ascii_hexdigit()))
        }) {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => Err(SyntaxError {
                span: SourceSpan::new(at.into(), (self.pos - at).min(self.text.len() - at)),
                message: "`\\u` needs four hexadecimal digits".into(),
                label: "malformed escape".into(),
            }),
        }
    }

    /// `\uXXXX`, with UTF-16 surrogate pairs joined.
    fn unicode_escape(&mut self, at: usize) -> Result<char, SyntaxError> {
        let first = self.hex4(at)?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if !self.text[self.pos..].starts_with("\\u") {
                return Err(self.bad_surrogate(at));
            }
            self.pos += 2;
            let second = self.hex4(at)?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(self.bad_surrogate(at));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| self.bad_surrogate(at))
    }

    fn bad_surrogate(&self, at: usize) -> SyntaxError {
        SyntaxError {
            span: SourceSpan::new(at.into(), self.pos - at),
            message: "unpaired UTF-16 surrogate in a `\\u` escape".into(),
            label: "not a character".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> (usize, String) {
        let e = parse(text).unwrap_err();
        (e.span.offset(), e.message)
    }

    #[test]
    fn values_and_their_spans() {
        let text = r#" {"a": [1, -2.5e3, "x\u00e9\n"], "b": {"c": null, "d": true}} "#;
        let Json::Object(members) = parse(text).unwrap().value else {
            panic!("not an object")
        };
        assert_eq!(members[0].key, "a");
        assert_eq!(&text[members[0].key_span.offset()..][..3], "\"a\"");
        let Json::Array(items) = &members[0].value.value else {
            panic!()
        };
        assert_eq!(items[1].value, Json::Number("-2.5e3".into()));
        assert_eq!(
            &text[items[1].span.offset()..][..items[1].span.len()],
            "-2.5e3"
        );
        assert_eq!(items[2].value, Json::String("x\u{e9}\n".into()));
        let Json::Object(inner) = &members[1].value.value else {
            panic!()
        };
        assert_eq!(inner[0].value.value, Json::Null);
        assert_eq!(inner[1].value.value, Json::Bool(true));
    }

    #[test]
    fn surrogate_pairs_join() {
        let Json::String(s) = parse(r#""\ud83d\ude00""#).unwrap().value else {
            panic!()
        };
        assert_eq!(s, "\u{1F600}");
        assert!(parse(r#""\ud83d""#).is_err());
    }

    #[test]
    fn mistakes_are_located() {
        assert_eq!(at("{\"a\": 1,}").0, 8);
        assert!(at("{\"a\": 1,}").1.contains("trailing comma"));
        assert_eq!(at("[1 2]").0, 3);
        assert_eq!(at("{a: 1}").0, 1);
        assert_eq!(at("{\"a\" 1}").0, 5);
        assert_eq!(at("01").1, "malformed JSON number");
        assert_eq!(at("1.").1, "malformed JSON number");
        assert_eq!(at("\"abc").1, "string not closed");
        assert_eq!(at("\"a\\qb\"").0, 2);
        assert_eq!(at("{} x").0, 3);
        assert_eq!(at("tru").0, 0);
        assert!(parse("").is_err());
        assert!(parse(&"[".repeat(1000)).is_err());
    }
}
