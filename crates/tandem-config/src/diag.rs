//! Diagnostics: the error type of the whole crate, the registry of source texts
//! they point into, and their two renderings (miette's graphical report, plain or
//! coloured, and a machine-readable JSON form for editors and CI annotations).

use std::fmt;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};

/// Identifies one source text (a file, stdin, or one `--set` argument) in a [`Sources`].
pub(crate) type SourceId = usize;

/// What a source text is, which decides how provenance is reported for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourceKind {
    File,
    Set,
}

#[derive(Debug)]
pub(crate) struct SourceText {
    pub name: String,
    pub text: Arc<String>,
    pub kind: SourceKind,
}

/// Every text a resolution read, so diagnostics and provenance can name lines.
#[derive(Debug, Default, Clone)]
pub(crate) struct Sources {
    texts: Vec<Arc<SourceText>>,
}

impl Sources {
    pub fn add(&mut self, name: String, text: String, kind: SourceKind) -> SourceId {
        self.texts.push(Arc::new(SourceText {
            name,
            text: Arc::new(text),
            kind,
        }));
        self.texts.len() - 1
    }

    pub fn get(&self, id: SourceId) -> &Arc<SourceText> {
        &self.texts[id]
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// A labelled span inside one source text.
#[derive(Debug, Clone)]
pub(crate) struct Label {
    pub source: SourceId,
    pub span: SourceSpan,
    pub text: String,
}

/// One problem found in an experiment.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    code: &'static str,
    message: String,
    primary: Option<Label>,
    secondary: Vec<Label>,
    help: Option<String>,
    source: Option<Arc<SourceText>>,
}

impl Diagnostic {
    /// A short stable identifier of the kind of problem, e.g. `config::unknown-setting`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// The file (or `<stdin>`, or `--set`) the problem is in, when it has a place.
    pub fn file(&self) -> Option<&str> {
        self.source.as_ref().map(|s| s.name.as_str())
    }

    /// 1-based line and column of the start of the primary label.
    pub fn line_column(&self) -> Option<(usize, usize)> {
        let (source, label) = (self.source.as_ref()?, self.primary.as_ref()?);
        Some(line_col(&source.text, label.span.offset()))
    }

    /// The text under the primary label.
    pub fn label(&self) -> Option<&str> {
        self.primary.as_ref().map(|l| l.text.as_str())
    }

    fn to_json_value(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert("severity".into(), "error".into());
        object.insert("code".into(), self.code.into());
        object.insert("message".into(), self.message.clone().into());
        if let (Some(source), Some(label)) = (&self.source, &self.primary) {
            let (line, column) = line_col(&source.text, label.span.offset());
            let (end_line, end_column) =
                line_col(&source.text, label.span.offset() + label.span.len());
            object.insert("file".into(), source.name.clone().into());
            object.insert("line".into(), line.into());
            object.insert("column".into(), column.into());
            object.insert("end_line".into(), end_line.into());
            object.insert("end_column".into(), end_column.into());
            object.insert("offset".into(), label.span.offset().into());
            object.insert("length".into(), label.span.len().into());
            object.insert("label".into(), label.text.clone().into());
        } else if let Some(source) = &self.source {
            object.insert("file".into(), source.name.clone().into());
        }
        if let Some(help) = &self.help {
            object.insert("help".into(), help.clone().into());
        }
        serde_json::Value::Object(object)
    }
}

/// Builder used inside the crate; `finish` attaches the source text.
pub(crate) struct DiagBuilder {
    diag: Box<Diagnostic>,
}

pub(crate) fn error(code: &'static str, message: impl Into<String>) -> DiagBuilder {
    DiagBuilder {
        diag: Box::new(Diagnostic {
            code,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            help: None,
            source: None,
        }),
    }
}

impl DiagBuilder {
    pub fn at(mut self, source: SourceId, span: SourceSpan, label: impl Into<String>) -> Self {
        self.diag.primary = Some(Label {
            source,
            span,
            text: label.into(),
        });
        self
    }

    pub fn also(mut self, source: SourceId, span: SourceSpan, label: impl Into<String>) -> Self {
        self.diag.secondary.push(Label {
            source,
            span,
            text: label.into(),
        });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.diag.help = Some(help.into());
        self
    }

    pub fn help_opt(mut self, help: Option<String>) -> Self {
        self.diag.help = help;
        self
    }

    /// Only the file, no position (e.g. a file that cannot be read).
    pub fn in_source(mut self, source: &Arc<SourceText>) -> Self {
        self.diag.source = Some(source.clone());
        self
    }

