//! How deep a config's blocks nest, how many words it holds, and parsing KDL without
//! overflowing the stack.
//!
//! The `kdl` crate takes about 1.4 kB of memory and 3 µs for every value it parses (a 1 MiB
//! file of `hidden 1 1 1 ...` peaked at 718 MB and took 1.5 s to resolve; docs/design.md,
//! "Config size"), so a resolution reads at most [`MAX_WORDS`] words over all its texts,
//! counted by a byte scan ([`word_starts`]) before anything is parsed.
//!
//! The KDL parser recurses once per `{`: a file of a few kilobytes that opens 1,500 blocks
//! overflowed the stack (docs/design.md, "Config size"). Two guards, because the parser's
//! recovery from broken text is not the language's grammar:
//! - [`too_nested`] refuses text whose blocks nest past [`MAX_NESTING`] (found by a scan of
//!   KDL v2's strings and comments, exact for well-formed text, and pointing at the brace), or
//!   which holds more than [`MAX_BRACES`] `{` characters anywhere;
//! - [`parse_kdl`] parses on a thread whose stack fits one parser level for every `{` of the
//!   text, so however the parser reads broken text it cannot overflow.

use kdl::{KdlDocument, KdlError};

/// Blocks (KDL) or objects and arrays (JSON) nested deeper than this are refused. The
/// deepest setting is four levels down (`experiment { env { wrappers { x ... } } }`).
pub(crate) const MAX_NESTING: usize = 32;

/// The most `{` characters (in blocks, strings or comments) a KDL text may hold; the shipped
/// experiments hold under 20.
pub(crate) const MAX_BRACES: usize = 4096;

/// The most words one resolution reads over all its texts (its file, its includes, its
/// `--set`s): a word is a run of characters between white space and `{}[]();,=:`, in values,
/// names, strings and comments alike. The shipped experiments hold under 250, their resolved
/// configs under 2,500 in JSON.
pub const MAX_WORDS: usize = 20_000;

/// Where `text`'s words start, in order.
pub(crate) fn word_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let apart = |b: u8| b.is_ascii_whitespace() || b"{}[]();,=:".contains(&b);
    let bytes = text.as_bytes();
    (0..bytes.len()).filter(move |&i| !apart(bytes[i]) && (i == 0 || apart(bytes[i - 1])))
}

/// Stack for one level of the parser's recursion, with room to spare: a debug build used
/// about 32 KiB (2 MiB of stack overflowed at 63 levels, held at 56).
const STACK_PER_LEVEL: usize = 64 << 10;

/// Why a text is refused before parsing, at a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooNested {
    /// The `{` here opens level [`MAX_NESTING`] + 1.
    Deep(usize),
    /// The `{` here is the text's [`MAX_BRACES`] + 1st.
    ManyBraces(usize),
}

/// Whether a KDL text is refused before parsing, and where.
pub(crate) fn too_nested(text: &str) -> Option<TooNested> {
    if let Some(at) = first_too_deep(text, MAX_NESTING) {
        return Some(TooNested::Deep(at));
    }
    let (at, _) = text.match_indices('{').nth(MAX_BRACES)?;
    Some(TooNested::ManyBraces(at))
}

/// `KdlDocument::parse` on a thread with one [`STACK_PER_LEVEL`] for every `{` in `text`
/// (at most [`MAX_BRACES`] after [`too_nested`]): the parser cannot recurse deeper than that.
pub(crate) fn parse_kdl(text: &str) -> Result<KdlDocument, KdlError> {
    let braces = text.bytes().filter(|&b| b == b'{').count();
    let stack = (1 << 20) + braces * STACK_PER_LEVEL;
    let on_own_stack = std::thread::scope(|scope| {
        let parser = std::thread::Builder::new()
            .name("kdl-parse".into())
            .stack_size(stack)
            .spawn_scoped(scope, || KdlDocument::parse(text))
            .ok()?;
        Some(
            parser
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    });
    // Without a thread (the system refused one), the text is parsed here.
    on_own_stack.unwrap_or_else(|| KdlDocument::parse(text))
}

/// The byte offset of the first `{` that opens a block deeper than `limit`, if any.
pub(crate) fn first_too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        pos: 0,
        unended: Vec::new(),
    };
    let mut depth = 0usize;
    while let Some(b) = scan.peek() {
        match b {
            b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(scan.pos);
                }
                scan.pos += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                scan.pos += 1;
            }
            b'"' => scan.quoted(0),
            b'#' => scan.hashes(),
            b'/' if scan.starts_with(b"//") => scan.line_comment(),
            b'/' if scan.starts_with(b"/*") => scan.block_comment(),
            _ => scan.pos += 1,
        }
    }
    None
}

