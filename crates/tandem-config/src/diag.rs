//! Diagnostics: the error type of the whole crate, the registry of source texts
//! they point into, and their two renderings (miette's graphical report, plain or
//! coloured, and a machine-readable JSON form for editors and CI annotations).
//!
//! Both renderings are bounded, whatever the input: at most [`MAX_SHOWN`] diagnostics
//! and a count of the rest, texts cut at a few hundred characters, no snippet of a
//! line too long to read, and each snippet read from a window of lines around its
//! span (found through a line index) rather than from the start of the file, so the
//! work is linear in the size of the file and the number of problems.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};

/// Most diagnostics rendered or listed in JSON; the rest are counted in one line.
pub const MAX_SHOWN: usize = 50;
/// Most characters of a message or a label (a name can be as long as the file).
const MAX_TEXT: usize = 200;
/// Most characters of a help (some list every game of the catalogue).
const MAX_HELP: usize = 4000;
/// Lines drawn before and after a label's.
const CONTEXT_LINES: usize = 1;
/// Lines longer than this (in bytes) are not drawn in a snippet; the position is named instead.
const MAX_SNIPPET_LINE: usize = 400;

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
    /// Byte offset of the start of each line, built on first use.
    line_starts: OnceLock<Vec<usize>>,
}

impl SourceText {
    fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        })
    }

    /// 0-based index of the line holding byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.line_starts().partition_point(|&start| start <= offset) - 1
    }

    /// The byte range of line `line` (0-based, clamped to the last), without its newline.
    fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let starts = self.line_starts();
        let line = line.min(starts.len() - 1);
        let end = starts.get(line + 1).map_or(self.text.len(), |s| s - 1);
        starts[line]..end
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let line = self.line_of(offset);
        let start = self.line_starts()[line];
        (line + 1, self.text[start..offset].chars().count() + 1)
    }
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
            line_starts: OnceLock::new(),
        }));
        self.texts.len() - 1
    }

    pub fn get(&self, id: SourceId) -> &Arc<SourceText> {
        &self.texts[id]
    }
}

/// `text` cut to its first `max` characters, saying how long it was.
fn bounded(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text,
        Some((cut, _)) => format!(
            "{}… ({} characters in all)",
            &text[..cut],
            text.chars().count()
        ),
    }
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

/// Whether a diagnostic stops the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    /// The experiment runs, but not quite as written (e.g. more steps than asked).
    Warning,
}

/// One problem found in an experiment.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    severity: Severity,
    code: &'static str,
    message: String,
    primary: Option<Label>,
    secondary: Vec<Label>,
    help: Option<String>,
    source: Option<Arc<SourceText>>,
}

impl Diagnostic {
    pub fn severity(&self) -> Severity {
        self.severity
    }

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
        Some(source.line_col(label.span.offset()))
    }

    /// The text under the primary label.
    pub fn label(&self) -> Option<&str> {
        self.primary.as_ref().map(|l| l.text.as_str())
    }

    fn to_json_value(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        object.insert("severity".into(), severity.into());
        object.insert("code".into(), self.code.into());
        object.insert("message".into(), self.message.clone().into());
        if let (Some(source), Some(label)) = (&self.source, &self.primary) {
            let (line, column) = source.line_col(label.span.offset());
            let (end_line, end_column) = source.line_col(label.span.offset() + label.span.len());
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
    diagnostic(Severity::Error, code, message)
}

pub(crate) fn warning(code: &'static str, message: impl Into<String>) -> DiagBuilder {
    diagnostic(Severity::Warning, code, message)
}

fn diagnostic(severity: Severity, code: &'static str, message: impl Into<String>) -> DiagBuilder {
    DiagBuilder {
        diag: Box::new(Diagnostic {
            severity,
            code,
            message: bounded(message.into(), MAX_TEXT),
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
            text: bounded(label.into(), MAX_TEXT),
        });
        self
    }

    pub fn also(mut self, source: SourceId, span: SourceSpan, label: impl Into<String>) -> Self {
        self.diag.secondary.push(Label {
            source,
            span,
            text: bounded(label.into(), MAX_TEXT),
        });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.diag.help = Some(bounded(help.into(), MAX_HELP));
        self
    }

    pub fn help_opt(mut self, help: Option<String>) -> Self {
        self.diag.help = help.map(|h| bounded(h, MAX_HELP));
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
            let (line, column) = source.line_col(label.span.offset());
            let note = format!("{} at {}:{line}:{column}", label.text, source.name);
            self.diag.help = Some(match self.diag.help.take() {
                Some(help) => format!("{help}\n{note}"),
                None => note,
            });
        }
        *self.diag
    }
}

