//! Loading: reads the main file and its includes (reporting syntax errors, cycles,
//! misplaced nodes and duplicates) and every `--set` text, and turns each setting
//! into an [`Assignment`], in the order they are to be applied. Nothing is typed
//! here.

use std::collections::HashMap;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::SourceSpan;

use super::{Assignment, Raw, Target, from_json, raw_of_node, section_index};
use crate::Source;
use crate::diag::{DiagBuilder, Diagnostic, SourceId, SourceKind, Sources, did_you_mean, error};
use crate::schema::{self, SECTIONS, Section};

/// Reads files and `--set` texts into assignments.
pub(super) struct Loader {
    pub(super) sources: Sources,
    pub(super) diags: Vec<Diagnostic>,
    pub(super) assignments: Vec<Assignment>,
    /// Canonical paths of the files being included, outermost first, for cycles.
    stack: Vec<(PathBuf, String)>,
    /// The main file's `experiment` node, when it has a block (else nothing more is checked).
    pub(super) experiment_at: Option<(SourceId, SourceSpan)>,
    /// Canonical configs are self-contained: workers must never touch other files.
    allow_includes: bool,
    /// Files read so far (the main one and every include, a file included twice counted
    /// twice) and their bytes, against [`MAX_FILES`] and [`MAX_TOTAL_BYTES`].
    files_read: usize,
    bytes_read: usize,
    /// Words of every text parsed so far, against [`crate::nesting::MAX_WORDS`].
    words_read: usize,
    /// Set once a limit is reported: later includes are skipped without another report.
    limit_reported: bool,
    /// The folder of every file read (as named: relative to the current directory where
    /// the file was), which relative paths written in that file are relative to. Standard
    /// input and `--set` texts have none.
    pub(super) folders: HashMap<SourceId, PathBuf>,
}

/// The most files one resolution reads, includes counted each time they are included: a
/// file that includes another 30 times, four levels deep, would otherwise expand to 810,000
/// reads from 4 KB of text (docs/design.md, "Config size").
pub(crate) const MAX_FILES: usize = 256;

/// The most bytes one resolution reads over all its files: the `kdl` crate parses about
/// 1.5 MB a second of comments, so reading and checking them stays under half a second.
pub(crate) const MAX_TOTAL_BYTES: usize = 2 * crate::MAX_CONFIG_BYTES;

/// Reads the main source, then every `--set` in order.
pub(super) fn load(source: &Source, sets: &[String], allow_includes: bool) -> Loader {
    let mut loader = Loader {
        sources: Sources::default(),
        diags: Vec::new(),
        assignments: Vec::new(),
        stack: Vec::new(),
        experiment_at: None,
        allow_includes,
        files_read: 0,
        bytes_read: 0,
        words_read: 0,
        limit_reported: false,
        folders: HashMap::new(),
    };
    loader.load_main(source);
    for set in sets {
        loader.load_set(set);
    }
    loader
}

/// Reads a config file whole, unless it holds more than [`crate::MAX_CONFIG_BYTES`]: then
/// its size when known without reading it (not for a pipe), found without reading more than
/// the cap. Only a regular file or a named pipe with a writer (`<(tandem resolve ...)`) is read.
fn read_config(path: &Path) -> std::io::Result<Result<String, Option<u64>>> {
    use std::io::Read;
    let (file, meta) = open_without_waiting(path)?;
    let size = meta.len();
    let cap = crate::MAX_CONFIG_BYTES as u64;
    if size > cap {
        return Ok(Err(Some(size)));
    }
    let mut text = String::new();
    file.take(cap + 1).read_to_string(&mut text)?;
    if text.len() as u64 > cap {
        return Ok(Err(None));
    }
    if text.is_empty() && meta.file_type().is_fifo() {
        return Err(std::io::Error::other(
            "it is a named pipe and no process was writing to it",
        ));
    }
    Ok(Ok(text))
}

