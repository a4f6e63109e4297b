//! The JSON form of an experiment (what `tandem resolve --format json` prints, or what Nix's
//! `builtins.toJSON` makes), turned into the KDL document the KDL form of the same experiment
//! parses to, with every node, argument and property spanning its JSON text. Everything after
//! loading (the schema checks, defaults, the canonical form and its hash) is then shared, and
//! diagnostics point into the JSON file.
//!
//! The mapping: the top-level object is `experiment NAME { ... }` (its `"name"` is NAME, in an
//! included file there is none); a section's object is its block, the section's kind key
//! (`"kind"`, `"game"`, `"policy"`) its argument; a scalar is one argument, an array of scalars
//! several; an object is a block of `key value` nodes for block-valued settings (keyword
//! arguments) and properties otherwise (`devices {"count": 2, "kind": "cuda"}`); an array of
//! objects is the wrapper list, each object's `"kind"` naming the wrapper. `"include"` (a path
//! or an array of paths) is applied before the object's own settings wherever it is written:
//! JSON objects are unordered, and `builtins.toJSON` sorts keys.

use kdl::{KdlDocument, KdlEntry, KdlIdentifier, KdlNode, KdlValue};
use miette::SourceSpan;
use tandem_spec::wrapper::written;

use super::section_index;
use crate::diag::{DiagBuilder, SourceId, error};
use crate::json::{self, Json, Member, Spanned};
use crate::schema;

/// Whether a source is JSON: a `.json` name, or text whose first character is `{` (which no
/// KDL experiment starts with).
pub(super) fn is_json(name: &str, text: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".json") || text.trim_start().starts_with('{')
}

/// The KDL document of a JSON text (the main file when `main`, else an included file), and
/// every problem found on the way. `None` when the text is not JSON at all.
pub(super) fn document(
    text: &str,
    source: SourceId,
    main: bool,
) -> (Option<KdlDocument>, Vec<DiagBuilder>) {
    let root = match json::parse(text) {
        Ok(root) => root,
        Err(e) => {
            let d = error("json::syntax", format!("JSON syntax error: {}", e.message))
                .at(source, e.span, e.label)
                .help("a JSON experiment is one object, e.g. {\"name\": \"my-run\", \"env\": {\"game\": \"cartpole\"}}");
            return (None, vec![d]);
        }
    };
    let mut t = Translator {
        source,
        diags: Vec::new(),
    };
    let Json::Object(members) = &root.value else {
        t.diags.push(
            error("json::not-an-object", "a JSON experiment is an object")
                .at(source, root.span, "expected `{ ... }`")
                .help("write {\"name\": \"my-run\", \"env\": {\"game\": \"cartpole\"}, ...}"),
        );
        return (None, t.diags);
    };
    t.check_unique(members);
    let body = t.body(members, main);
    let doc = if main {
        let mut node = KdlNode::new(ident(
            "experiment",
            SourceSpan::new(root.span.offset().into(), 1),
        ));
        if let Some(name) = members.iter().find(|m| m.key == "name")
            && let Some(entry) = t.scalar_entry(&name.value, "name")
        {
            node.push(entry);
        }
        node.set_children(body);
        node.set_span(root.span);
        let mut doc = KdlDocument::new();
        doc.nodes_mut().push(node);
        doc.set_span(root.span);
        doc
    } else {
        body
    };
    (Some(doc), t.diags)
}

fn push_opt(node: &mut KdlNode, entry: Option<KdlEntry>) {
    if let Some(entry) = entry {
        node.push(entry);
    }
}

fn ident(name: &str, span: SourceSpan) -> KdlIdentifier {
    let mut id = KdlIdentifier::from(name);
    id.set_span(span);
    id
}

fn block(nodes: Vec<KdlNode>, span: SourceSpan) -> KdlDocument {
    let mut doc = KdlDocument::new();
    *doc.nodes_mut() = nodes;
    doc.set_span(span);
    doc
}

fn span_to(from: SourceSpan, to: SourceSpan) -> SourceSpan {
    super::join(from, to)
}

struct Translator {
    source: SourceId,
    diags: Vec<DiagBuilder>,
}

impl Translator {
    /// A key twice in one object: JSON readers disagree on which wins, so it is refused.
    fn check_unique(&mut self, members: &[Member]) {
        for (i, m) in members.iter().enumerate() {
            if let Some(first) = members[..i].iter().find(|f| f.key == m.key) {
                self.diags.push(
                    error(
                        "json::duplicate-key",
                        format!("`{}` appears twice in one JSON object", m.key),
                    )
                    .at(self.source, m.key_span, "again here")
                    .also(self.source, first.key_span, "first here")
                    .help("keep one of them"),
                );
            }
        }
    }

