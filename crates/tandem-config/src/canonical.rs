//! The canonical resolved config: one deterministic KDL (or JSON) text per
//! experiment, in schema order with every value explicit, its sha256 hash, and the
//! strict parser that workers use to read it back.

use sha2::{Digest, Sha256};

use crate::Source;
use crate::diag::{Diagnostics, SourceKind, Sources, error};
use crate::model::{Device, Experiment, Scalar, Threads, Wrapper};
use crate::schema::{self, SECTIONS};
use crate::setting::ExploreRule;
use crate::values::{self, Val, Values};
use tandem_spec::Layer;
use tandem_spec::wrapper::{Param, Value as WrapperValue};

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Shortest text that parses back to the same f64; always has a `.` or an exponent
/// so KDL reads it as a float.
fn float(x: f64) -> String {
    format!("{x:?}")
}

/// The wrapper's parameters by name, in tandem-spec's declared order.
fn wrapper_params(w: &Wrapper) -> Vec<(&'static str, Val)> {
    named(w.info().params, w.params())
}

/// The layer's parameters by name, in tandem-spec's declared order.
fn layer_params(layer: &Layer) -> Vec<(&'static str, Val)> {
    let info = tandem_spec::layer::info(layer.name()).expect("every layer is in LAYERS");
    named(info.params, layer.params())
}

/// Declared parameters with their values, as settings' values.
fn named(params: &'static [Param], values: Vec<WrapperValue>) -> Vec<(&'static str, Val)> {
    params
        .iter()
        .zip(values)
        .map(|(param, value)| {
            let value = match value {
                WrapperValue::Int(i) => Val::Int(i),
                WrapperValue::Float(x) => Val::Float(x),
                WrapperValue::Bool(b) => Val::Bool(b),
                WrapperValue::Indices(mask) => {
                    Val::IntList((0..64).filter(|i| mask >> i & 1 == 1).collect())
                }
            };
            (param.name, value)
        })
        .collect()
}

/// `list` as a canonical block's lines at `indent` spaces: each layer with every parameter
/// named, a residual's block below it.
fn write_layers(out: &mut String, list: &[Layer], indent: usize) {
    let pad = " ".repeat(indent);
    for layer in list {
        out.push_str(&format!("{pad}{}", layer.name()));
        for (key, v) in layer_params(layer) {
            out.push_str(&format!(" {key}={}", kdl_value(&v)));
        }
        if let Layer::Residual { body } = layer {
            out.push_str(" {\n");
            write_layers(out, body, indent + 4);
            out.push_str(&format!("{pad}}}"));
        }
        out.push('\n');
    }
}

/// `list` in the JSON form: an array of objects naming their kind, a residual's layers under
/// `"layers"`.
fn layers_json(list: &[Layer]) -> serde_json::Value {
    serde_json::Value::Array(
        list.iter()
            .map(|layer| {
                let mut item = item_json(layer.name(), layer_params(layer));
                if let (Layer::Residual { body }, serde_json::Value::Object(o)) = (layer, &mut item)
                {
                    o.insert("layers".into(), layers_json(body));
                }
                item
            })
            .collect(),
    )
}

