//! The resolver: reads the main file and its includes, turns every setting (and
//! every `--set`) into an ordered list of assignments, applies them in order (later
//! wins, node by node), checks each value against the schema, fills every default,
//! runs the cross-field checks and records where each value came from.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::SourceSpan;

use crate::diag::{
    self, DiagBuilder, Diagnostic, Diagnostics, SourceId, SourceKind, Sources, did_you_mean, error,
};
use crate::model::*;
use crate::schema::{self, Dflt, Field, Kind, SECTIONS, Section, Ty};
use crate::values::{self, Val, Values};
use crate::{Origin, Provenance, Resolved, Source};

/// The entries of one KDL node (or one property, or one `--set`), not yet typed.
#[derive(Debug, Clone)]
struct Raw {
    args: Vec<(KdlValue, SourceSpan)>,
    props: Vec<(String, KdlValue, SourceSpan)>,
    children: Option<KdlDocument>,
    /// Where to point when the value as a whole is wrong.
    value_span: SourceSpan,
}

#[derive(Debug)]
enum Target {
    Kind {
        section: usize,
    },
    Field {
        section: usize,
        name: String,
        name_span: SourceSpan,
    },
}

#[derive(Debug)]
struct Assignment {
    target: Target,
    raw: Raw,
    source: SourceId,
}

/// Where a stored value was written.
#[derive(Debug, Clone)]
struct Entry {
    val: Val,
    source: SourceId,
    span: SourceSpan,
    /// For wrappers: the span of each wrapper node.
    items: Vec<SourceSpan>,
}

fn join(a: SourceSpan, b: SourceSpan) -> SourceSpan {
    let start = a.offset().min(b.offset());
    let end = (a.offset() + a.len()).max(b.offset() + b.len());
    SourceSpan::new(start.into(), end - start)
}

fn section_index(section: &Section) -> usize {
    SECTIONS
        .iter()
        .position(|s| std::ptr::eq(*s, section))
        .unwrap_or(0)
}

fn raw_of_node(node: &KdlNode) -> Raw {
    let mut raw = Raw {
        args: Vec::new(),
        props: Vec::new(),
        children: node.children().cloned(),
        value_span: node.name().span(),
    };
    let mut whole: Option<SourceSpan> = None;
    for entry in node.entries() {
        let span = entry.span();
        whole = Some(whole.map_or(span, |w| join(w, span)));
        match entry.name() {
            Some(key) => raw
                .props
                .push((key.value().to_string(), entry.value().clone(), span)),
            None => raw.args.push((entry.value().clone(), span)),
        }
    }
    if let Some(w) = whole {
        raw.value_span = w;
    }
    raw
}

/// Reads files and `--set` texts into assignments.
struct Loader {
    sources: Sources,
    diags: Vec<Diagnostic>,
    assignments: Vec<Assignment>,
    /// Canonical paths of the files being included, outermost first, for cycles.
    stack: Vec<(PathBuf, String)>,
    experiment_at: Option<(SourceId, SourceSpan)>,
    /// Canonical configs are self-contained: workers must never touch other files.
    allow_includes: bool,
}

impl Loader {
    fn push(&mut self, d: DiagBuilder) {
        let d = d.finish(&self.sources);
        self.diags.push(d);
    }

    fn parse(&mut self, source: SourceId) -> Option<KdlDocument> {
        let text = self.sources.get(source).text.clone();
        match KdlDocument::parse(&text) {
            Ok(doc) => Some(doc),
            Err(err) => {
                let useful = useful_syntax_errors(err.diagnostics);
                if useful.is_empty() {
                    self.push(error("kdl::syntax", "syntax error").at(
                        source,
                        SourceSpan::from(0..0),
                        "in this file",
                    ));
                }
                for d in useful {
                    let message = d
                        .message
                        .clone()
                        .unwrap_or_else(|| "KDL syntax error".to_string());
                    let label = d.label.clone().unwrap_or_else(|| "here".to_string());
                    let b = error("kdl::syntax", format!("syntax error: {message}"))
                        .at(source, d.span, label);
                    self.push(b.help_opt(d.help.clone()));
                }
                None
            }
        }
    }

    fn reject_annotations(&mut self, node: &KdlNode, source: SourceId) {
        if let Some(ty) = node.ty() {
            self.push(
                error(
                    "config::type-annotation",
                    "type annotations are not used by tandem",
                )
                .at(source, ty.span(), "remove this annotation"),
            );
        }
        for entry in node.entries() {
            if let Some(ty) = entry.ty() {
                self.push(
                    error(
                        "config::type-annotation",
                        "type annotations are not used by tandem",
                    )
                    .at(source, ty.span(), "remove this annotation"),
                );
            }
        }
    }

    fn load_main(&mut self, src: &Source) {
        let (name, text, dir) = match src {
            Source::Path(path) => match std::fs::read_to_string(path) {
                Ok(text) => (
                    path.display().to_string(),
                    text,
                    path.parent().map(Path::to_path_buf).unwrap_or_default(),
                ),
                Err(err) => {
                    let id = self.sources.add(
                        path.display().to_string(),
                        String::new(),
                        SourceKind::File,
                    );
                    let source = self.sources.get(id).clone();
                    self.push(
                        error(
                            "config::read",
                            format!("cannot read {}: {err}", path.display()),
                        )
                        .in_source(&source),
                    );
                    return;
                }
            },
            Source::Stdin(text) => ("<stdin>".to_string(), text.clone(), PathBuf::new()),
        };
        let id = self.sources.add(name.clone(), text, SourceKind::File);
        if let Source::Path(path) = src {
            self.stack.push((
                std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
                name,
            ));
        } else {
            self.stack.push((PathBuf::from("<stdin>"), name));
        }
        let Some(doc) = self.parse(id) else { return };
        let mut found: Option<&KdlNode> = None;
        for node in doc.nodes() {
            if node.name().value() == "experiment" {
                if let Some(first) = found {
                    self.push(
                        error(
                            "config::duplicate-experiment",
                            "a file holds one experiment",
                        )
                        .at(id, node.name().span(), "second experiment")
                        .also(id, first.name().span(), "first experiment")
                        .help("put each experiment in its own file; share settings with `include`"),
                    );
                } else {
                    found = Some(node);
                }
            } else {
                self.push(
                    error(
                        "config::top-level",
                        format!("unexpected `{}` outside `experiment`", node.name().value()),
                    )
                    .at(id, node.name().span(), "not inside an experiment")
                    .help("settings go inside `experiment \"name\" { ... }`"),
                );
            }
        }
        let Some(node) = found else {
            self.push(
                error("config::no-experiment", "no `experiment` in this file")
                    .at(id, SourceSpan::from(0..0), "expected `experiment \"name\" { ... }`")
                    .help("a file run by tandem holds one `experiment \"name\" { ... }`; files holding only settings are meant to be included"),
            );
            return;
        };
        self.reject_annotations(node, id);
        let raw = raw_of_node(node);
        if raw.args.is_empty() {
            self.push(
                error("config::missing-value", "`experiment` needs a name")
                    .at(id, node.name().span(), "no name")
                    .help("write `experiment \"my-run\" { ... }`"),
            );
        } else {
            for (_, _, span) in &raw.props {
                self.push(
                    error(
                        "config::unexpected-property",
                        "`experiment` takes no properties",
                    )
                    .at(id, *span, "not allowed here")
                    .help("settings go inside the block"),
                );
            }
            let name_raw = Raw {
                args: raw.args.clone(),
                props: Vec::new(),
                children: None,
                value_span: raw.value_span,
            };
            self.assignments.push(Assignment {
                target: Target::Field {
                    section: 0,
                    name: "name".into(),
                    name_span: node.name().span(),
                },
                raw: name_raw,
                source: id,
            });
        }
        // Without a block nothing else can be checked; one error says it all.
        if node.children().is_some() {
            self.experiment_at = Some((id, node.name().span()));
        }
        match node.children() {
            Some(body) => self.walk_body(body, id, &dir),
            None => self.push(
                error(
                    "config::missing-block",
                    "`experiment` has no settings block",
                )
                .at(id, node.name().span(), "expected `{ ... }` after the name")
                .help("at least `env \"<game>\"` is required"),
            ),
        }
    }