    /// The experiment's settings: includes first, then every other key in order.
    fn body(&mut self, members: &[Member], main: bool) -> KdlDocument {
        let mut nodes = Vec::new();
        for m in members.iter().filter(|m| m.key == "include") {
            self.includes(m, &mut nodes);
        }
        for m in members.iter().filter(|m| m.key != "include") {
            if m.key == "name" {
                if !main {
                    self.diags.push(
                        error("config::include-experiment", "an included file cannot name an experiment")
                            .at(self.source, m.key_span, "`name` in an included file")
                            .help("included files hold settings (`algorithm`, `env`, ...) only; the experiment that includes them has the name"),
                    );
                }
                continue;
            }
            let node = match schema::section(&m.key) {
                Some(section) => self.section(m, section),
                None => Some(self.field(m, 0)),
            };
            nodes.extend(node);
        }
        block(nodes, SourceSpan::new(0.into(), 0))
    }

    fn includes(&mut self, m: &Member, nodes: &mut Vec<KdlNode>) {
        let paths: Vec<&Spanned> = match &m.value.value {
            Json::Array(items) => items.iter().collect(),
            _ => vec![&m.value],
        };
        for path in paths {
            let mut node = KdlNode::new(ident("include", m.key_span));
            if let Some(entry) = self.scalar_entry(path, "include") {
                node.push(entry);
            }
            node.set_span(span_to(m.key_span, path.span));
            nodes.push(node);
        }
    }

    fn section(&mut self, m: &Member, section: &'static schema::Section) -> Option<KdlNode> {
        let mut node = KdlNode::new(ident(&m.key, m.key_span));
        node.set_span(span_to(m.key_span, m.value.span));
        let members = match &m.value.value {
            Json::Object(members) => members,
            // `"env": "cartpole"`, like KDL's `env "cartpole"` without a block.
            _ => {
                node.push(self.scalar_entry(&m.value, &m.key)?);
                return Some(node);
            }
        };
        self.check_unique(members);
        let index = section_index(section);
        let mut children = Vec::new();
        for member in members {
            if !section.kind_key.is_empty() && member.key == section.kind_key {
                if let Some(entry) = self.scalar_entry(&member.value, &member.key) {
                    node.push(entry);
                }
            } else {
                children.push(self.field(member, index));
            }
        }
        node.set_children(block(children, m.value.span));
        Some(node)
    }

    /// One setting `key: value` as the node `key VALUE...` (or `key { ... }`).
    fn field(&mut self, m: &Member, section: usize) -> KdlNode {
        let mut node = KdlNode::new(ident(&m.key, m.key_span));
        node.set_span(span_to(m.key_span, m.value.span));
        let is_block = schema::takes_a_block(section, &m.key);
        let explores = schema::SECTIONS[section].name == "population" && m.key == "explore";
        match &m.value.value {
            Json::Array(items) if items.is_empty() && is_block => {
                node.set_children(block(Vec::new(), m.value.span));
            }
            Json::Array(items) if items.iter().any(|i| matches!(i.value, Json::Object(_))) => {
                let nodes = self.item_nodes(items, &m.key);
                node.set_children(block(nodes, m.value.span));
            }
            Json::Array(items) => {
                for item in items {
                    push_opt(&mut node, self.scalar_entry(item, &m.key));
                }
            }
            Json::Object(members) => {
                self.check_unique(members);
                if is_block {
                    let nodes = members
                        .iter()
                        .map(|arg| {
                            let mut child = KdlNode::new(ident(&arg.key, arg.key_span));
                            child.set_span(span_to(arg.key_span, arg.value.span));
                            match &arg.value.value {
                                Json::Object(inner) if explores => {
                                    self.explore_entry(&mut child, inner)
                                }
                                Json::Array(items) if explores => {
                                    for item in items {
                                        push_opt(&mut child, self.scalar_entry(item, &arg.key));
                                    }
                                }
                                Json::Object(inner) => self.policy_entry(&mut child, inner),
                                _ => push_opt(&mut child, self.scalar_entry(&arg.value, &arg.key)),
                            }
                            child
                        })
                        .collect();
                    node.set_children(block(nodes, m.value.span));
                } else {
                    for prop in members {
                        push_opt(&mut node, self.prop_entry(prop));
                    }
                }
            }
            _ => push_opt(&mut node, self.scalar_entry(&m.value, &m.key)),
        }
        node
    }

    /// A policy of its own settings (`{"agents": PATTERN, "algorithm.lr": 0.001, ...}`) as its
    /// node: the pattern its argument, each setting a child.
    fn policy_entry(&mut self, node: &mut KdlNode, members: &[Member]) {
        self.check_unique(members);
        let mut children = Vec::new();
        for m in members {
            if m.key == "agents" {
                push_opt(node, self.scalar_entry(&m.value, &m.key));
                continue;
            }
            let mut child = KdlNode::new(ident(&m.key, m.key_span));
            child.set_span(span_to(m.key_span, m.value.span));
            match &m.value.value {
                Json::Array(items) => {
                    for item in items {
                        push_opt(&mut child, self.scalar_entry(item, &m.key));
                    }
                }
                _ => push_opt(&mut child, self.scalar_entry(&m.value, &m.key)),
            }
            children.push(child);
        }
        let span = node.span();
        node.set_children(block(children, span));
    }