/// A wrapper or a layer in the JSON form: `{"kind": NAME, PARAM: VALUE, ...}`.
fn item_json(name: &str, params: Vec<(&'static str, Val)>) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert("kind".into(), serde_json::Value::String(name.into()));
    for (key, v) in params {
        o.insert(key.into(), json_value(&v));
    }
    serde_json::Value::Object(o)
}

pub(crate) fn kdl_value(v: &Val) -> String {
    match v {
        Val::Int(i) => i.to_string(),
        Val::Float(x) => float(*x),
        Val::Bool(b) => format!("#{b}"),
        Val::Str(s) => quote(s),
        Val::Null => "#null".into(),
        Val::IntList(l) => l
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        Val::Devices(d) => d
            .iter()
            .map(|d| quote(&d.to_string()))
            .collect::<Vec<_>>()
            .join(" "),
        Val::Threads(Threads::Auto) => quote("auto"),
        Val::Threads(Threads::PerRank(n)) => n.to_string(),
        Val::Strings(m) => m.iter().map(|m| quote(m)).collect::<Vec<_>>().join(" "),
        // Blocks are written by the caller.
        Val::Wrappers(_) | Val::Layers(_) | Val::Args(_) | Val::Policies(_) | Val::Explore(_) => {
            String::new()
        }
    }
}

fn scalar_val(v: &Scalar) -> Val {
    match v {
        Scalar::Int(i) => Val::Int(*i),
        Scalar::Float(x) => Val::Float(*x),
        Scalar::Bool(b) => Val::Bool(*b),
        Scalar::Str(s) => Val::Str(s.clone()),
        Scalar::Null => Val::Null,
    }
}

fn get<'a>(values: &'a Values, path: &str) -> &'a Val {
    const NULL: &Val = &Val::Null;
    values.get(path).unwrap_or(NULL)
}

/// The canonical KDL text of an experiment.
pub fn canonical_kdl(e: &Experiment) -> String {
    let values = values::from_experiment(e);
    let mut out = String::new();
    out.push_str(&format!("experiment {} {{\n", quote(&e.name)));
    for field in schema::TOP.common.iter().filter(|f| f.name != "name") {
        out.push_str(&format!(
            "    {} {}\n",
            field.name,
            kdl_value(get(&values, field.name))
        ));
    }
    for section in SECTIONS.iter().skip(1) {
        let kind_name = values::kind_of(&values, section);
        let kind = kind_name.and_then(|k| section.kind(k));
        match kind_name {
            Some(k) => out.push_str(&format!("    {} {} {{\n", section.name, quote(k))),
            None => out.push_str(&format!("    {} {{\n", section.name)),
        }
        for field in section.fields(kind) {
            let value = get(&values, &section.path(field.name));
            match value {
                Val::Wrappers(list) if list.is_empty() => {
                    out.push_str(&format!("        {} {{}}\n", field.name))
                }
                Val::Wrappers(list) => {
                    out.push_str(&format!("        {} {{\n", field.name));
                    for w in list {
                        out.push_str(&format!("            {}", w.name()));
                        for (key, v) in wrapper_params(w) {
                            // A list parameter is the wrapper's arguments (`keep-obs 0 2`).
                            match v {
                                Val::IntList(_) => out.push_str(&format!(" {}", kdl_value(&v))),
                                _ => out.push_str(&format!(" {key}={}", kdl_value(&v))),
                            }
                        }
                        out.push('\n');
                    }
                    out.push_str("        }\n");
                }
                Val::Layers(list) => {
                    out.push_str(&format!("        {} {{\n", field.name));
                    write_layers(&mut out, list, 12);
                    out.push_str("        }\n");
                }
                Val::Args(args) if args.is_empty() => {
                    out.push_str(&format!("        {} {{}}\n", field.name))
                }
                Val::Args(args) => {
                    out.push_str(&format!("        {} {{\n", field.name));
                    for (name, v) in args {
                        out.push_str(&format!(
                            "            {name} {}\n",
                            kdl_value(&scalar_val(v))
                        ));
                    }
                    out.push_str("        }\n");
                }
                Val::Policies(list) => write_policies(&mut out, field.name, list),
                Val::Explore(list) => write_explore(&mut out, field.name, list),
                Val::Strings(m) if m.is_empty() => {
                    out.push_str(&format!("        {}\n", field.name))
                }
                v => out.push_str(&format!("        {} {}\n", field.name, kdl_value(v))),
            }
        }
        out.push_str("    }\n");
    }
    out.push_str("}\n");
    out
}

/// `train.policies` in the canonical form: a policy of no settings of its own on one line,
/// as before policies had any.
fn write_policies(out: &mut String, name: &str, list: &[crate::setting::Policy]) {
    if list.is_empty() {
        out.push_str(&format!("        {name} {{}}\n"));
        return;
    }
    out.push_str(&format!("        {name} {{\n"));
    for policy in list {
        out.push_str(&format!(
            "            {} {}",
            policy.name,
            quote(&policy.pattern)
        ));
        if policy.settings.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str(" {\n");
        for (path, value) in &policy.settings {
            out.push_str(&format!("                {path} {value}\n"));
        }
        out.push_str("            }\n");
    }
    out.push_str("        }\n");
}