    fn walk_body(&mut self, body: &KdlDocument, source: SourceId, dir: &Path) {
        let mut seen = HashMap::new();
        for node in body.nodes() {
            self.reject_annotations(node, source);
            let name = node.name().value();
            if schema::TOP.common.iter().any(|f| f.name == name) {
                self.check_duplicate(&mut seen, name, "", node.name().span(), source);
            }
            if name == "include" {
                self.include(node, source, dir);
            } else if let Some(section) = schema::section(name) {
                self.walk_section(node, section, source);
            } else if name != "name" && schema::TOP.common.iter().any(|f| f.name == name) {
                self.assignments.push(Assignment {
                    target: Target::Field {
                        section: 0,
                        name: name.to_string(),
                        name_span: node.name().span(),
                    },
                    raw: raw_of_node(node),
                    source,
                });
            } else {
                let candidates = body_names();
                let owner = SECTIONS.iter().skip(1).find(|s| {
                    s.common
                        .iter()
                        .chain(s.kinds.iter().flat_map(|k| k.fields.iter()))
                        .any(|f| f.name == name)
                });
                let help = match owner {
                    Some(section) => format!(
                        "`{name}` is a setting of `{}`: write it inside `{} {{ ... }}`",
                        section.name, section.name
                    ),
                    None if name == "experiment" => {
                        "an experiment cannot contain another".to_string()
                    }
                    None => did_you_mean(name, candidates.iter().copied()),
                };
                self.push(
                    error(
                        "config::unknown-node",
                        format!("unknown node `{name}` in `experiment`"),
                    )
                    .at(source, node.name().span(), "unknown node")
                    .help(help),
                );
            }
        }
    }

    fn include(&mut self, node: &KdlNode, source: SourceId, dir: &Path) {
        let raw = raw_of_node(node);
        let path_arg = match (
            raw.args.as_slice(),
            raw.props.is_empty(),
            raw.children.is_none(),
        ) {
            ([(KdlValue::String(p), span)], true, true) => (p.clone(), *span),
            _ => {
                self.push(
                    error("config::include-syntax", "`include` takes exactly one path")
                        .at(source, raw.value_span, "expected one string")
                        .help("write `include \"relative/path.kdl\"` (relative to this file)"),
                );
                return;
            }
        };
        let (rel, span) = path_arg;
        if !self.allow_includes {
            self.push(
                error(
                    "config::canonical-include",
                    "a canonical config cannot include files",
                )
                .at(source, span, "include in a canonical config")
                .help("canonical configs come from `tandem resolve`, which expands every include"),
            );
            return;
        }
        let path = dir.join(&rel);
        let display = path.display().to_string();
        let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if let Some(pos) = self.stack.iter().position(|(p, _)| *p == canonical) {
            let mut chain: Vec<String> = self.stack[pos..].iter().map(|(_, n)| n.clone()).collect();
            chain.push(display);
            self.push(
                error("config::include-cycle", "include cycle")
                    .at(
                        source,
                        span,
                        "this include leads back to a file being included",
                    )
                    .help(format!("the chain is {}", chain.join(" -> "))),
            );
            return;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) => {
                let reason = if err.kind() == std::io::ErrorKind::NotFound {
                    "no such file".to_string()
                } else {
                    err.to_string()
                };
                let base = if dir.as_os_str().is_empty() {
                    ".".to_string()
                } else {
                    dir.display().to_string()
                };
                self.push(
                    error(
                        "config::include-missing",
                        format!("cannot read included file `{display}`"),
                    )
                    .at(source, span, reason)
                    .help(format!(
                        "include paths are relative to the including file's folder ({base})"
                    )),
                );
                return;
            }
        };
        let id = self.sources.add(display.clone(), text, SourceKind::File);
        let Some(doc) = self.parse(id) else { return };
        self.stack.push((canonical, display));
        if let Some(node) = doc
            .nodes()
            .iter()
            .find(|n| n.name().value() == "experiment")
        {
            self.push(
                error("config::include-experiment", "an included file cannot hold an `experiment`")
                    .at(id, node.name().span(), "experiment in an included file")
                    .help("included files hold settings (`algorithm`, `env`, ...) directly at their top level"),
            );
        } else {
            let new_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            self.walk_body(&doc, id, &new_dir);
        }
        self.stack.pop();
    }

    /// The same setting twice in one block is almost always a slip (across files
    /// and blocks, later values override earlier ones on purpose).
    fn check_duplicate(
        &mut self,
        seen: &mut HashMap<String, SourceSpan>,
        name: &str,
        section: &str,
        span: SourceSpan,
        source: SourceId,
    ) {
        let path = if section.is_empty() {
            name.to_string()
        } else {
            format!("{section}.{name}")
        };
        match seen.get(name) {
            Some(first) => self.push(
                error(
                    "config::duplicate-setting",
                    format!("`{path}` is set twice in one block"),
                )
                .at(source, span, "set again here")
                .also(source, *first, "first set here")
                .help("remove one; to override a value, do it in a later block or file"),
            ),
            None => {
                seen.insert(name.to_string(), span);
            }
        }
    }

    fn walk_section(&mut self, node: &KdlNode, section: &'static Section, source: SourceId) {
        let index = section_index(section);
        let raw = raw_of_node(node);
        let mut seen = HashMap::new();
        for (key, _, span) in &raw.props {
            self.check_duplicate(&mut seen, key, section.name, *span, source);
        }
        for child in node.children().map(|c| c.nodes()).unwrap_or_default() {
            let name = child.name().value();
            if name != "include" {
                self.check_duplicate(&mut seen, name, section.name, child.name().span(), source);
            }
        }
        for (i, (value, span)) in raw.args.iter().enumerate() {
            if !section.has_kinds() {
                self.push(
                    error(
                        "config::unexpected-argument",
                        format!("`{}` takes no argument", section.name),
                    )
                    .at(source, *span, "unexpected argument")
                    .help(format!(
                        "its settings go in its block, e.g. `{} {{ {} ... }}`",
                        section.name, section.common[0].name
                    )),
                );
            } else if i > 0 {
                self.push(
                    error(
                        "config::unexpected-argument",
                        format!(
                            "`{}` takes one argument, its {}",
                            section.name, section.kind_key
                        ),
                    )
                    .at(source, *span, "extra argument"),
                );
            } else {
                self.assignments.push(Assignment {
                    target: Target::Kind { section: index },
                    raw: Raw {
                        args: vec![(value.clone(), *span)],
                        props: Vec::new(),
                        children: None,
                        value_span: *span,
                    },
                    source,
                });
            }
        }
        for (key, value, span) in &raw.props {
            self.assignments.push(Assignment {
                target: Target::Field {
                    section: index,
                    name: key.clone(),
                    name_span: *span,
                },
                raw: Raw {
                    args: vec![(value.clone(), *span)],
                    props: Vec::new(),
                    children: None,
                    value_span: *span,
                },
                source,
            });
        }
        if let Some(children) = node.children() {
            for child in children.nodes() {
                self.reject_annotations(child, source);
                if child.name().value() == "include" {
                    self.push(
                        error("config::include-placement", "`include` is only allowed directly inside `experiment`")
                            .at(source, child.name().span(), "include inside a section")
                            .help("move the include to the experiment's top level (or to the top of an included file)"),
                    );
                    continue;
                }
                self.assignments.push(Assignment {
                    target: Target::Field {
                        section: index,
                        name: child.name().value().to_string(),
                        name_span: child.name().span(),
                    },
                    raw: raw_of_node(child),
                    source,
                });
            }
        }
    }

    fn load_set(&mut self, text: &str) {
        let id = self
            .sources
            .add("--set".to_string(), text.to_string(), SourceKind::Set);
        let whole = SourceSpan::from(0..text.len());
        let Some(eq) = text.find('=') else {
            self.push(
                error("config::set-syntax", "`--set` needs PATH=VALUE")
                    .at(id, whole, "no `=` here")
                    .help("for example `--set algorithm.lr=0.001` or `--set train.max-steps=4096`"),
            );
            return;
        };
        let path = &text[..eq];
        let path_span = SourceSpan::from(0..eq);
        let value_text = &text[eq + 1..];
        let (section_name, field) = match path.split_once('.') {
            Some((s, f)) => (s, Some(f)),
            None => (path, None),
        };
        let target = match (schema::section(section_name), field) {
            (Some(section), Some(f)) => Some(Target::Field {
                section: section_index(section),
                name: f.to_string(),
                name_span: path_span,
            }),
            (Some(section), None) if section.has_kinds() => Some(Target::Kind {
                section: section_index(section),
            }),
            (None, None) if schema::TOP.common.iter().any(|f| f.name == path) => {
                Some(Target::Field {
                    section: 0,
                    name: path.to_string(),
                    name_span: path_span,
                })
            }
            _ => None,
        };
        let Some(target) = target else {
            let paths = all_paths();
            self.push(
                error("config::unknown-path", format!("unknown setting `{path}`"))
                    .at(id, path_span, "no such setting")
                    .help(did_you_mean(path, paths.iter().map(String::as_str))),
            );
            return;
        };
        let is_wrappers = matches!(&target, Target::Field { section, name, .. } if *section == section_index(&schema::ENV) && name == "wrappers");
        // Parse the value at its own offset so spans point into the `--set` text.
        let synthetic = if is_wrappers {
            format!("{}{value_text}", " ".repeat(eq + 1))
        } else if eq >= 1 {
            format!("{}_ {value_text}", " ".repeat(eq - 1))
        } else {
            format!("_ {value_text}")
        };
        let parsed = match KdlDocument::parse(&synthetic) {
            Ok(doc) => doc,
            Err(err) => {
                for d in err.diagnostics {
                    let message = d
                        .message
                        .clone()
                        .unwrap_or_else(|| "not a KDL value".to_string());
                    let span = SourceSpan::new(
                        d.span.offset().min(text.len()).into(),
                        d.span.len().min(text.len().saturating_sub(d.span.offset())),
                    );
                    self.push(
                        error("config::set-syntax", format!("cannot parse the value of `--set {path}`: {message}"))
                            .at(id, span, d.label.clone().unwrap_or_else(|| "here".into()))
                            .help("values are written as in KDL files: 0.001, #true, #null, \"text\" (bare words are strings)"),
                    );
                }
                return;
            }
        };
        let value_span = SourceSpan::from(eq + 1..text.len());
        let raw = if is_wrappers {
            Raw {
                args: Vec::new(),
                props: Vec::new(),
                children: Some(parsed),
                value_span,
            }
        } else {
            match parsed.nodes() {
                [node] => {
                    let mut raw = raw_of_node(node);
                    if raw.args.is_empty() && raw.props.is_empty() {
                        raw.value_span = value_span;
                    }
                    raw
                }
                _ => {
                    self.push(
                        error(
                            "config::set-syntax",
                            format!("the value of `--set {path}` must be one KDL value list"),
                        )
                        .at(id, value_span, "not a single value")
                        .help("values are written as in KDL files: 0.001, #true, #null, \"text\""),
                    );
                    return;
                }
            }
        };
        self.assignments.push(Assignment {
            target,
            raw,
            source: id,
        });
    }
}