    /// Attaches the texts the labels point into. Labels in another text than the
    /// primary one cannot be drawn by one report, so they become notes in the help.
    pub fn finish(mut self, sources: &Sources) -> Diagnostic {
        let Some(primary) = &self.diag.primary else {
            return *self.diag;
        };
        let primary_source = primary.source;
        self.diag.source = Some(sources.get(primary_source).clone());
        let (same, other): (Vec<Label>, Vec<Label>) = self
            .diag
            .secondary
            .drain(..)
            .partition(|l| l.source == primary_source);
        self.diag.secondary = same;
        for label in other {
            let source = sources.get(label.source);
            let (line, column) = line_col(&source.text, label.span.offset());
            let note = format!("{} at {}:{line}:{column}", label.text, source.name);
            self.diag.help = Some(match self.diag.help.take() {
                Some(help) => format!("{help}\n{note}"),
                None => note,
            });
        }
        *self.diag
    }
}

/// Adapter that lets miette draw one [`Diagnostic`].
struct Report<'a> {
    diag: &'a Diagnostic,
    named: Option<NamedSource<Arc<String>>>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diag.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diag.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diag.code))
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.named.as_ref().map(|n| n as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = self.diag.primary.as_ref()?;
        let clamp = |span: SourceSpan| {
            let len = self.named.as_ref().map_or(0, |n| n.inner().len());
            let offset = span.offset().min(len);
            SourceSpan::new(offset.into(), span.len().min(len - offset))
        };
        let mut labels = vec![LabeledSpan::new_primary_with_span(
            Some(primary.text.clone()),
            clamp(primary.span),
        )];
        for label in &self.diag.secondary {
            labels.push(LabeledSpan::new_with_span(
                Some(label.text.clone()),
                clamp(label.span),
            ));
        }
        Some(Box::new(labels.into_iter()))
    }
}

/// All the problems found in one resolution, in the order they were found.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub(crate) fn new(items: Vec<Diagnostic>) -> Self {
        Diagnostics { items }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter()
    }

    /// The graphical report of every diagnostic. `color` adds ANSI colours; without
    /// it the output is plain text, stable enough for golden tests.
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_links(false)
            .with_urls(false)
            .with_width(100)
            .with_context_lines(1);
        let mut out = String::new();
        for diag in &self.items {
            let named = diag
                .source
                .as_ref()
                .filter(|_| diag.primary.is_some())
                .map(|s| NamedSource::new(s.name.clone(), s.text.clone()));
            let report = Report { diag, named };
            if handler.render_report(&mut out, &report).is_err() {
                out.push_str(&format!("error: {}\n", diag.message));
            }
            if let (None, Some(source)) = (&diag.primary, &diag.source) {
                out.push_str(&format!("  in {}\n", source.name));
            }
        }
        out
    }

    /// A JSON array with one object per diagnostic (severity, code, message, file,
    /// line, column, end_line, end_column, offset, length, label, help).
    pub fn to_json(&self) -> String {
        let array: Vec<serde_json::Value> = self.items.iter().map(|d| d.to_json_value()).collect();
        serde_json::Value::Array(array).to_string()
    }

    pub(crate) fn json_values(&self) -> Vec<serde_json::Value> {
        self.items.iter().map(|d| d.to_json_value()).collect()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

/// Damerau-free edit distance, enough to suggest the name a typo was meant to be.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The closest candidate to `name`, if it is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= limit && *d < c.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str> + Clone,
) -> String {
    match closest(name, candidates.clone()) {
        Some(c) => format!("did you mean `{c}`?"),
        None => {
            let all: Vec<String> = candidates.into_iter().map(|c| format!("`{c}`")).collect();
            format!("expected one of {}", all.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(edit_distance("lr", "lr"), 0);
        assert_eq!(edit_distance("gama", "gamma"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggests_only_close_names() {
        assert_eq!(closest("gama", ["gamma", "lr"]), Some("gamma"));
        assert_eq!(closest("zzzzzz", ["gamma", "lr"]), None);
        assert_eq!(closest("sac", ["ppo", "a2c", "dqn"]), None);
        assert_eq!(
            closest("allreduc", ["allreduce", "none"]),
            Some("allreduce")
        );
    }

    #[test]
    fn line_col_is_one_based_in_chars() {
        assert_eq!(line_col("ab\ncdé f", 8), (2, 5));
        assert_eq!(line_col("x", 0), (1, 1));
    }
}