/// Opens a file for reading without blocking on a named pipe that has no writer, which a
/// plain open would wait for forever; refuses what is neither a file nor a pipe. Returns the
/// open file and what it is.
fn open_without_waiting(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(std::io::Error::other("it is a directory"));
    }
    if kind.is_char_device() || kind.is_block_device() || kind.is_socket() {
        return Err(std::io::Error::other(
            "it is a device or a socket, not a file",
        ));
    }
    // Reads wait again from here: a pipe whose writer has not written yet is waited for;
    // one without a writer reads as empty at once.
    // SAFETY: fcntl on a descriptor this function owns (`file` is alive); F_GETFL and
    // F_SETFL read and set status flags only.
    let cleared = unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(std::io::Error::last_os_error());
    }
    Ok((file, meta))
}

/// `52428800 bytes (50.0 MiB), more than ...`, against the cap; just `more than ...` when the
/// size is not known.
fn size_in_words(size: Option<u64>) -> String {
    let cap = format!(
        "more than the {} bytes (256 KiB) a config may hold",
        crate::MAX_CONFIG_BYTES
    );
    match size {
        Some(size) if size < 1 << 20 => {
            format!("{size} bytes ({:.1} KiB), {cap}", size as f64 / 1024.0)
        }
        Some(size) => format!(
            "{size} bytes ({:.1} MiB), {cap}",
            size as f64 / (1u64 << 20) as f64
        ),
        None => cap,
    }
}

fn too_large_help() -> &'static str {
    "an experiment is a few kilobytes of settings: check that this is the file you meant \
     (tandem does not read configs larger than 256 KiB)"
}

impl Loader {
    /// The main file (or standard input) is over the size cap: nothing of it is read.
    fn too_large(&mut self, name: String, size: Option<u64>) {
        let id = self
            .sources
            .add(name.clone(), String::new(), SourceKind::File);
        let source = self.sources.get(id).clone();
        self.push(
            error(
                "config::too-large",
                match size {
                    Some(_) => format!("{name} is {}", size_in_words(size)),
                    None => format!("{name} holds {}", size_in_words(size)),
                },
            )
            .in_source(&source)
            .help(too_large_help()),
        );
    }

    fn push(&mut self, d: DiagBuilder) {
        let d = d.finish(&self.sources);
        self.diags.push(d);
    }

    /// The document of a source, KDL or JSON ([`from_json`]); `main` when it is the main
    /// file (the one that names the experiment).
    fn parse(&mut self, source: SourceId, main: bool) -> Option<KdlDocument> {
        let text = self.sources.get(source).text.clone();
        if from_json::is_json(&self.sources.get(source).name, &text) {
            if !self.within_word_budget(source, &text, 0) {
                return None;
            }
            let (doc, diags) = from_json::document(&text, source, main);
            for d in diags {
                self.push(d);
            }
            return doc;
        }
        if let Some(refusal) = crate::nesting::too_nested(&text) {
            self.push(too_nested(source, refusal));
            return None;
        }
        if !self.within_word_budget(source, &text, 0) {
            return None;
        }
        match crate::nesting::parse_kdl(&text) {
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

    /// Counts `text`'s words (from byte `from`) into the resolution's budget
    /// ([`crate::nesting::MAX_WORDS`]); false, said once and pointing at the first word over,
    /// when they do not fit: the text is not parsed.
    fn within_word_budget(&mut self, source: SourceId, text: &str, from: usize) -> bool {
        use crate::nesting::{MAX_WORDS, word_starts};
        let left = MAX_WORDS.saturating_sub(self.words_read);
        let mut words = word_starts(&text[from..]).map(|at| at + from);
        let fitting = words.by_ref().take(left).count();
        let Some(over) = words.next() else {
            self.words_read += fitting;
            return true;
        };
        self.words_read = MAX_WORDS + 1;
        if !self.limit_reported {
            self.limit_reported = true;
            let end = text[over..]
                .find(|c: char| c.is_ascii_whitespace())
                .map_or(text.len(), |n| over + n);
            self.push(
                error(
                    "config::too-large",
                    format!(
                        "the experiment holds more than the {MAX_WORDS} words a resolution reads \
                         (values, names, strings and comments, over all its files and --sets)"
                    ),
                )
                .at(
                    source,
                    SourceSpan::from(over..end),
                    format!("word {}", MAX_WORDS + 1),
                )
                .help(
                    "an experiment is a few hundred words of settings: look for a list or \
                     text generated by mistake, or a file that is not a config",
                ),
            );
        }
        false
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

    /// The one `experiment` node of the main file; anything else at its top level
    /// is an error.
    fn the_experiment<'d>(&mut self, doc: &'d KdlDocument, id: SourceId) -> Option<&'d KdlNode> {
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
            return None;
        };
        Some(node)
    }