/// The KDL parser recovers and reports follow-on errors: a block it could not
/// close is reported twice, and "expected end of document" follows most errors.
/// Keep the first report of each, and "end of document" only when alone.
fn useful_syntax_errors(mut diags: Vec<kdl::KdlDiagnostic>) -> Vec<kdl::KdlDiagnostic> {
    diags.sort_by_key(|d| d.span.offset());
    let alone = diags.len() == 1;
    let mut seen_unclosed = false;
    diags.retain(|d| {
        let label = d.label.as_deref().unwrap_or("");
        if label == "not EOF" {
            return alone;
        }
        if label == "not closed" {
            let first = !seen_unclosed;
            seen_unclosed = true;
            return first;
        }
        true
    });
    diags
}

/// Node names allowed directly inside `experiment`.
fn body_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = vec!["include"];
    names.extend(
        schema::TOP
            .common
            .iter()
            .map(|f| f.name)
            .filter(|n| *n != "name"),
    );
    names.extend(SECTIONS.iter().skip(1).map(|s| s.name));
    names
}

/// Every path `--set` accepts.
fn all_paths() -> Vec<String> {
    let mut paths: Vec<String> = schema::TOP
        .common
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    for section in SECTIONS.iter().skip(1) {
        if section.has_kinds() {
            paths.push(section.name.to_string());
        }
        for field in section
            .common
            .iter()
            .chain(section.kinds.iter().flat_map(|k| k.fields.iter()))
        {
            let path = section.path(field.name);
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    paths
}

fn kind_noun(section: &Section) -> &'static str {
    match section.name {
        "env" => "game",
        "sync" => "sync policy",
        "network" => "network",
        _ => "algorithm",
    }
}

fn found(value: &KdlValue) -> String {
    match value {
        KdlValue::String(s) => format!("the string \"{s}\""),
        KdlValue::Integer(i) => format!("the integer {i}"),
        KdlValue::Float(x) => format!("the number {x}"),
        KdlValue::Bool(b) => format!("#{b}"),
        KdlValue::Null => "#null".to_string(),
    }
}

/// A hint for common slips: quoted numbers, bare-word booleans.
fn type_hint(ty: &Ty, value: &KdlValue) -> Option<String> {
    match (ty, value) {
        (Ty::Int { .. } | Ty::Float { .. }, KdlValue::String(s))
            if s.trim().parse::<f64>().is_ok() =>
        {
            Some("remove the quotes: numbers are written without them".to_string())
        }
        (Ty::Bool, KdlValue::String(s)) if s == "true" || s == "false" => {
            Some(format!("KDL v2 writes booleans as #{s}"))
        }
        _ => None,
    }
}

struct Checker<'a> {
    source: SourceId,
    path: &'a str,
}