/// The lines of a source text around a span, which is all miette is given to read:
/// its own reader scans from the start of the text, once per snippet.
struct Window<'a> {
    source: &'a SourceText,
    /// Bytes handed to miette so far, which tests bound.
    served: AtomicUsize,
}

impl SourceCode for Window<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let source = self.source;
        // A line of slack on each side, so miette's scan of the window stops where its scan
        // of the whole text would have.
        let first = source.line_of(span.offset()).saturating_sub(before + 1);
        let last = source.line_of(span.offset() + span.len()) + after + 2;
        let start = source.line_starts()[first];
        let end = source
            .line_starts()
            .get(last + 1)
            .copied()
            .unwrap_or(source.text.len());
        let window = &source.text[start..end];
        self.served.fetch_add(window.len(), Ordering::Relaxed);
        let inner = window.read_span(
            &SourceSpan::new((span.offset() - start).into(), span.len()),
            before,
            after,
        )?;
        Ok(Box::new(MietteSpanContents::new_named(
            source.name.clone(),
            inner.data(),
            SourceSpan::new((inner.span().offset() + start).into(), inner.span().len()),
            inner.line() + first,
            inner.column(),
            inner.line_count(),
        )))
    }
}

/// Adapter that lets miette draw one [`Diagnostic`].
struct Report<'a> {
    diag: &'a Diagnostic,
    window: Option<Window<'a>>,
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

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diag.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.window.as_ref().map(|w| w as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = self.diag.primary.as_ref()?;
        let clamp = |span: SourceSpan| {
            let len = self.window.as_ref().map_or(0, |w| w.source.text.len());
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

/// Findings made outside the resolver (`tandem validate`'s and `train`'s checks of the machine),
/// reported as the resolver's are.
impl FromIterator<Diagnostic> for Diagnostics {
    fn from_iter<I: IntoIterator<Item = Diagnostic>>(items: I) -> Self {
        Diagnostics::new(items.into_iter().collect())
    }
}

impl Diagnostics {
    pub(crate) fn new(items: Vec<Diagnostic>) -> Self {
        Diagnostics { items }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// How many are errors (the rest are warnings).
    pub fn errors(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter()
    }

    /// The graphical report of every diagnostic (the first [`MAX_SHOWN`], and a count of
    /// the rest). `color` adds ANSI colours; without it the output is plain text, stable
    /// enough for golden tests.
    pub fn render(&self, color: bool) -> String {
        self.render_counting(color).0
    }

    /// [`Diagnostics::render`] and the bytes of source text it read.
    fn render_counting(&self, color: bool) -> (String, usize) {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_links(false)
            .with_urls(false)
            .with_width(100)
            .with_context_lines(CONTEXT_LINES);
        let (mut out, mut served) = (String::new(), 0);
        for diag in self.items.iter().take(MAX_SHOWN) {
            served += render_one(&handler, diag, &mut out);
        }
        if let Some(more) = self.omitted_line() {
            out.push_str(&more);
            out.push('\n');
        }
        (out, served)
    }

    /// `and K more errors ...` when some were not shown.
    fn omitted_line(&self) -> Option<String> {
        let more = self.items.len().checked_sub(MAX_SHOWN).filter(|&k| k > 0)?;
        Some(format!(
            "and {more} more error{} not shown (the first {MAX_SHOWN} are); fix these and check again",
            if more == 1 { "" } else { "s" }
        ))
    }

    /// A JSON array with one object per diagnostic (severity, code, message, file,
    /// line, column, end_line, end_column, offset, length, label, help).
    /// Past [`MAX_SHOWN`], one last object of severity `note` and code
    /// `config::more-errors` counts the rest.
    pub fn to_json(&self) -> String {
        serde_json::Value::Array(self.json_values()).to_string()
    }

    pub(crate) fn json_values(&self) -> Vec<serde_json::Value> {
        let mut values: Vec<serde_json::Value> = self
            .items
            .iter()
            .take(MAX_SHOWN)
            .map(|d| d.to_json_value())
            .collect();
        if let Some(more) = self.omitted_line() {
            values.push(serde_json::json!({
                "severity": "note",
                "code": "config::more-errors",
                "message": more,
            }));
        }
        values
    }
}

/// Renders one diagnostic into `out`; returns the bytes of source text miette read.
fn render_one(handler: &GraphicalReportHandler, diag: &Diagnostic, out: &mut String) -> usize {
    let source = diag.source.as_deref().filter(|_| diag.primary.is_some());
    let too_long = source.and_then(|s| too_long_line(s, diag));
    let window = source.filter(|_| too_long.is_none()).map(|source| Window {
        source,
        served: AtomicUsize::new(0),
    });
    let report = Report { diag, window };
    if handler.render_report(out, &report).is_err() {
        out.push_str(&format!("error: {}\n", diag.message));
    }
    if let (Some(source), Some((line, length))) = (source, too_long) {
        let (_, column) = source.line_col(diag.primary.as_ref().map_or(0, |l| l.span.offset()));
        out.push_str(&format!(
            "  at {}:{line}:{column} (line {line} is {length} bytes long, too long to show)\n",
            source.name
        ));
    }
    if let (None, Some(source)) = (&diag.primary, &diag.source) {
        out.push_str(&format!("  in {}\n", source.name));
    }
    report.window.map_or(0, |w| w.served.into_inner())
}

/// The first line (1-based) a snippet of `diag` would draw (a line a label starts or ends
/// on, or one next to it) that is too long to draw, and its length.
fn too_long_line(source: &SourceText, diag: &Diagnostic) -> Option<(usize, usize)> {
    let labels = diag.primary.iter().chain(&diag.secondary);
    labels
        .flat_map(|l| [l.span.offset(), l.span.offset() + l.span.len()])
        .map(|offset| source.line_of(offset.min(source.text.len())))
        .flat_map(|line| line.saturating_sub(CONTEXT_LINES)..=line + CONTEXT_LINES)
        .map(|line| (line + 1, source.line_range(line).len()))
        .find(|&(_, length)| length > MAX_SNIPPET_LINE)
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

/// Two sets are equal when they say the same things at the same places.
impl PartialEq for Diagnostics {
    fn eq(&self, other: &Self) -> bool {
        self.json_values() == other.json_values()
    }
}

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

    fn text(text: &str) -> SourceText {
        SourceText {
            name: "t.kdl".into(),
            text: Arc::new(text.into()),
            kind: SourceKind::File,
            line_starts: OnceLock::new(),
        }
    }

    #[test]
    fn line_col_is_one_based_in_chars() {
        assert_eq!(text("ab\ncdé f").line_col(8), (2, 5));
        assert_eq!(text("x").line_col(0), (1, 1));
        assert_eq!(text("a\n\nb\n").line_col(3), (3, 1));
        assert_eq!(text("a\n\nb\n").line_col(5), (4, 1));
    }

    #[test]
    fn long_texts_are_cut_and_say_how_long_they_were() {
        assert_eq!(bounded("short".into(), 10), "short");
        let cut = bounded("é".repeat(1000), 10);
        assert_eq!(cut, format!("{}… (1000 characters in all)", "é".repeat(10)));
    }

    /// One diagnostic near the end of a text of `lines` lines, rendered.
    fn render_near_the_end(lines: usize) -> (String, usize) {
        let mut sources = Sources::default();
        let body = "    seed 1\n".repeat(lines);
        let id = sources.add(
            "t.kdl".into(),
            format!("{body}    bad 2\n"),
            SourceKind::File,
        );
        let offset = body.len() + 4;
        let d = error("config::unknown-setting", "unknown setting `bad`")
            .at(id, SourceSpan::new(offset.into(), 3), "here")
            .help("remove it")
            .finish(&sources);
        Diagnostics::new(vec![d]).render_counting(false)
    }

    #[test]
    fn a_snippet_reads_only_the_lines_around_its_span() {
        let (small, small_read) = render_near_the_end(10);
        let (large, large_read) = render_near_the_end(100_000);
        assert!(small.contains("11 │     bad 2"), "{small}");
        assert!(large.contains("100001 │     bad 2"), "{large}");
        // Miette's own reader would scan the 1.1 MB before the span.
        assert!(large_read <= small_read, "{large_read} > {small_read}");
        assert!(large_read < 100, "{large_read}");
    }
}