    fn load_main(&mut self, src: &Source) {
        let (name, text, dir) = match src {
            Source::Path(path) => match read_config(path) {
                Ok(Ok(text)) => (
                    path.display().to_string(),
                    text,
                    path.parent().map(Path::to_path_buf).unwrap_or_default(),
                ),
                Ok(Err(size)) => {
                    self.too_large(path.display().to_string(), size);
                    return;
                }
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
            Source::Stdin(text) if text.len() > crate::MAX_CONFIG_BYTES => {
                // Read through `read_capped`, the text may stop one byte past the cap.
                let size = (text.len() > crate::MAX_CONFIG_BYTES + 1).then_some(text.len() as u64);
                self.too_large("<stdin>".to_string(), size);
                return;
            }
            Source::Stdin(text) => ("<stdin>".to_string(), text.clone(), PathBuf::new()),
        };
        self.files_read = 1;
        self.bytes_read = text.len();
        let id = self.sources.add(name.clone(), text, SourceKind::File);
        if let Source::Path(path) = src {
            self.folders.insert(id, dir.clone());
            self.stack.push((
                std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
                name,
            ));
        } else {
            self.stack.push((PathBuf::from("<stdin>"), name));
        }
        let Some(doc) = self.parse(id, true) else {
            return;
        };
        let Some(node) = self.the_experiment(&doc, id) else {
            return;
        };
        self.reject_annotations(node, id);
        let raw = raw_of_node(node);
        if raw.args.is_empty() {
            self.push(
                error("config::missing-value", "`experiment` needs a name")
                    .at(id, node.name().span(), "no name")
                    .help(
                        "write `experiment \"my-run\" { ... }` (in JSON: `\"name\": \"my-run\"`)",
                    ),
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
                    None => crate::foreign::help(name, "", None)
                        .unwrap_or_else(|| did_you_mean(name, candidates.iter().copied())),
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
        let Some(text) = self.read_include(&path, &display, source, span, dir) else {
            return;
        };
        let id = self.sources.add(display.clone(), text, SourceKind::File);
        let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
        self.folders.insert(id, folder.clone());
        let Some(doc) = self.parse(id, false) else {
            return;
        };
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
            self.walk_body(&doc, id, &folder);
        }
        self.stack.pop();
    }

    /// The text of the file an include names, counted against the resolution's limits; `None`
    /// (with the error reported, or after a limit already reported) when it is not to be read.
    fn read_include(
        &mut self,
        path: &Path,
        display: &str,
        source: SourceId,
        span: SourceSpan,
        dir: &Path,
    ) -> Option<String> {
        if self.limit_reported {
            return None;
        }
        if self.files_read >= MAX_FILES {
            self.include_limit(
                source,
                span,
                format!("this include is file number {} of one experiment, more than the {MAX_FILES} a resolution reads", self.files_read + 1),
            );
            return None;
        }
        let text = match read_config(path) {
            Ok(Ok(text)) => text,
            Ok(Err(size)) => {
                self.push(
                    error(
                        "config::too-large",
                        format!("included file `{display}` is too large to be a config"),
                    )
                    .at(source, span, size_in_words(size))
                    .help(too_large_help()),
                );
                return None;
            }
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
                return None;
            }
        };
        self.files_read += 1;
        self.bytes_read += text.len();
        if self.bytes_read > MAX_TOTAL_BYTES {
            self.include_limit(
                source,
                span,
                format!("with this include the experiment's files hold {} bytes, more than the {MAX_TOTAL_BYTES} (512 KiB) a resolution reads", self.bytes_read),
            );
            return None;
        }
        Some(text)
    }

    /// Reading stops at an include past [`MAX_FILES`] or [`MAX_TOTAL_BYTES`]; one report says so.
    fn include_limit(&mut self, source: SourceId, span: SourceSpan, message: String) {
        self.limit_reported = true;
        self.push(
            error("config::include-limit", message)
                .at(source, span, "not read")
                .help(
                    "an included file is read again each time it is included, so files that \
                     include each other several times multiply: include shared settings once",
                ),
        );
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
        let Some(target) = set_target(path) else {
            let paths = all_paths();
            let help = crate::foreign::help(path, "", None)
                .unwrap_or_else(|| did_you_mean(path, paths.iter().map(String::as_str)));
            self.push(
                error("config::unknown-path", format!("unknown setting `{path}`"))
                    .at(id, path_span, "no such setting")
                    .help(help),
            );
            return;
        };
        // Block-valued settings: the value text is the block's content.
        let is_block = matches!(&target, Target::Field { section, name, .. } if schema::takes_a_block(*section, name));
        // Parse the value at its own offset so spans point into the `--set` text.
        let synthetic = if is_block {
            format!("{}{value_text}", " ".repeat(eq + 1))
        } else if eq >= 1 {
            format!("{}_ {value_text}", " ".repeat(eq - 1))
        } else {
            format!("_ {value_text}")
        };
        if let Some(refusal) = crate::nesting::too_nested(&synthetic) {
            self.push(too_nested(id, refusal));
            return;
        }
        if !self.within_word_budget(id, text, eq + 1) {
            return;
        }
        let parsed = match crate::nesting::parse_kdl(&synthetic) {
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
        let raw = if is_block {
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

/// What a `--set` path (the text before its `=`) names: a section's setting, a section's kind,
/// or a top-level setting; `None` for a path the schema does not have.
fn set_target(path: &str) -> Option<Target> {
    let (section_name, field) = match path.split_once('.') {
        Some((s, f)) => (s, Some(f)),
        None => (path, None),
    };
    match (schema::section(section_name), field) {
        // The setting's own name, so a label on an unknown one points at it alone.
        (Some(section), Some(f)) => Some(Target::Field {
            section: section_index(section),
            name: f.to_string(),
            name_span: SourceSpan::from(section_name.len() + 1..path.len()),
        }),
        (Some(section), None) if section.has_kinds() => Some(Target::Kind {
            section: section_index(section),
        }),
        (None, None) if schema::TOP.common.iter().any(|f| f.name == path) => Some(Target::Field {
            section: 0,
            name: path.to_string(),
            name_span: SourceSpan::from(0..path.len()),
        }),
        _ => None,
    }
}

/// Text refused before parsing ([`crate::nesting::too_nested`]), pointing at the brace.
fn too_nested(source: SourceId, refusal: crate::nesting::TooNested) -> DiagBuilder {
    use crate::nesting::{MAX_BRACES, MAX_NESTING, TooNested};
    let (at, message, label) = match refusal {
        TooNested::Deep(at) => (
            at,
            format!("blocks nest more than {MAX_NESTING} levels deep"),
            format!("level {} opens here", MAX_NESTING + 1),
        ),
        TooNested::ManyBraces(at) => (
            at,
            format!("this text holds more than {MAX_BRACES} `{{`, in blocks, strings or comments"),
            format!("brace number {}", MAX_BRACES + 1),
        ),
    };
    error("config::too-deep", message)
        .at(source, SourceSpan::from(at..at + 1), label)
        .help(
            "tandem's settings nest at most four levels (`experiment { env { wrappers { ... } } }`) \
             and an experiment holds a few dozen blocks: look for a block that is never closed, \
             or text generated by mistake",
        )
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