impl Checker<'_> {
    fn wrong(&self, field: &Field, value: &KdlValue, span: SourceSpan) -> DiagBuilder {
        let nullable = if field.nullable { " or #null" } else { "" };
        let b = error("config::type", format!("wrong type for `{}`", self.path)).at(
            self.source,
            span,
            format!(
                "expected {}{nullable}, found {}",
                schema::describe(&field.ty),
                found(value)
            ),
        );
        b.help(
            type_hint(&field.ty, value)
                .unwrap_or_else(|| format!("`{}`: {}", field.name, field.doc)),
        )
    }

    fn range(&self, field: &Field, shown: String, span: SourceSpan) -> DiagBuilder {
        error("config::range", format!("`{}` is out of range", self.path))
            .at(
                self.source,
                span,
                format!("must be {}, found {shown}", schema::describe(&field.ty)),
            )
            .help(format!("`{}`: {}", field.name, field.doc))
    }

    /// Checks one value of a single-valued setting.
    fn scalar(
        &self,
        field: &Field,
        value: &KdlValue,
        span: SourceSpan,
    ) -> Result<Val, DiagBuilder> {
        if value.is_null() {
            return if field.nullable {
                Ok(Val::Null)
            } else {
                Err(self.wrong(field, value, span))
            };
        }
        match (&field.ty, value) {
            (Ty::Int { min, max }, KdlValue::Integer(i)) => {
                if *i < *min as i128 || *i > *max as i128 {
                    Err(self.range(field, i.to_string(), span))
                } else {
                    Ok(Val::Int(*i as i64))
                }
            }
            (
                Ty::Float {
                    min,
                    min_open,
                    max,
                    max_open,
                },
                KdlValue::Integer(_) | KdlValue::Float(_),
            ) => {
                let x = match value {
                    KdlValue::Integer(i) => *i as f64,
                    KdlValue::Float(x) => *x,
                    _ => 0.0,
                };
                let below = if *min_open { x <= *min } else { x < *min };
                let above = if *max_open { x >= *max } else { x > *max };
                if !x.is_finite() || below || above {
                    let shown = if x.is_nan() {
                        "#nan".to_string()
                    } else if x.is_infinite() {
                        format!("{}inf", if x < 0.0 { "#-" } else { "#" })
                    } else {
                        format!("{x}")
                    };
                    Err(self.range(field, shown, span))
                } else {
                    Ok(Val::Float(x))
                }
            }
            (Ty::Bool, KdlValue::Bool(b)) => Ok(Val::Bool(*b)),
            (Ty::Choice(choices), KdlValue::String(s)) => {
                if choices.contains(&s.as_str()) {
                    Ok(Val::Str(s.clone()))
                } else {
                    Err(error(
                        "config::unknown-value",
                        format!("unknown value `{s}` for `{}`", self.path),
                    )
                    .at(
                        self.source,
                        span,
                        format!("expected {}", schema::describe(&field.ty)),
                    )
                    .help(did_you_mean(s, choices.iter().copied())))
                }
            }
            (Ty::Name, KdlValue::String(s)) => {
                let ok = !s.is_empty()
                    && s.len() <= 128
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    && !s.starts_with('.');
                if ok {
                    Ok(Val::Str(s.clone()))
                } else {
                    Err(error("config::name", format!("invalid experiment name \"{s}\""))
                        .at(self.source, span, "not a valid name")
                        .help("names become directory names: use 1 to 128 letters, digits, `-`, `_` or `.`, not starting with `.`"))
                }
            }
            (Ty::Threads, KdlValue::String(s)) if s == "auto" => Ok(Val::Threads(Threads::Auto)),
            (Ty::Threads, KdlValue::Integer(i)) if *i >= 1 && *i <= 4096 => {
                Ok(Val::Threads(Threads::PerRank(*i as usize)))
            }
            (Ty::Threads, KdlValue::Integer(i)) => Err(self.range(
                &Field {
                    ty: Ty::Int { min: 1, max: 4096 },
                    ..*field
                },
                i.to_string(),
                span,
            )),
            _ => Err(self.wrong(field, value, span)),
        }
    }

    /// Checks a whole node, property or `--set` value against a setting.
    fn value(&self, field: &Field, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let path = self.path;
        match field.ty {
            Ty::Devices => return self.devices(raw).map(|v| (v, Vec::new())),
            Ty::Wrappers => return self.wrappers(raw),
            _ => {}
        }
        let mut errs = Vec::new();
        if let Some(children) = &raw.children {
            errs.push(
                error(
                    "config::unexpected-block",
                    format!("`{path}` takes no block"),
                )
                .at(source, children.span(), "unexpected block")
                .help(format!(
                    "write the value after the name, e.g. `{}`",
                    example(field)
                )),
            );
        }
        for (key, _, span) in &raw.props {
            errs.push(
                error(
                    "config::unexpected-property",
                    format!("`{path}` takes no properties"),
                )
                .at(source, *span, format!("unexpected `{key}=`"))
                .help(format!(
                    "write the value after the name, e.g. `{}`",
                    example(field)
                )),
            );
        }
        if let Ty::IntList { min, max } = field.ty {
            if raw.args.is_empty() {
                errs.push(
                    error(
                        "config::missing-value",
                        format!("`{path}` needs at least one value"),
                    )
                    .at(source, raw.value_span, "no value")
                    .help(format!("e.g. `{}`", example(field))),
                );
            }
            let mut list = Vec::new();
            for (value, span) in &raw.args {
                match value {
                    KdlValue::Integer(i) if *i >= min as i128 && *i <= max as i128 => {
                        list.push(*i as i64)
                    }
                    KdlValue::Integer(i) => errs.push(self.range(field, i.to_string(), *span)),
                    other => errs.push(self.wrong(field, other, *span)),
                }
            }
            return if errs.is_empty() {
                Ok((Val::IntList(list), Vec::new()))
            } else {
                Err(errs)
            };
        }
        match raw.args.as_slice() {
            [] => errs.push(
                error("config::missing-value", format!("`{path}` needs a value"))
                    .at(source, raw.value_span, "no value")
                    .help(format!("e.g. `{}`", example(field))),
            ),
            [(value, span), rest @ ..] => {
                for (_, extra) in rest {
                    errs.push(
                        error("config::extra-value", format!("`{path}` takes one value"))
                            .at(source, *extra, "extra value")
                            .help(format!("e.g. `{}`", example(field))),
                    );
                }
                match self.scalar(field, value, *span) {
                    Ok(v) if errs.is_empty() => return Ok((v, Vec::new())),
                    Ok(_) => {}
                    Err(e) => errs.push(e),
                }
            }
        }
        Err(errs)
    }

    fn devices(&self, raw: &Raw) -> Result<Val, Vec<DiagBuilder>> {
        let source = self.source;
        let mut errs = Vec::new();
        if let Some(children) = &raw.children {
            errs.push(
                error("config::unexpected-block", "`devices` takes no block")
                    .at(source, children.span(), "unexpected block")
                    .help("write `devices \"cpu\" \"cpu\"` or `devices count=2 kind=\"cuda\"`"),
            );
        }
        let mut devices: Vec<(Device, SourceSpan)> = Vec::new();
        if !raw.props.is_empty() {
            if let Some((_, span)) = raw.args.first() {
                errs.push(
                    error(
                        "config::devices-form",
                        "`devices` takes either a list or count= and kind=, not both",
                    )
                    .at(source, *span, "a listed device")
                    .help(
                        "write `devices \"cuda:0\" \"cuda:1\"` or `devices count=2 kind=\"cuda\"`",
                    ),
                );
            }
            let count_field = Field {
                name: "count",
                ty: Ty::Int { min: 1, max: 1024 },
                nullable: false,
                default: Dflt::Required,
                doc: "Number of devices.",
            };
            let kind_field = Field {
                name: "kind",
                ty: Ty::Choice(&["cpu", "cuda"]),
                nullable: false,
                default: Dflt::Required,
                doc: "Device kind.",
            };
            let mut count = None;
            let mut kind = None;
            for (key, value, span) in &raw.props {
                let field = match key.as_str() {
                    "count" => &count_field,
                    "kind" => &kind_field,
                    other => {
                        errs.push(
                            error(
                                "config::unknown-property",
                                format!("unknown property `{other}` of `devices`"),
                            )
                            .at(source, *span, "unknown property")
                            .help(did_you_mean(other, ["count", "kind"])),
                        );
                        continue;
                    }
                };
                let checker = Checker {
                    source,
                    path: if key == "count" {
                        "devices.count"
                    } else {
                        "devices.kind"
                    },
                };
                match checker.scalar(field, value, *span) {
                    Ok(Val::Int(n)) => count = Some((n, *span)),
                    Ok(Val::Str(k)) => kind = Some(k),
                    Ok(_) => {}
                    Err(e) => errs.push(e),
                }
            }
            match (count, kind) {
                (Some((n, span)), Some(k)) => {
                    for i in 0..n {
                        devices.push((
                            if k == "cuda" {
                                Device::Cuda(i as u32)
                            } else {
                                Device::Cpu
                            },
                            span,
                        ));
                    }
                }
                (c, k) if errs.is_empty() => errs.push(
                    error(
                        "config::missing-value",
                        format!(
                            "`devices` needs `{}`",
                            if c.is_none() { "count" } else { "kind" }
                        ),
                    )
                    .at(source, raw.value_span, "incomplete")
                    .help(if k.is_none() {
                        "add kind=\"cpu\" or kind=\"cuda\""
                    } else {
                        "add count=N"
                    }),
                ),
                _ => {}
            }
        } else {
            if raw.args.is_empty() {
                errs.push(
                    error(
                        "config::missing-value",
                        "`devices` needs at least one device",
                    )
                    .at(source, raw.value_span, "no device")
                    .help("write `devices \"cpu\"` or `devices \"cuda:0\" \"cuda:1\"`"),
                );
            }
            for (value, span) in &raw.args {
                let parsed = match value {
                    KdlValue::String(s) => Device::parse(s),
                    _ => None,
                };
                match parsed {
                    Some(d) => devices.push((d, *span)),
                    None => {
                        let shown = match value {
                            KdlValue::String(s) => format!("`{s}`"),
                            other => found(other),
                        };
                        let help = match value {
                            KdlValue::String(s) if s == "cuda" || s == "gpu" => {
                                "name the CUDA device: \"cuda:0\", \"cuda:1\", ...".to_string()
                            }
                            KdlValue::String(s) if s.starts_with("gpu:") => {
                                format!("did you mean \"cuda:{}\"?", &s[4..])
                            }
                            _ => "a device is \"cpu\" or \"cuda:N\" (N = 0, 1, ...)".to_string(),
                        };
                        errs.push(
                            error("config::unknown-device", format!("unknown device {shown}"))
                                .at(source, *span, "not a device")
                                .help(help),
                        );
                    }
                }
            }
        }
        let mut first_seen: HashMap<Device, SourceSpan> = HashMap::new();
        for (device, span) in &devices {
            if device.is_cuda() {
                if let Some(first) = first_seen.get(device) {
                    errs.push(
                        error("config::duplicate-device", format!("device `{device}` appears twice"))
                            .at(source, *span, "duplicate")
                            .also(source, *first, "first here")
                            .help("each CUDA device runs one rank; only \"cpu\" may repeat, since CPU ranks share the machine"),
                    );
                } else {
                    first_seen.insert(*device, *span);
                }
            }
        }
        let cuda = devices.iter().find(|(d, _)| d.is_cuda());
        let cpu = devices.iter().find(|(d, _)| !d.is_cuda());
        if let (Some((c, cspan)), Some((_, pspan))) = (cuda, cpu) {
            errs.push(
                error(
                    "config::mixed-devices",
                    "`devices` mixes CPU and CUDA ranks",
                )
                .at(source, *pspan, "a CPU rank")
                .also(source, *cspan, format!("a CUDA rank ({c})"))
                .help("all ranks use one kind of device (Gloo for CPU, NCCL for CUDA)"),
            );
        }
        if errs.is_empty() {
            Ok(Val::Devices(devices.into_iter().map(|(d, _)| d).collect()))
        } else {
            Err(errs)
        }
    }

    fn wrappers(&self, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let mut errs = Vec::new();
        for (_, span) in &raw.args {
            errs.push(
                error(
                    "config::unexpected-argument",
                    "`wrappers` takes a block, not arguments",
                )
                .at(source, *span, "unexpected argument")
                .help("write `wrappers { grayscale; frame-stack 4 }`"),
            );
        }
        for (_, _, span) in &raw.props {
            errs.push(
                error(
                    "config::unexpected-property",
                    "`wrappers` takes a block, not properties",
                )
                .at(source, *span, "unexpected property")
                .help("write `wrappers { grayscale; frame-stack 4 }`"),
            );
        }
        let Some(block) = &raw.children else {
            errs.push(
                error("config::missing-block", "`wrappers` needs a block")
                    .at(source, raw.value_span, "no block")
                    .help("write `wrappers { grayscale; frame-stack 4 }` (`wrappers {}` for none)"),
            );
            return Err(errs);
        };
        let mut list = Vec::new();
        let mut spans = Vec::new();
        for node in block.nodes() {
            match self.wrapper(node) {
                Ok(w) => {
                    list.push(w);
                    spans.push(node.span());
                }
                Err(mut e) => errs.append(&mut e),
            }
        }
        if errs.is_empty() {
            Ok((Val::Wrappers(list), spans))
        } else {
            Err(errs)
        }
    }

    fn wrapper(&self, node: &KdlNode) -> Result<Wrapper, Vec<DiagBuilder>> {
        let source = self.source;
        let name = node.name().value();
        let Some(spec) = schema::wrapper(name) else {
            return Err(vec![
                error(
                    "config::unknown-wrapper",
                    format!("unknown wrapper `{name}`"),
                )
                .at(source, node.name().span(), "unknown wrapper")
                .help(did_you_mean(name, schema::WRAPPERS.iter().map(|w| w.name))),
            ]);
        };
        let raw = raw_of_node(node);
        let mut errs = Vec::new();
        let mut given: BTreeMap<&'static str, (Val, SourceSpan)> = BTreeMap::new();
        if let Some(children) = &raw.children {
            errs.push(
                error(
                    "config::unexpected-block",
                    format!("wrapper `{name}` takes no block"),
                )
                .at(source, children.span(), "unexpected block")
                .help("write parameters as properties, e.g. `frame-skip n=4 max-pool=#true`"),
            );
        }
        for (i, (value, span)) in raw.args.iter().enumerate() {
            match spec.params.first() {
                Some(first) if i == 0 => {
                    let path = format!("{}.{}", name, first.name);
                    match (Checker {
                        source,
                        path: &path,
                    })
                    .scalar(first, value, *span)
                    {
                        Ok(v) => {
                            given.insert(first.name, (v, *span));
                        }
                        Err(e) => errs.push(e),
                    }
                }
                Some(_) => errs.push(
                    error(
                        "config::extra-value",
                        format!("wrapper `{name}` takes at most one argument"),
                    )
                    .at(source, *span, "extra argument")
                    .help("name the other parameters, e.g. `frame-skip 4 max-pool=#false`"),
                ),
                None => errs.push(
                    error(
                        "config::unexpected-argument",
                        format!("wrapper `{name}` takes no parameters"),
                    )
                    .at(source, *span, "unexpected argument")
                    .help(format!("write just `{name}`")),
                ),
            }
        }
        for (key, value, span) in &raw.props {
            let Some(param) = spec.params.iter().find(|p| p.name == key) else {
                let help = if spec.params.is_empty() {
                    format!("`{name}` takes no parameters")
                } else {
                    did_you_mean(key, spec.params.iter().map(|p| p.name))
                };
                errs.push(
                    error(
                        "config::unknown-property",
                        format!("unknown parameter `{key}` of wrapper `{name}`"),
                    )
                    .at(source, *span, "unknown parameter")
                    .help(help),
                );
                continue;
            };
            if let Some((_, first)) = given.get(param.name) {
                errs.push(
                    error(
                        "config::duplicate-property",
                        format!("parameter `{key}` of `{name}` is given twice"),
                    )
                    .at(source, *span, "second value")
                    .also(source, *first, "first value"),
                );
                continue;
            }
            let path = format!("{name}.{key}");
            match (Checker {
                source,
                path: &path,
            })
            .scalar(param, value, *span)
            {
                Ok(v) => {
                    given.insert(param.name, (v, *span));
                }
                Err(e) => errs.push(e),
            }
        }
        let mut vals: BTreeMap<&str, Val> = BTreeMap::new();
        for param in spec.params {
            match given.remove(param.name) {
                Some((v, _)) => {
                    vals.insert(param.name, v);
                }
                None => match Val::from_default(&param.default) {
                    Some(v) => {
                        vals.insert(param.name, v);
                    }
                    None => errs.push(
                        error(
                            "config::missing-value",
                            format!("wrapper `{name}` needs `{}`", param.name),
                        )
                        .at(source, node.span(), format!("no `{}`", param.name))
                        .help(format!("e.g. `{name} {}=1000`: {}", param.name, param.doc)),
                    ),
                },
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let int = |k: &str| match vals.get(k) {
            Some(Val::Int(i)) => *i,
            _ => 0,
        };
        let float = |k: &str| match vals.get(k) {
            Some(Val::Float(x)) => *x,
            _ => 0.0,
        };
        let boolean = |k: &str| matches!(vals.get(k), Some(Val::Bool(true)));
        Ok(match name {
            "noop-reset" => Wrapper::NoopReset {
                max: int("max") as u32,
            },
            "fire-reset" => Wrapper::FireReset,
            "frame-skip" => Wrapper::FrameSkip {
                n: int("n") as u32,
                max_pool: boolean("max-pool"),
            },
            "episodic-life" => Wrapper::EpisodicLife,
            "resize" => Wrapper::Resize {
                height: int("height") as u32,
                width: int("width") as u32,
            },
            "grayscale" => Wrapper::Grayscale,
            "clip-reward" => Wrapper::ClipReward,
            "frame-stack" => Wrapper::FrameStack { n: int("n") as u32 },
            "time-limit" => Wrapper::TimeLimit {
                max_steps: int("max-steps") as u64,
            },
            "sticky-actions" => Wrapper::StickyActions {
                probability: float("probability"),
            },
            "normalize-obs" => Wrapper::NormalizeObs {
                clip: float("clip"),
            },
            _ => Wrapper::NormalizeReward {
                gamma: float("gamma"),
                clip: float("clip"),
            },
        })
    }
}

/// A one-line example of a setting, for help texts.
fn example(field: &Field) -> String {
    let value = match field.default {
        Dflt::Required | Dflt::Null => match field.ty {
            Ty::Int { min, .. } => min.max(1).to_string(),
            Ty::Float { .. } => "0.1".into(),
            Ty::Name => "\"my-run\"".into(),
            _ => "...".into(),
        },
        ref d => schema::default_text(d).trim_matches('`').to_string(),
    };
    format!("{} {value}", field.name)
}

/// The state of the sequential application of assignments.
struct Applier<'a> {
    sources: &'a Sources,
    diags: Vec<Diagnostic>,
    entries: BTreeMap<String, Entry>,
    /// The kind currently in effect per section (`None` until one is assigned).
    current: Vec<Option<&'static Kind>>,
    /// The last valid kind assigned per section in the whole input.
    final_kind: Vec<Option<&'static Kind>>,
    /// A section whose kind was invalid: its settings are not checked (avoids noise).
    broken: Vec<bool>,
    /// Paths whose value was invalid: cross-field checks skip them.
    failed: BTreeSet<String>,
}