fn write_explore(out: &mut String, name: &str, list: &[crate::setting::Explore]) {
    if list.is_empty() {
        out.push_str(&format!("        {name} {{}}\n"));
        return;
    }
    out.push_str(&format!("        {name} {{\n"));
    for explore in list {
        out.push_str(&format!("            {}", explore.path));
        match &explore.rule {
            ExploreRule::Factor { factor, min, max } => out.push_str(&format!(
                " factor={} min={} max={}",
                float(*factor),
                float(*min),
                float(*max)
            )),
            ExploreRule::Values(values) => {
                for v in values {
                    out.push_str(&format!(" {}", float(*v)));
                }
            }
        }
        out.push_str(&format!(" spread=#{}\n", explore.spread));
    }
    out.push_str("        }\n");
}

/// A hyperparameter population-based training explores, in the JSON form: its rule's
/// numbers (`factor`, `min`, `max`, or `values`) and `spread`.
fn explore_json(explore: &crate::setting::Explore) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    match &explore.rule {
        ExploreRule::Factor { factor, min, max } => {
            o.insert("factor".into(), json_value(&Val::Float(*factor)));
            o.insert("min".into(), json_value(&Val::Float(*min)));
            o.insert("max".into(), json_value(&Val::Float(*max)));
        }
        ExploreRule::Values(values) => {
            let list = values.iter().map(|v| json_value(&Val::Float(*v))).collect();
            o.insert("values".into(), serde_json::Value::Array(list));
        }
    }
    o.insert("spread".into(), serde_json::Value::Bool(explore.spread));
    serde_json::Value::Object(o)
}

/// A policy in the JSON form: its pattern, or, with settings of its own, an object of its
/// pattern (`agents`) and each setting by path.
fn policy_json(policy: &crate::setting::Policy) -> serde_json::Value {
    use serde_json::Value as J;
    if policy.settings.is_empty() {
        return J::String(policy.pattern.clone());
    }
    let mut object = serde_json::Map::new();
    object.insert("agents".into(), J::String(policy.pattern.clone()));
    for (path, value) in &policy.settings {
        object.insert(path.clone(), kdl_arguments_json(value));
    }
    J::Object(object)
}

/// KDL arguments as canonical_kdl writes them (`0.001`, `128 128`, `"tanh"`) in JSON: one
/// value, or a list of several.
fn kdl_arguments_json(text: &str) -> serde_json::Value {
    use serde_json::Value as J;
    let node: kdl::KdlNode = format!("x {text}")
        .parse()
        .expect("canonical KDL arguments");
    let mut values: Vec<J> = node
        .entries()
        .iter()
        .map(|entry| match entry.value() {
            kdl::KdlValue::Integer(i) => J::from(*i as i64),
            kdl::KdlValue::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
            kdl::KdlValue::String(s) => J::String(s.clone()),
            kdl::KdlValue::Bool(b) => J::Bool(*b),
            kdl::KdlValue::Null => J::Null,
        })
        .collect();
    if values.len() == 1 {
        values.remove(0)
    } else {
        J::Array(values)
    }
}