struct Scan<'t> {
    bytes: &'t [u8],
    pos: usize,
    /// Hash counts of multi-line strings found without an end: a later one cannot end either.
    unended: Vec<usize>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        self.bytes[self.pos..].starts_with(prefix)
    }

    /// A KDL newline at `at`: its length in bytes (CRLF, CR, LF, VT, FF, NEL, LS, PS).
    fn newline_at(&self, at: usize) -> Option<usize> {
        match self.bytes.get(at..).unwrap_or_default() {
            [b'\r', b'\n', ..] => Some(2),
            [b'\r' | b'\n' | 0x0B | 0x0C, ..] => Some(1),
            [0xC2, 0x85, ..] => Some(2),
            [0xE2, 0x80, 0xA8 | 0xA9, ..] => Some(3),
            _ => None,
        }
    }

    fn newline(&self) -> Option<usize> {
        self.newline_at(self.pos)
    }

    /// `#true`, `#inf` (skipped) or a raw string `#"..."#`, `##"""..."""##`.
    fn hashes(&mut self) {
        let start = self.pos;
        while self.peek() == Some(b'#') {
            self.pos += 1;
        }
        if self.peek() == Some(b'"') {
            self.quoted(self.pos - start);
        }
    }

    /// A string from its opening `"`: `hashes` is 0 for an escaped string, the count of `#`
    /// for a raw one. Only a string that KDL v2 reads as one is skipped whole: the parser
    /// recovers from a broken string (an unknown escape, no end, `"""` not ending its line)
    /// and reads the blocks after its opening, so the scan goes on from there too.
    fn quoted(&mut self, hashes: usize) {
        let multi_line = self.starts_with(b"\"\"\"");
        let quotes = if multi_line { 3 } else { 1 };
        let end = if multi_line && self.unended.contains(&hashes) {
            None
        } else {
            self.string_end(self.pos + quotes, quotes, hashes)
        };
        match end {
            Some(end) => self.pos = end,
            None => {
                if multi_line && !self.unended.contains(&hashes) {
                    self.unended.push(hashes);
                }
                self.pos += quotes;
            }
        }
    }

    /// Where a well-formed string whose body starts at `at` ends (just past its closing
    /// quotes and hashes), or `None`.
    fn string_end(&self, mut at: usize, quotes: usize, hashes: usize) -> Option<usize> {
        let multi_line = quotes == 3;
        if multi_line {
            at += self.newline_at(at)?;
        }
        while let Some(&b) = self.bytes.get(at) {
            if b == b'"' && self.closes_at(at, quotes, hashes) {
                return Some(at + quotes + hashes);
            } else if b == b'\\' && hashes == 0 {
                at = self.escape_end(at + 1)?;
            } else if let (Some(_), false) = (self.newline_at(at), multi_line) {
                return None;
            } else {
                at += 1;
            }
        }
        None
    }

    /// Just past a valid escape whose letter is at `at` (`\n`, `\u{1F980}`, a backslash before
    /// whitespace or newlines), or `None` for an escape KDL does not know.
    fn escape_end(&self, at: usize) -> Option<usize> {
        match *self.bytes.get(at)? {
            b'n' | b'r' | b't' | b'\\' | b'"' | b'b' | b'f' | b's' => Some(at + 1),
            b'u' => {
                let close = self.bytes[at..].iter().take(10).position(|&b| b == b'}')?;
                Some(at + close + 1)
            }
            b' ' | b'\t' => Some(at + 1),
            _ => self.newline_at(at).map(|len| at + len),
        }
    }

    /// Whether the text at `at` is `quotes` quotes followed by `hashes` hashes.
    fn closes_at(&self, at: usize, quotes: usize, hashes: usize) -> bool {
        let rest = &self.bytes[at..];
        rest.len() >= quotes + hashes
            && rest[..quotes].iter().all(|&b| b == b'"')
            && rest[quotes..quotes + hashes].iter().all(|&b| b == b'#')
    }

    fn line_comment(&mut self) {
        while self.peek().is_some() {
            if let Some(len) = self.newline() {
                self.pos += len;
                return;
            }
            self.pos += 1;
        }
    }

    /// `/* ... */`, which nests in KDL. One that never ends is not skipped (the scan goes on
    /// after its opening), which at worst counts a brace the parser would not.
    fn block_comment(&mut self) {
        let mut at = self.pos;
        let mut open = 0usize;
        while at < self.bytes.len() {
            if self.bytes[at..].starts_with(b"/*") {
                open += 1;
                at += 2;
            } else if self.bytes[at..].starts_with(b"*/") {
                open -= 1;
                at += 2;
                if open == 0 {
                    self.pos = at;
                    return;
                }
            } else {
                at += 1;
            }
        }
        self.pos += 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, limit: usize) -> bool {
        first_too_deep(text, limit).is_none()
    }

    #[test]
    fn counts_structural_braces_only() {
        assert_eq!(first_too_deep("a{b{c{}}}", 2), Some(5));
        assert!(depth_ok("a{b{c{}}}", 3));
        assert!(depth_ok(r#"a "{{{{" { b }"#, 1));
        assert!(
            depth_ok("a r#\"{{\"# { b }", 1),
            "`r` is a node name, `#\"..\"#` raw"
        );
        assert!(depth_ok("a ##\"{\"#{\"## { b }", 1));
        assert!(depth_ok("a \"\"\"\n{{ \" {{\n\"\"\" { b }", 1));
        assert!(depth_ok("a // {{{\n{ b }", 1));
        assert!(depth_ok("a /* { /* { */ { */ { b }", 1));
        assert!(
            depth_ok("a \"\\\"{{\" { b }", 1),
            "an escaped quote does not end it"
        );
        assert!(depth_ok("a #true { b }", 1));
    }

    #[test]
    fn nothing_after_a_broken_string_or_a_comment_line_is_hidden() {
        // A single-line string cannot span lines: the brace on the next line is counted.
        assert_eq!(first_too_deep("a \"open\n{{", 1), Some(9));
        assert_eq!(first_too_deep("a #\"open\n{{", 1), Some(10));
        // Every KDL newline ends a line comment, not only '\n'.
        assert_eq!(first_too_deep("a // x\u{2028}{{", 1), Some(10));
        assert_eq!(first_too_deep("a // x\u{85}{{", 1), Some(9));
    }
}