impl Applier<'_> {
    fn push(&mut self, b: DiagBuilder) {
        self.diags.push(b.finish(self.sources));
    }

    fn effective_kind(&self, section: usize) -> Option<&'static Kind> {
        let s = SECTIONS[section];
        self.current[section]
            .or(self.final_kind[section])
            .or_else(|| s.default_kind.and_then(|k| s.kind(k)))
    }

    fn apply(&mut self, a: &Assignment) {
        match &a.target {
            Target::Kind { section } => self.apply_kind(*section, a),
            Target::Field {
                section,
                name,
                name_span,
            } => self.apply_field(*section, name, *name_span, a),
        }
    }

    fn apply_kind(&mut self, index: usize, a: &Assignment) {
        let section = SECTIONS[index];
        let noun = kind_noun(section);
        let kind = match a.raw.args.as_slice() {
            [(KdlValue::String(s), span)] => match section.kind(s) {
                Some(k) => Ok((k, *span)),
                None => Err(
                    error("config::unknown-kind", format!("unknown {noun} `{s}`"))
                        .at(a.source, *span, format!("not a known {noun}"))
                        .help(did_you_mean(s, section.kinds.iter().map(|k| k.name))),
                ),
            },
            [(other, span)] => Err(error(
                "config::type",
                format!("wrong type for `{}`", section.name),
            )
            .at(
                a.source,
                *span,
                format!("expected a {noun} name (a string), found {}", found(other)),
            )
            .help(did_you_mean("", section.kinds.iter().map(|k| k.name)))),
            _ => Err(error(
                "config::missing-value",
                format!("`{}` needs one {noun}", section.name),
            )
            .at(a.source, a.raw.value_span, "expected one value")),
        };
        match kind {
            Ok((kind, span)) => {
                let changed = self.current[index].is_some_and(|k| !std::ptr::eq(k, kind));
                if changed {
                    let prefix = format!("{}.", section.name);
                    let common: Vec<String> = section
                        .common
                        .iter()
                        .map(|f| section.path(f.name))
                        .collect();
                    self.entries
                        .retain(|path, _| !path.starts_with(&prefix) || common.contains(path));
                }
                self.current[index] = Some(kind);
                self.broken[index] = false;
                self.failed.remove(section.name);
                self.entries.insert(
                    section.name.to_string(),
                    Entry {
                        val: Val::Str(kind.name.to_string()),
                        source: a.source,
                        span,
                        items: Vec::new(),
                    },
                );
            }
            Err(b) => {
                self.push(b);
                self.broken[index] = true;
                self.failed.insert(section.name.to_string());
            }
        }
    }

    fn apply_field(&mut self, index: usize, name: &str, name_span: SourceSpan, a: &Assignment) {
        let section = SECTIONS[index];
        let kind = self.effective_kind(index);
        let path = section.path(name);
        let field = section.fields(kind).find(|f| f.name == name);
        let Some(field) = field else {
            if self.broken[index] {
                return;
            }
            let label;
            let help;
            let place = match kind {
                Some(k) => format!("`{} \"{}\"`", section.name, k.name),
                None => format!("`{}`", section.name),
            };
            let other_kind = section
                .kinds
                .iter()
                .find(|k| k.fields.iter().any(|f| f.name == name));
            if let (Some(other), Some(kind)) = (other_kind, kind) {
                label = format!("not a setting of {}", kind.name);
                help = format!(
                    "`{name}` is a setting of `{} \"{}\"`",
                    section.name, other.name
                );
            } else {
                label = "unknown setting".to_string();
                let names: Vec<&str> = section.fields(kind).map(|f| f.name).collect();
                help = did_you_mean(name, names.iter().copied());
            }
            let message = if section.name.is_empty() {
                format!("unknown setting `{name}`")
            } else {
                format!("unknown setting `{name}` in {place}")
            };
            self.push(
                error("config::unknown-setting", message)
                    .at(a.source, name_span, label)
                    .help(help),
            );
            return;
        };
        let checker = Checker {
            source: a.source,
            path: &path,
        };
        match checker.value(field, &a.raw) {
            Ok((val, items)) => {
                self.failed.remove(&path);
                let span = if items.is_empty() {
                    a.raw.value_span
                } else {
                    name_span
                };
                self.entries.insert(
                    path,
                    Entry {
                        val,
                        source: a.source,
                        span,
                        items,
                    },
                );
            }
            Err(errs) => {
                for e in errs {
                    self.push(e);
                }
                self.failed.insert(path);
            }
        }
    }
}