    /// An explored setting's rule (`{"factor": 1.25, "min": 1e-5, "max": 0.01}` or
    /// `{"values": [0, 0.01], "spread": false}`) as its node: the values its arguments, the
    /// rest its properties.
    fn explore_entry(&mut self, node: &mut KdlNode, members: &[Member]) {
        self.check_unique(members);
        for m in members {
            match &m.value.value {
                Json::Array(items) if m.key == "values" => {
                    for item in items {
                        push_opt(node, self.scalar_entry(item, &m.key));
                    }
                }
                _ => push_opt(node, self.prop_entry(m)),
            }
        }
    }

    /// An array of objects: the wrapper or layer list, each object `{"kind": NAME, PARAM:
    /// VALUE, ...}`; a residual layer's own list is its `"layers"`.
    fn item_nodes(&mut self, items: &[Spanned], key: &str) -> Vec<KdlNode> {
        let example = if key == "layers" {
            tandem_spec::layer::written::JSON
        } else {
            written::JSON
        };
        let mut nodes = Vec::new();
        for item in items {
            let Json::Object(members) = &item.value else {
                self.diags.push(
                    error(
                        "json::mixed-list",
                        format!("`{key}` mixes objects and plain values"),
                    )
                    .at(self.source, item.span, "not an object")
                    .help(format!("each item is an object naming its kind: {example}")),
                );
                continue;
            };
            self.check_unique(members);
            let Some(kind) = members.iter().find(|m| m.key == "kind") else {
                self.diags.push(
                    error("json::missing-kind", "this object has no `kind`")
                        .at(
                            self.source,
                            SourceSpan::new(item.span.offset().into(), 1),
                            "no `kind` key",
                        )
                        .help(format!("each item is an object naming its kind: {example}")),
                );
                continue;
            };
            let Json::String(name) = &kind.value.value else {
                self.diags.push(
                    error("json::kind-type", "`kind` is the item's name, a string")
                        .at(self.source, kind.value.span, "not a string")
                        .help("for example {\"kind\": \"grayscale\"}"),
                );
                continue;
            };
            let mut node = KdlNode::new(ident(name, kind.value.span));
            node.set_span(item.span);
            for prop in members.iter().filter(|m| m.key != "kind") {
                if let Json::Array(layers) = &prop.value.value
                    && key == "layers"
                    && prop.key == "layers"
                {
                    let nodes = self.item_nodes(layers, "layers");
                    node.set_children(block(nodes, prop.value.span));
                    continue;
                }
                if let Json::Array(values) = &prop.value.value
                    && is_list_argument(name, &prop.key)
                {
                    for v in values {
                        push_opt(&mut node, self.scalar_entry(v, &prop.key));
                    }
                    continue;
                }
                push_opt(&mut node, self.prop_entry(prop));
            }
            nodes.push(node);
        }
        nodes
    }

    fn prop_entry(&mut self, m: &Member) -> Option<KdlEntry> {
        let value = self.scalar(&m.value, &m.key)?;
        let mut entry = KdlEntry::new_prop(m.key.as_str(), value);
        entry.set_span(span_to(m.key_span, m.value.span));
        Some(entry)
    }

    fn scalar_entry(&mut self, v: &Spanned, key: &str) -> Option<KdlEntry> {
        let mut entry = KdlEntry::new(self.scalar(v, key)?);
        entry.set_span(v.span);
        Some(entry)
    }

    /// A JSON scalar as the KDL value it stands for; a number with `.` or an exponent is a
    /// float, as in KDL.
    fn scalar(&mut self, v: &Spanned, key: &str) -> Option<KdlValue> {
        let value = match &v.value {
            Json::Null => KdlValue::Null,
            Json::Bool(b) => KdlValue::Bool(*b),
            Json::String(s) => KdlValue::String(s.clone()),
            Json::Number(text) if text.contains(['.', 'e', 'E']) => match text.parse::<f64>() {
                Ok(x) if x.is_finite() => KdlValue::Float(x),
                _ => return self.bad_number(v, key),
            },
            Json::Number(text) => match text.parse::<i128>() {
                Ok(i) => KdlValue::Integer(i),
                Err(_) => return self.bad_number(v, key),
            },
            Json::Array(_) | Json::Object(_) => {
                self.diags.push(
                    error("json::not-a-value", format!("`{key}` takes a plain value here"))
                        .at(self.source, v.span, "expected a string, number, boolean or null")
                        .help("lists and objects are allowed only where the setting holds several values or a block"),
                );
                return None;
            }
        };
        Some(value)
    }

    fn bad_number(&mut self, v: &Spanned, key: &str) -> Option<KdlValue> {
        self.diags.push(
            error(
                "config::range",
                format!("the number given for `{key}` is too large"),
            )
            .at(self.source, v.span, "does not fit")
            .help("integers fit in 128 bits and floats must be finite"),
        );
        None
    }
}

/// Whether `param` is wrapper `wrapper`'s list parameter, which KDL writes as the wrapper's
/// arguments (`keep-obs 0 2` is `{"kind": "keep-obs", "indices": [0, 2]}`).
fn is_list_argument(wrapper: &str, param: &str) -> bool {
    schema::wrapper(wrapper)
        .and_then(|w| w.list_argument())
        .is_some_and(|f| f.name == param)
}