fn json_value(v: &Val) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Val::Int(i) => J::from(*i),
        Val::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
        Val::Bool(b) => J::Bool(*b),
        Val::Str(s) => J::String(s.clone()),
        Val::Null => J::Null,
        Val::IntList(l) => J::Array(l.iter().map(|i| J::from(*i)).collect()),
        Val::Devices(d) => J::Array(
            d.iter()
                .map(|d: &Device| J::String(d.to_string()))
                .collect(),
        ),
        Val::Threads(Threads::Auto) => J::String("auto".into()),
        Val::Threads(Threads::PerRank(n)) => J::from(*n),
        Val::Strings(m) => J::Array(m.iter().map(|m| J::String(m.clone())).collect()),
        Val::Args(args) => J::Object(
            args.iter()
                .map(|(name, v)| (name.clone(), json_value(&scalar_val(v))))
                .collect(),
        ),
        Val::Policies(list) => J::Object(
            list.iter()
                .map(|policy| (policy.name.clone(), policy_json(policy)))
                .collect(),
        ),
        Val::Explore(list) => J::Object(
            list.iter()
                .map(|explore| (explore.path.clone(), explore_json(explore)))
                .collect(),
        ),
        Val::Layers(list) => layers_json(list),
        Val::Wrappers(list) => J::Array(
            list.iter()
                .map(|w| item_json(w.name(), wrapper_params(w)))
                .collect(),
        ),
    }
}

pub(crate) fn json_object(e: &Experiment) -> serde_json::Value {
    let values = values::from_experiment(e);
    let mut root = serde_json::Map::new();
    for field in schema::TOP.common {
        root.insert(field.name.into(), json_value(get(&values, field.name)));
    }
    for section in SECTIONS.iter().skip(1) {
        let mut object = serde_json::Map::new();
        let kind_name = values::kind_of(&values, section);
        if let Some(k) = kind_name {
            object.insert(section.kind_key.into(), serde_json::Value::String(k.into()));
        }
        for field in section.fields(kind_name.and_then(|k| section.kind(k))) {
            object.insert(
                field.name.into(),
                json_value(get(&values, &section.path(field.name))),
            );
        }
        root.insert(section.name.into(), serde_json::Value::Object(object));
    }
    serde_json::Value::Object(root)
}

/// The canonical JSON text: keys sorted, numbers in shortest round-trip form.
pub fn canonical_json(e: &Experiment) -> String {
    let mut text = serde_json::to_string_pretty(&json_object(e)).unwrap_or_default();
    text.push('\n');
    text
}

/// sha256 (lowercase hex) of the canonical KDL text.
pub fn config_hash(e: &Experiment) -> String {
    let digest = Sha256::digest(canonical_kdl(e).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What to say when a checkpoint's stored config is not this tandem's canonical form: the
/// usual cause is a tandem version that has settings this one lacks, or lacks this one's.
pub const OTHER_VERSION_HELP: &str = "a checkpoint keeps the settings of the tandem that wrote it; one written by a version with other settings (one added since, or removed) does not read here: play or resume it with that version";

/// [`parse_canonical`] of a config a run stored (in a checkpoint, in `resolved.kdl`), its
/// failure one message: that the config stored in `place` does not parse, the diagnostics, and
/// [`OTHER_VERSION_HELP`].
pub fn parse_stored(text: &str, place: &str) -> Result<Experiment, String> {
    parse_canonical(text).map_err(|d| {
        format!(
            "the config stored in {place} does not parse:\n{}\n{OTHER_VERSION_HELP}",
            d.render(false)
        )
    })
}

/// Reads a canonical config back. It is checked like any experiment (includes are
/// refused) and must be byte-identical to the canonical form of what it resolves to,
/// so a worker can be sure it runs exactly what the launcher hashed.
pub fn parse_canonical(text: &str) -> Result<Experiment, Diagnostics> {
    let resolved = crate::resolve::run(&Source::Stdin(text.to_string()), &[], false, None)?;
    let canonical = canonical_kdl(&resolved.experiment);
    if canonical != text {
        let offset = canonical
            .bytes()
            .zip(text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let line_start = text[..offset.min(text.len())]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let mut sources = Sources::default();
        let id = sources.add("<canonical>".into(), text.to_string(), SourceKind::File);
        let expected = canonical[line_start.min(canonical.len())..]
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let d = error(
            "config::not-canonical",
            "this config is valid but not in canonical form",
        )
        .at(id, (line_start..line_end).into(), "first difference")
        .help(format!(
            "the canonical form has `{expected}` here; produce the text with `tandem resolve`"
        ))
        .finish(&sources);
        return Err(Diagnostics::new(vec![d]));
    }
    Ok(resolved.experiment)
}