/// Runs the whole resolution.
pub(crate) fn run(
    source: &Source,
    sets: &[String],
    allow_includes: bool,
) -> Result<Resolved, Diagnostics> {
    let mut loader = Loader {
        sources: Sources::default(),
        diags: Vec::new(),
        assignments: Vec::new(),
        stack: Vec::new(),
        experiment_at: None,
        allow_includes,
    };
    loader.load_main(source);
    for set in sets {
        loader.load_set(set);
    }
    let Loader {
        sources,
        diags,
        assignments,
        experiment_at,
        ..
    } = loader;
    let Some((main_source, experiment_span)) = experiment_at else {
        return Err(Diagnostics::new(diags));
    };

    let mut applier = Applier {
        sources: &sources,
        diags,
        entries: BTreeMap::new(),
        current: vec![None; SECTIONS.len()],
        final_kind: vec![None; SECTIONS.len()],
        broken: vec![false; SECTIONS.len()],
        failed: BTreeSet::new(),
    };
    for a in &assignments {
        if let (Target::Kind { section }, [(KdlValue::String(s), _)]) =
            (&a.target, a.raw.args.as_slice())
            && let Some(k) = SECTIONS[*section].kind(s)
        {
            applier.final_kind[*section] = Some(k);
        }
    }
    for a in &assignments {
        applier.apply(a);
    }

    // Fill every default explicitly.
    let mut provenance = BTreeMap::new();
    let mut values = Values::new();
    for (index, section) in SECTIONS.iter().enumerate() {
        if section.has_kinds() {
            let kind = applier.current[index]
                .or_else(|| section.default_kind.and_then(|k| section.kind(k)));
            match kind {
                Some(k) => {
                    if !applier.entries.contains_key(section.name) {
                        values.insert(section.name.to_string(), Val::Str(k.name.to_string()));
                        provenance.insert(section.name.to_string(), Origin::Default);
                    }
                }
                None => {
                    if !applier.broken[index] {
                        let kinds: Vec<String> = section
                            .kinds
                            .iter()
                            .map(|k| format!("\"{}\"", k.name))
                            .collect();
                        applier.push(
                            error(
                                "config::missing-kind",
                                format!("the experiment has no {}", kind_noun(section)),
                            )
                            .at(
                                main_source,
                                experiment_span,
                                format!("no `{} \"<{}>\"`", section.name, section.kind_key),
                            )
                            .help(format!(
                                "add e.g. `{} {}` inside the experiment; known: {}",
                                section.name,
                                kinds[0],
                                kinds.join(", ")
                            )),
                        );
                    }
                    applier.failed.insert(section.name.to_string());
                    values.insert(
                        section.name.to_string(),
                        Val::Str(section.kinds[0].name.to_string()),
                    );
                }
            }
        }
        let kind = section.kind(
            match values
                .get(section.name)
                .or(applier.entries.get(section.name).map(|e| &e.val))
            {
                Some(Val::Str(s)) => s,
                _ => "",
            },
        );
        for field in section.fields(kind) {
            let path = section.path(field.name);
            if !applier.entries.contains_key(&path)
                && let Some(v) = Val::from_default(&field.default)
            {
                values.insert(path.clone(), v);
                provenance.insert(path, Origin::Default);
            }
        }
    }
    for (path, entry) in &applier.entries {
        values.insert(path.clone(), entry.val.clone());
        let src = sources.get(entry.source);
        let origin = match src.kind {
            SourceKind::File => Origin::File {
                path: src.name.clone(),
                line: diag::line_col(&src.text, entry.span.offset()).0,
            },
            SourceKind::Set => Origin::Set {
                text: src.text.to_string(),
            },
        };
        provenance.insert(path.clone(), origin);
    }

    let experiment = values::to_experiment(&values);
    let cross = CrossCheck {
        applier: &mut applier,
        experiment: &experiment,
        main_source,
        experiment_span,
    };
    cross.run();
    if applier.diags.is_empty() {
        Ok(Resolved {
            experiment,
            provenance: Provenance::new(provenance),
        })
    } else {
        Err(Diagnostics::new(applier.diags))
    }
}

/// Checks that involve more than one setting.
struct CrossCheck<'a, 'b> {
    applier: &'a mut Applier<'b>,
    experiment: &'a Experiment,
    main_source: SourceId,
    experiment_span: SourceSpan,
}

impl CrossCheck<'_, '_> {
    fn ok(&self, paths: &[&str]) -> bool {
        paths.iter().all(|p| !self.applier.failed.contains(*p))
    }

    /// Where a value was written; defaults point at the experiment's name.
    fn at(&self, path: &str) -> (SourceId, SourceSpan, bool) {
        match self.applier.entries.get(path) {
            Some(e) => (e.source, e.span, true),
            None => (self.main_source, self.experiment_span, false),
        }
    }

    fn label(&self, path: &str, text: &str) -> (SourceId, SourceSpan, String) {
        let (source, span, written) = self.at(path);
        let text = if written {
            text.to_string()
        } else {
            format!("{text} (`{path}` is the default here)")
        };
        (source, span, text)
    }

    fn report(
        &mut self,
        code: &'static str,
        message: String,
        primary: &str,
        primary_text: &str,
        secondary: Option<(&str, &str)>,
        help: String,
    ) {
        let (s, span, text) = self.label(primary, primary_text);
        let mut b = error(code, message).at(s, span, text);
        if let Some((path, text)) = secondary {
            let (s2, span2, written) = self.at(path);
            if written {
                b = b.also(s2, span2, text.to_string());
            }
        }
        self.applier.push(b.help(help));
    }

    fn run(mut self) {
        let e = self.experiment;
        let world = e.world_size().max(1);
        let world_text = format!("{world} device{}", if world == 1 { "" } else { "s" });
        if self.ok(&["devices", "env.envs"]) && !e.env.envs.is_multiple_of(world) {
            self.report(
                "config::not-divisible",
                format!(
                    "{} environments cannot be split evenly over {world_text}",
                    e.env.envs
                ),
                "env.envs",
                &format!("not a multiple of {world}"),
                Some(("devices", &world_text)),
                format!(
                    "sizes are global: use a multiple of {world}, e.g. envs {}",
                    e.env.envs.div_ceil(world) * world
                ),
            );
        } else if self.ok(&["devices", "env.envs", "train.env-groups"])
            && !e.per_rank_envs().is_multiple_of(e.train.env_groups)
        {
            let per_rank = e.per_rank_envs();
            self.report(
                "config::not-divisible",
                format!(
                    "{} environment groups do not divide each rank's {per_rank} environments",
                    e.train.env_groups
                ),
                "train.env-groups",
                &format!("does not divide {per_rank}"),
                Some(("env.envs", "envs")),
                format!(
                    "each rank steps {per_rank} environments ({} over {world_text}); choose env-groups dividing {per_rank}",
                    e.env.envs
                ),
            );
        }
        match &e.algorithm {
            Algorithm::Ppo(ppo) => {
                let batch = e.per_rank_batch();
                if self.ok(&[
                    "devices",
                    "env.envs",
                    "train.rollout",
                    "algorithm",
                    "algorithm.minibatches",
                ]) && e.env.envs.is_multiple_of(world)
                    && !batch.is_multiple_of(ppo.minibatches)
                {
                    self.report(
                        "config::not-divisible",
                        format!("{} minibatches do not divide each rank's batch of {batch}", ppo.minibatches),
                        "algorithm.minibatches",
                        &format!("does not divide {batch}"),
                        Some(("train.rollout", "rollout")),
                        format!(
                            "each rank collects {} environments x rollout {} = {batch} transitions per update; choose minibatches dividing {batch}",
                            e.per_rank_envs(),
                            e.train.rollout
                        ),
                    );
                } else if self.ok(&["algorithm.micro-batches"])
                    && e.env.envs.is_multiple_of(world)
                    && batch.is_multiple_of(ppo.minibatches)
                    && !(batch / ppo.minibatches).is_multiple_of(ppo.micro_batches)
                {
                    let minibatch = batch / ppo.minibatches;
                    self.report(
                        "config::not-divisible",
                        format!(
                            "{} micro-batches do not divide each rank's minibatch of {minibatch}",
                            ppo.micro_batches
                        ),
                        "algorithm.micro-batches",
                        &format!("does not divide {minibatch}"),
                        Some(("algorithm.minibatches", "minibatches")),
                        format!(
                            "each rank's batch of {batch} splits into {} minibatches of {minibatch}; choose micro-batches dividing {minibatch}",
                            ppo.minibatches
                        ),
                    );
                }
            }
            Algorithm::Dqn(dqn) => {
                for (path, value, what) in [
                    ("algorithm.batch-size", dqn.batch_size, "batch-size"),
                    (
                        "algorithm.buffer-capacity",
                        dqn.buffer_capacity,
                        "buffer-capacity",
                    ),
                ] {
                    if self.ok(&["devices", "algorithm", path]) && !value.is_multiple_of(world) {
                        self.report(
                            "config::not-divisible",
                            format!("{what} {value} cannot be split evenly over {world_text}"),
                            path,
                            &format!("not a multiple of {world}"),
                            Some(("devices", &world_text)),
                            format!(
                                "sizes are global: use a multiple of {world}, e.g. {what} {}",
                                value.div_ceil(world) * world
                            ),
                        );
                    }
                }
                if self.ok(&[
                    "algorithm",
                    "algorithm.batch-size",
                    "algorithm.buffer-capacity",
                ]) && dqn.buffer_capacity < dqn.batch_size
                {
                    self.report(
                        "config::inconsistent",
                        "the replay buffer is smaller than one batch".into(),
                        "algorithm.buffer-capacity",
                        &format!("smaller than batch-size {}", dqn.batch_size),
                        Some(("algorithm.batch-size", "batch-size")),
                        "buffer-capacity must be at least batch-size".into(),
                    );
                }
                if self.ok(&[
                    "algorithm",
                    "algorithm.batch-size",
                    "algorithm.learning-starts",
                ]) && dqn.learning_starts < dqn.batch_size as u64
                {
                    self.report(
                        "config::inconsistent",
                        "learning starts before one batch of transitions exists".into(),
                        "algorithm.learning-starts",
                        &format!("less than batch-size {}", dqn.batch_size),
                        Some(("algorithm.batch-size", "batch-size")),
                        "learning-starts must be at least batch-size".into(),
                    );
                }
                if self.ok(&["algorithm", "train.env-groups"]) && e.train.env_groups > 1 {
                    self.report(
                        "config::inconsistent",
                        "environment groups are for on-policy rollouts".into(),
                        "train.env-groups",
                        "not used by dqn",
                        Some(("algorithm", "dqn")),
                        "dqn steps its environments all at once; remove env-groups or use ppo or a2c".into(),
                    );
                }
                if self.ok(&[
                    "algorithm",
                    "algorithm.epsilon-start",
                    "algorithm.epsilon-end",
                ]) && dqn.epsilon_end > dqn.epsilon_start
                {
                    self.report(
                        "config::inconsistent",
                        "epsilon rises instead of decaying".into(),
                        "algorithm.epsilon-end",
                        &format!("greater than epsilon-start {}", dqn.epsilon_start),
                        Some(("algorithm.epsilon-start", "epsilon-start")),
                        "epsilon-end must be at most epsilon-start".into(),
                    );
                }
            }
            Algorithm::A2c(_) => {}
        }
        if let Some(max) = e.train.max_steps
            && self.ok(&["train.max-steps", "train.total-steps"])
            && max > e.train.total_steps
        {
            self.report(
                "config::inconsistent",
                "max-steps exceeds total-steps".into(),
                "train.max-steps",
                &format!("more than total-steps {}", e.train.total_steps),
                Some(("train.total-steps", "total-steps")),
                "max-steps stops a run early; it cannot extend it past total-steps".into(),
            );
        }
        if self.ok(&["env", "env.wrappers"]) {
            self.wrappers();
        }
        if self.ok(&["env", "env.wrappers", "network"]) {
            self.network();
        }
    }

    fn wrappers(&mut self) {
        let e = self.experiment;
        let game = e.env.game.info();
        let entry = self.applier.entries.get("env.wrappers").cloned();
        let Some(entry) = entry else { return };
        let mut obs = game.observation;
        let mut stacked = false;
        let mut seen: HashMap<&str, SourceSpan> = HashMap::new();
        for (wrapper, span) in e.env.wrappers.iter().zip(entry.items.iter()) {
            let name = wrapper.name();
            let mut problem: Option<(String, String)> = None;
            if let Some(first) = seen.get(name) {
                self.applier.push(
                    error(
                        "config::duplicate-wrapper",
                        format!("wrapper `{name}` appears twice"),
                    )
                    .at(entry.source, *span, "second time")
                    .also(entry.source, *first, "first time")
                    .help("each wrapper may appear once"),
                );
            } else {
                seen.insert(name, *span);
            }
            let here = format!(
                "{} observes {} at this point of the chain",
                game.name,
                obs.describe()
            );
            match wrapper {
                Wrapper::NoopReset { .. } if !game.atari => {
                    problem = Some((
                        "needs an Atari game".into(),
                        format!(
                            "no-op resets randomise Atari starts; {} is not an Atari game",
                            game.name
                        ),
                    ));
                }
                Wrapper::FireReset if !game.has_fire => {
                    problem = Some((
                        "needs a FIRE action".into(),
                        format!("{} has no FIRE action", game.name),
                    ));
                }
                Wrapper::EpisodicLife if !game.has_lives => {
                    problem = Some((
                        "needs a game with lives".into(),
                        format!("{} has no lives", game.name),
                    ));
                }
                Wrapper::Grayscale | Wrapper::Resize { .. } if stacked => {
                    problem = Some((
                        "after frame-stack".into(),
                        format!("`{name}` works on single frames: move it before `frame-stack`"),
                    ));
                }
                Wrapper::Grayscale => match obs {
                    Observation::Image {
                        color: Color::Rgb, ..
                    } => {}
                    Observation::Image { .. } => {
                        problem = Some(("already grayscale".into(), here.clone()))
                    }
                    _ => problem = Some(("needs RGB image observations".into(), here.clone())),
                },
                Wrapper::Resize { .. } if !matches!(obs, Observation::Image { .. }) => {
                    problem = Some(("needs image observations".into(), here.clone()));
                }
                Wrapper::FrameSkip { max_pool: true, .. }
                    if !matches!(obs, Observation::Image { .. }) =>
                {
                    problem = Some((
                        "max-pool needs image observations".into(),
                        format!("{here}; write `max-pool=#false`"),
                    ));
                }
                Wrapper::NormalizeObs { .. } if !matches!(obs, Observation::Vector { .. }) => {
                    problem = Some((
                        "needs vector observations".into(),
                        format!("{here}; networks scale images and planes themselves"),
                    ));
                }
                _ => {}
            }
            if let Some((label, help)) = problem {
                self.applier.push(
                    error(
                        "config::wrapper-mismatch",
                        format!("wrapper `{name}` does not fit {}", game.name),
                    )
                    .at(entry.source, *span, label)
                    .help(help),
                );
            }
            obs = apply_wrapper(obs, wrapper);
            if matches!(wrapper, Wrapper::FrameStack { .. }) {
                stacked = true;
            }
        }
    }

    fn network(&mut self) {
        let e = self.experiment;
        let obs = e.observation();
        let need = match (&e.network.torso, obs) {
            (Torso::NatureCnn { .. }, Observation::Image { height, width, .. })
                if height >= 36 && width >= 36 =>
            {
                None
            }
            (Torso::NatureCnn { .. }, _) => Some("image observations of at least 36x36"),
            (Torso::MinatarCnn { .. }, Observation::Planes { height, width, .. })
                if height >= 3 && width >= 3 =>
            {
                None
            }
            (Torso::MinatarCnn { .. }, _) => Some("binary plane observations (MinAtar)"),
            (
                Torso::ImpalaCnn { .. },
                Observation::Image { height, width, .. }
                | Observation::Planes { height, width, .. },
            ) if height >= 8 && width >= 8 => None,
            (Torso::ImpalaCnn { .. }, _) => Some("image observations of at least 8x8"),
            (Torso::Mlp { .. }, _) => None,
        };
        if let Some(need) = need {
            let name = e.network.torso.name();
            let suggestion = match obs {
                Observation::Vector { .. } => "network \"mlp\"",
                Observation::Planes { .. } => "network \"minatar-cnn\"",
                Observation::Image { .. } => "network \"nature-cnn\"",
            };
            self.report(
                "config::network-mismatch",
                format!(
                    "network `{name}` does not fit the observations of {}",
                    e.env.game.name()
                ),
                "network",
                &format!("needs {need}"),
                Some(("env", "the game")),
                format!(
                    "after its wrappers, {} observes {}; use `{suggestion}`",
                    e.env.game.name(),
                    obs.describe()
                ),
            );
        }
    }
}
