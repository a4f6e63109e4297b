//! Checking one value against its setting: type, range, choices, the forms of
//! `devices` and of each wrapper, with a located diagnostic for each mistake.

use std::collections::BTreeMap;
use tandem_spec::layer::{self, Layer};
use tandem_spec::wrapper::written;

use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::SourceSpan;

use super::{Raw, found, raw_of_node};
use crate::diag::{DiagBuilder, SourceId, did_you_mean, error};
use crate::model::*;
use crate::schema::{self, Dflt, Field, ItemSpec, Ty};
use crate::values::Val;
use tandem_spec::wrapper::Value as WrapperValue;

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
        (Ty::Int { .. } | Ty::Threads, KdlValue::Float(x)) if x.is_finite() && x.fract() != 0.0 => {
            Some(format!("a count is a whole number: {x} has a fraction"))
        }
        (Ty::Int { .. } | Ty::Threads, KdlValue::Float(x)) if x.is_finite() => Some(format!(
            "{x:e} is past 2^53, where a float no longer holds every whole number exactly: \
             write its digits (`_` may group them, e.g. `100_000`)"
        )),
        _ => None,
    }
}

/// An integer as users write it: `100_000`, or a number without a fraction (`1e5`, `4.0`)
/// that a double holds exactly (up to 2^53), which means the same.
pub(super) fn integral(value: &KdlValue) -> Option<i128> {
    match value {
        KdlValue::Integer(i) => Some(*i),
        KdlValue::Float(x) if x.fract() == 0.0 && x.abs() <= 2f64.powi(53) => Some(*x as i128),
        _ => None,
    }
}

/// How a block of named entries refuses a name given twice ([`Checker::named_entries`]).
struct Twice {
    what: fn(&str) -> String,
    again: &'static str,
    first: &'static str,
    help: &'static str,
}

pub(super) struct Checker<'a> {
    pub(super) source: SourceId,
    pub(super) path: &'a str,
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
        if let (Ty::Int { min, max }, Some(i)) = (&field.ty, integral(value)) {
            return if i < *min as i128 || i > *max as i128 {
                Err(self.range(field, i.to_string(), span))
            } else {
                Ok(Val::Int(i as i64))
            };
        }
        match (&field.ty, value) {
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
            (Ty::Text, KdlValue::String(s)) => {
                if s.is_empty() || s.chars().any(char::is_control) {
                    Err(error(
                        "config::text",
                        format!("`{}` needs a non-empty string", self.path),
                    )
                    .at(self.source, span, "empty or holding control characters")
                    .help(format!("`{}`: {}", field.name, field.doc)))
                } else {
                    Ok(Val::Str(s.clone()))
                }
            }
            (Ty::OrWord(word, _), KdlValue::String(s)) if s == word => Ok(Val::Str(s.clone())),
            (Ty::OrWord(..), KdlValue::String(_)) => Err(self.wrong(field, value, span)),
            (Ty::OrWord(_, inner), _) => self.scalar(
                &Field {
                    ty: **inner,
                    ..*field
                },
                value,
                span,
            ),
            (Ty::Threads, KdlValue::String(s)) if s == "auto" => Ok(Val::Threads(Threads::Auto)),
            // A count of threads is checked as the integer it is.
            (Ty::Threads, v) if integral(v).is_some() => {
                let count = Field {
                    ty: Ty::Int { min: 1, max: 4096 },
                    ..*field
                };
                match self.scalar(&count, value, span)? {
                    Val::Int(i) => Ok(Val::Threads(Threads::PerRank(i as usize))),
                    other => Ok(other),
                }
            }
            _ => Err(self.wrong(field, value, span)),
        }
    }

    /// Checks a whole node, property or `--set` value against a setting.
    pub(super) fn value(
        &self,
        field: &Field,
        raw: &Raw,
    ) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let path = self.path;
        match field.ty {
            Ty::Devices => return self.devices(raw).map(|v| (v, Vec::new())),
            Ty::Wrappers => return self.wrappers(raw),
            Ty::Layers => return self.layers(raw),
            Ty::Args => return self.args(raw),
            Ty::Policies => return self.policies(raw),
            Ty::Explore => return self.explore(raw),
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
        match field.ty {
            Ty::Modules => return self.modules(field, raw, errs),
            Ty::InfoKeys => return self.info_keys(field, raw, errs),
            _ => {}
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
                match integral(value) {
                    Some(i) if i >= min as i128 && i <= max as i128 => list.push(i as i64),
                    Some(i) => errs.push(self.range(field, i.to_string(), *span)),
                    None => errs.push(self.wrong(field, value, *span)),
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

    /// `import "a" "b.c"`: zero or more dotted Python names.
    fn modules(
        &self,
        field: &Field,
        raw: &Raw,
        mut errs: Vec<DiagBuilder>,
    ) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let mut list = Vec::new();
        for (value, span) in &raw.args {
            match value {
                KdlValue::String(s) if s.split('.').all(is_identifier) => list.push(s.clone()),
                KdlValue::String(s) => errs.push(
                    error(
                        "config::module-name",
                        format!("`{s}` is not a Python module name"),
                    )
                    .at(self.source, *span, "not a module name")
                    .help("a module is named by identifiers joined with `.`, e.g. `import \"ale_py\" \"my_envs.registry\"`"),
                ),
                other => errs.push(self.wrong(field, other, *span)),
            }
        }
        if errs.is_empty() {
            Ok((Val::Strings(list), Vec::new()))
        } else {
            Err(errs)
        }
    }

    /// `info-keys "is_success" "distance"`: zero or more keys of the environment's `info`,
    /// each once (a key listed twice would be logged twice under one tag).
    fn info_keys(
        &self,
        field: &Field,
        raw: &Raw,
        mut errs: Vec<DiagBuilder>,
    ) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let mut list: Vec<String> = Vec::new();
        for (value, span) in &raw.args {
            match value {
                KdlValue::String(s) if s.is_empty() || s.chars().any(char::is_control) => errs
                    .push(
                        error(
                            "config::text",
                            format!("`{}` needs non-empty keys", self.path),
                        )
                        .at(self.source, *span, "empty or holding control characters")
                        .help(format!("`{}`: {}", field.name, field.doc)),
                    ),
                KdlValue::String(s) if list.contains(s) => errs.push(
                    error(
                        "config::duplicate-key",
                        format!("`{}` lists `{s}` twice", self.path),
                    )
                    .at(self.source, *span, "listed again")
                    .help("each key is logged once, under `episode/info/<key>`: remove this one"),
                ),
                KdlValue::String(s) => list.push(s.clone()),
                other => errs.push(self.wrong(field, other, *span)),
            }
        }
        if errs.is_empty() {
            Ok((Val::Strings(list), Vec::new()))
        } else {
            Err(errs)
        }
    }

    /// The block of a setting written as one (keyword arguments, policies): arguments or
    /// properties beside it are refused, each at its place, with `example`; `None` (and why,
    /// in `errs`) without a block.
    fn block_of<'r>(
        &self,
        raw: &'r Raw,
        example: &str,
        errs: &mut Vec<DiagBuilder>,
    ) -> Option<&'r kdl::KdlDocument> {
        let (source, path) = (self.source, self.path);
        for (_, span) in &raw.args {
            errs.push(
                error(
                    "config::unexpected-argument",
                    format!("`{path}` takes a block, not arguments"),
                )
                .at(source, *span, "unexpected argument")
                .help(example),
            );
        }
        for (_, _, span) in &raw.props {
            errs.push(
                error(
                    "config::unexpected-property",
                    format!("`{path}` takes a block, not properties"),
                )
                .at(source, *span, "unexpected property")
                .help(example),
            );
        }
        if raw.children.is_none() {
            errs.push(
                error("config::missing-block", format!("`{path}` needs a block"))
                    .at(source, raw.value_span, "no block")
                    .help(example),
            );
        }
        raw.children.as_ref()
    }

    /// `make-args { name value; ... }`: keyword arguments, each once, sorted by name.
    fn args(&self, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let example =
            "write `make-args { continuous #true; gravity -9.8 }` (`make-args {}` for none)";
        let mut errs = Vec::new();
        let Some(block) = self.block_of(raw, example, &mut errs) else {
            return Err(errs);
        };
        let mut args: BTreeMap<String, (Scalar, SourceSpan)> = BTreeMap::new();
        for node in block.nodes() {
            let name = node.name().value();
            let span = node.name().span();
            if let Some((_, first)) = args.get(name) {
                errs.push(
                    error(
                        "config::duplicate-setting",
                        format!("keyword argument `{name}` is given twice"),
                    )
                    .at(source, span, "given again here")
                    .also(source, *first, "first given here")
                    .help("each keyword argument of gymnasium.make appears once"),
                );
                continue;
            }
            match self.arg(node) {
                Ok(v) => {
                    args.insert(name.to_string(), (v, span));
                }
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            let list = args.into_iter().map(|(k, (v, _))| (k, v)).collect();
            Ok((Val::Args(list), Vec::new()))
        } else {
            Err(errs)
        }
    }

    /// `policies { predators "adversary_*"; prey "agent_*" }`: each policy once, named by
    /// letters, digits and `_`, with one pattern of the agent ids it plays (`*` matches any
    /// run of characters); sorted by name. Which agents a pattern matches is the cross-check's.
    fn policies(&self, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let example = "write `policies { predators \"adversary_*\"; prey \"agent_*\" }`, a policy's name and the agents it plays";
        let twice = Twice {
            what: |name| format!("policy `{name}` is named twice"),
            again: "named again here",
            first: "first named here",
            help: "each policy is named once; give the second another name",
        };
        let (list, spans) = self.named_entries(raw, example, twice, |node| self.policy(node))?;
        Ok((Val::Policies(list), spans))
    }

    /// The entries of a block each named once by its node's name (`policies`, `explore`), each
    /// read by `entry`, sorted by name, with the span of each (in that order, for the
    /// cross-checks to point at); a name given twice is refused as `twice` says.
    fn named_entries<T>(
        &self,
        raw: &Raw,
        example: &str,
        twice: Twice,
        entry: impl Fn(&KdlNode) -> Result<T, Vec<DiagBuilder>>,
    ) -> Result<(Vec<T>, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let mut errs = Vec::new();
        let Some(block) = self.block_of(raw, example, &mut errs) else {
            return Err(errs);
        };
        let mut entries: BTreeMap<String, (T, SourceSpan)> = BTreeMap::new();
        for node in block.nodes() {
            let (name, span) = (node.name().value(), node.name().span());
            match entry(node) {
                Err(e) => errs.extend(e),
                Ok(_) if entries.contains_key(name) => errs.push(
                    error("config::duplicate-setting", (twice.what)(name))
                        .at(source, span, twice.again)
                        .also(source, entries[name].1, twice.first)
                        .help(twice.help),
                ),
                Ok(value) => {
                    entries.insert(name.to_string(), (value, span));
                }
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let spans = entries.values().map(|(_, span)| *span).collect();
        Ok((
            entries.into_values().map(|(value, _)| value).collect(),
            spans,
        ))
    }

    /// `explore { algorithm.lr factor=1.25 min=1e-5 max=1e-2; algorithm.entropy-coef 0 0.01 }`:
    /// each number setting of the algorithm section once, with a factor and a range or a list
    /// of values, each value checked against the setting; sorted by path. Whether the
    /// experiment's algorithm has the setting and reads it afresh is the cross-check's.
    fn explore(&self, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let example = "write `explore { algorithm.lr factor=1.25 min=1e-5 max=1e-2; algorithm.entropy-coef 0 0.003 0.01 }`";
        let twice = Twice {
            what: |path| format!("`{path}` is explored twice"),
            again: "given again here",
            first: "first given here",
            help: "give each explored setting once",
        };
        let (list, spans) = self.named_entries(raw, example, twice, |node| {
            let path = node.name().value();
            Checker {
                source: self.source,
                path,
            }
            .explored(node)
        })?;
        Ok((Val::Explore(list), spans))
    }

    /// One explored setting: `algorithm.<name>` and its rule, a factor and a range
    /// ([`Checker::factor_rule`]) or a list of values ([`Checker::listed_rule`]).
    fn explored(&self, node: &KdlNode) -> Result<Explore, Vec<DiagBuilder>> {
        let source = self.source;
        let path = node.name().value();
        let field = self.explorable_field(node)?;
        let raw = raw_of_node(node);
        let mut errs = Vec::new();
        if let Some(children) = &raw.children {
            errs.push(
                error(
                    "config::unexpected-block",
                    format!("`{path}` takes no block"),
                )
                .at(source, children.span(), "unexpected block")
                .help("write its rule on its line: `factor= min= max=`, or its values"),
            );
        }
        let (props, spread) = self.explore_props(field, &raw, &mut errs);
        let rule = match (raw.args.is_empty(), props.is_empty()) {
            (true, false) => self.factor_rule(&props, &raw, &mut errs),
            (false, true) => Some(self.listed_rule(field, &raw, &mut errs)),
            _ => {
                errs.push(
                    error("config::explore-rule", format!("`{path}` needs one rule"))
                        .at(
                            source,
                            raw.value_span,
                            "a factor and range, or a list of values",
                        )
                        .help(format!(
                            "either `{path} factor=1.25 min=A max=B` or `{path} V1 V2 V3`"
                        )),
                );
                None
            }
        };
        match rule {
            Some(rule) if errs.is_empty() => Ok(Explore {
                path: path.to_string(),
                rule,
                spread,
            }),
            _ => Err(errs),
        }
    }

    /// The number setting of the algorithm section an explore node names.
    fn explorable_field(&self, node: &KdlNode) -> Result<&'static Field, Vec<DiagBuilder>> {
        let (path, span) = (node.name().value(), node.name().span());
        match policy_field(path) {
            Some(field)
                if path.starts_with("algorithm.") && matches!(field.ty, Ty::Float { .. }) =>
            {
                Ok(field)
            }
            _ => Err(vec![
                error(
                    "config::explore-setting",
                    format!("`{path}` cannot be explored"),
                )
                .at(self.source, span, "not a number setting of the algorithm section")
                .help("explore a number setting of the algorithm section, written with its section: `algorithm.lr factor=1.25 min=1e-5 max=1e-2`"),
            ]),
        }
    }

    /// One value of an explored setting (`min=`, `max=`, a listed value), checked as the
    /// setting's own value is.
    fn explored_number(
        &self,
        field: &Field,
        value: &KdlValue,
        at: SourceSpan,
    ) -> Result<f64, Vec<DiagBuilder>> {
        let one = Raw {
            args: vec![(value.clone(), at)],
            props: Vec::new(),
            children: None,
            value_span: at,
        };
        match self.value(field, &one)? {
            (Val::Float(x), _) => Ok(x),
            _ => Err(vec![
                error("config::type", format!("`{}` explores numbers", self.path))
                    .at(self.source, at, "not a number")
                    .help(format!("`{}`: {}", field.name, field.doc)),
            ]),
        }
    }

    /// An explored setting's properties: `factor=`, `min=` and `max=` (each checked, with its
    /// span) and `spread=` (`#true` where not given); a mistake goes into `errs`.
    fn explore_props(
        &self,
        field: &Field,
        raw: &Raw,
        errs: &mut Vec<DiagBuilder>,
    ) -> (BTreeMap<&'static str, (f64, SourceSpan)>, bool) {
        let (source, path) = (self.source, self.path);
        let mut props = BTreeMap::new();
        let mut spread = true;
        for (key, value, at) in &raw.props {
            match (key.as_str(), value) {
                ("spread", KdlValue::Bool(b)) => spread = *b,
                ("spread", _) => errs.push(
                    error("config::type", format!("`spread` of `{path}` is #true or #false"))
                        .at(source, *at, "not a boolean")
                        .help("`spread=#false` starts every member from the experiment's value"),
                ),
                ("factor", KdlValue::Integer(_) | KdlValue::Float(_)) => {
                    let x = match value {
                        KdlValue::Integer(i) => *i as f64,
                        KdlValue::Float(x) => *x,
                        _ => 0.0,
                    };
                    if !(x.is_finite() && x > 1.0 && x <= 100.0) {
                        errs.push(
                            error("config::range", format!("the factor of `{path}` is out of range"))
                                .at(source, *at, format!("must be above 1 and at most 100, found {x}"))
                                .help("an exploring member multiplies or divides the value by the factor: 1.2 or 1.25 are usual"),
                        );
                    }
                    props.insert("factor", (x, *at));
                }
                ("min" | "max", _) => match self.explored_number(field, value, *at) {
                    Ok(x) => {
                        props.insert(if key == "min" { "min" } else { "max" }, (x, *at));
                    }
                    Err(e) => errs.extend(e),
                },
                _ => errs.push(
                    error("config::unexpected-property", format!("`{path}` takes no `{key}=`"))
                        .at(source, *at, "unexpected property")
                        .help("an explored setting takes `factor=`, `min=`, `max=` and `spread=`, or a list of values"),
                ),
            }
        }
        (props, spread)
    }

    /// `factor= min= max=`: all three, the range positive and not empty.
    fn factor_rule(
        &self,
        props: &BTreeMap<&'static str, (f64, SourceSpan)>,
        raw: &Raw,
        errs: &mut Vec<DiagBuilder>,
    ) -> Option<ExploreRule> {
        let (source, path) = (self.source, self.path);
        match (props.get("factor"), props.get("min"), props.get("max")) {
            (Some(&(factor, _)), Some(&(min, min_at)), Some(&(max, _))) => {
                if !(min > 0.0 && min < max) {
                    errs.push(
                        error(
                            "config::range",
                            format!("the range of `{path}` is empty or not positive"),
                        )
                        .at(
                            source,
                            min_at,
                            format!("min {min} must be above 0 and below max {max}"),
                        )
                        .help("a factor moves a value within (0, inf): give 0 < min < max"),
                    );
                }
                Some(ExploreRule::Factor { factor, min, max })
            }
            _ => {
                errs.push(
                    error(
                        "config::missing-value",
                        format!("`{path}` needs factor=, min= and max="),
                    )
                    .at(source, raw.value_span, "incomplete rule")
                    .help(format!("e.g. `{path} factor=1.25 min=1e-5 max=1e-2`")),
                );
                None
            }
        }
    }

    /// A list of values: each checked, sorted, two or more different ones.
    fn listed_rule(&self, field: &Field, raw: &Raw, errs: &mut Vec<DiagBuilder>) -> ExploreRule {
        let path = self.path;
        let mut values = Vec::new();
        for (value, at) in &raw.args {
            match self.explored_number(field, value, *at) {
                Ok(x) => values.push(x),
                Err(e) => errs.extend(e),
            }
        }
        values.sort_by(f64::total_cmp);
        values.dedup();
        if values.len() < 2 && errs.is_empty() {
            errs.push(
                error(
                    "config::missing-value",
                    format!("`{path}` needs two or more different values"),
                )
                .at(self.source, raw.value_span, "nothing to explore")
                .help(format!(
                    "list two or more values for members to step between: `{path} A B C`"
                )),
            );
        }
        ExploreRule::Values(values)
    }

    /// One policy: `name "pattern"`, and a block of its own settings.
    fn policy(&self, node: &KdlNode) -> Result<Policy, Vec<DiagBuilder>> {
        let pattern = self.policy_pattern(node).map_err(|e| vec![e])?;
        let settings = match node.children() {
            None => Vec::new(),
            Some(block) => self.policy_settings(node.name().value(), block)?,
        };
        Ok(Policy {
            name: node.name().value().to_string(),
            pattern,
            settings,
        })
    }

    /// A policy's own settings: `algorithm.<setting> VALUE` and `network.<setting> VALUE`, each
    /// once, each value checked against the setting (of whichever kind has it: the cross-checks
    /// check the policy's whole experiment) and kept as canonical KDL arguments, by path.
    fn policy_settings(
        &self,
        policy: &str,
        block: &kdl::KdlDocument,
    ) -> Result<Vec<(String, String)>, Vec<DiagBuilder>> {
        let source = self.source;
        let mut settings: Vec<(String, String)> = Vec::new();
        let mut errs = Vec::new();
        for child in block.nodes() {
            let (path, span) = (child.name().value(), child.name().span());
            let Some(field) = policy_field(path) else {
                errs.push(
                    error(
                        "config::policy-setting",
                        format!("policy `{policy}` cannot have a setting `{path}` of its own"),
                    )
                    .at(source, span, "not an algorithm or network setting written as values")
                    .help("a policy's own settings are those of the `algorithm` and `network` sections written as values (not blocks such as `network.layers`), with their section: `algorithm.lr 1e-3`, `network.hidden 128 128`"),
                );
                continue;
            };
            if settings.iter().any(|(p, _)| p == path) {
                errs.push(
                    error(
                        "config::duplicate-setting",
                        format!("policy `{policy}` sets `{path}` twice"),
                    )
                    .at(source, span, "set again here")
                    .help("give each of a policy's settings once"),
                );
                continue;
            }
            let checker = Checker { source, path };
            match checker.value(field, &raw_of_node(child)) {
                Ok((val, _)) => {
                    settings.push((path.to_string(), crate::canonical::kdl_value(&val)))
                }
                Err(e) => errs.extend(e),
            }
        }
        // By path: the canonical order, whichever order the KDL or JSON form wrote them in.
        settings.sort();
        if errs.is_empty() {
            Ok(settings)
        } else {
            Err(errs)
        }
    }

    /// One policy's pattern: `name "pattern"`.
    fn policy_pattern(&self, node: &KdlNode) -> Result<String, DiagBuilder> {
        let source = self.source;
        let name = node.name().value();
        let help = format!(
            "write `{name} \"PATTERN\"`: the ids of the agents it plays, `*` for any run of characters (`\"adversary_*\"`)"
        );
        // KDL reads these bare words as keywords, so the canonical form could not write them.
        if !is_identifier(name) || ["true", "false", "null", "inf", "nan"].contains(&name) {
            return Err(error(
                "config::policy-name",
                format!("`{name}` cannot name a policy"),
            )
            .at(source, node.name().span(), "not a policy name")
            .help("a policy is named by letters, digits and `_`, not starting with a digit (its scalars are tagged `policy/<name>/`)"));
        }
        let raw = raw_of_node(node);
        let pattern = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-*".contains(c))
        };
        match (raw.args.as_slice(), raw.props.first()) {
            ([(KdlValue::String(s), _)], None) if pattern(s) => Ok(s.clone()),
            ([(_, span)], None) => Err(error(
                "config::agent-pattern",
                format!("policy `{name}` needs a pattern of agent ids"),
            )
            .at(source, *span, "not a pattern of agent ids")
            .help("a pattern is a string of letters, digits, `_`, `-` and `*`")),
            _ => Err(error(
                "config::missing-value",
                format!("policy `{name}` needs one pattern of agent ids"),
            )
            .at(source, node.span(), "one string expected")
            .help(help)),
        }
    }

    /// One keyword argument: a Python identifier and one scalar value.
    fn arg(&self, node: &KdlNode) -> Result<Scalar, DiagBuilder> {
        let source = self.source;
        let name = node.name().value();
        let raw = raw_of_node(node);
        let help =
            format!("write `{name} VALUE` with one integer, number, boolean, string or #null");
        // KDL reads these bare words as keywords, so the canonical form could not write them.
        if !is_identifier(name) || ["true", "false", "null", "inf", "nan"].contains(&name) {
            return Err(error(
                "config::argument-name",
                format!("`{name}` is not a keyword argument name"),
            )
            .at(source, node.name().span(), "not a Python identifier")
            .help(
                "keyword arguments are named by letters, digits and `_`, not starting with a digit",
            ));
        }
        if let Some(children) = &raw.children {
            return Err(error(
                "config::unexpected-block",
                format!("keyword argument `{name}` takes no block"),
            )
            .at(source, children.span(), "unexpected block")
            .help(help));
        }
        if let Some((key, _, span)) = raw.props.first() {
            return Err(error(
                "config::unexpected-property",
                format!("keyword argument `{name}` takes no properties"),
            )
            .at(source, *span, format!("unexpected `{key}=`"))
            .help(help));
        }
        let [(value, span)] = raw.args.as_slice() else {
            let span = raw.args.get(1).map_or(node.span(), |(_, s)| *s);
            return Err(error(
                "config::missing-value",
                format!("keyword argument `{name}` needs one value"),
            )
            .at(
                source,
                span,
                if raw.args.is_empty() {
                    "no value"
                } else {
                    "extra value"
                },
            )
            .help(help));
        };
        match value {
            KdlValue::Integer(i) => i64::try_from(*i).map(Scalar::Int).map_err(|_| {
                error("config::range", format!("keyword argument `{name}` is out of range"))
                    .at(source, *span, "beyond 64-bit integers")
                    .help("integers passed to gymnasium.make fit in 64 bits")
            }),
            KdlValue::Float(x) if x.is_finite() => Ok(Scalar::Float(*x)),
            KdlValue::Float(_) => Err(error("config::range", format!("keyword argument `{name}` is not finite"))
                .at(source, *span, "infinite or NaN")
                .help("pass finite numbers; an environment that needs infinity can take a string it converts")),
            KdlValue::Bool(b) => Ok(Scalar::Bool(*b)),
            KdlValue::String(s) => Ok(Scalar::Str(s.clone())),
            KdlValue::Null => Ok(Scalar::Null),
        }
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
        let devices = if raw.props.is_empty() {
            self.devices_listed(raw, &mut errs)
        } else {
            self.devices_counted(raw, &mut errs)
        };
        check_device_set(self.source, &devices, &mut errs);
        if errs.is_empty() {
            Ok(Val::Devices(devices.into_iter().map(|(d, _)| d).collect()))
        } else {
            Err(errs)
        }
    }

    /// `devices count=N kind="..."`.
    fn devices_counted(&self, raw: &Raw, errs: &mut Vec<DiagBuilder>) -> Vec<(Device, SourceSpan)> {
        let source = self.source;
        let mut devices = Vec::new();
        if let Some((_, span)) = raw.args.first() {
            errs.push(
                error(
                    "config::devices-form",
                    "`devices` takes either a list or count= and kind=, not both",
                )
                .at(source, *span, "a listed device")
                .help("write `devices \"cuda:0\" \"cuda:1\"` or `devices count=2 kind=\"cuda\"`"),
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
        devices
    }

    /// `devices "cpu" "cpu"` or `devices "cuda:0" "cuda:1"`.
    fn devices_listed(&self, raw: &Raw, errs: &mut Vec<DiagBuilder>) -> Vec<(Device, SourceSpan)> {
        let source = self.source;
        let mut devices = Vec::new();
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
        devices
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
                .help(format!("write `wrappers {{ {} }}`", written::CHAIN)),
            );
        }
        for (_, _, span) in &raw.props {
            errs.push(
                error(
                    "config::unexpected-property",
                    "`wrappers` takes a block, not properties",
                )
                .at(source, *span, "unexpected property")
                .help(format!("write `wrappers {{ {} }}`", written::CHAIN)),
            );
        }
        let Some(block) = &raw.children else {
            errs.push(
                error("config::missing-block", "`wrappers` needs a block")
                    .at(source, raw.value_span, "no block")
                    .help(format!(
                        "write `wrappers {{ {} }}` (`wrappers {{}}` for none)",
                        written::CHAIN
                    )),
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

    /// `layers { linear 64; tanh; residual { ... } }`: the layers and each one's span, in
    /// preorder (a residual before the layers of its block), as the shape checks count them.
    fn layers(&self, raw: &Raw) -> Result<(Val, Vec<SourceSpan>), Vec<DiagBuilder>> {
        let source = self.source;
        let mut errs = Vec::new();
        let values = raw.args.iter().map(|(_, span)| span);
        for span in values.chain(raw.props.iter().map(|(_, _, span)| span)) {
            errs.push(
                error(
                    "config::unexpected-argument",
                    "`layers` takes a block, not values",
                )
                .at(source, *span, "unexpected value")
                .help(format!("write `layers {{ {} }}`", layer::written::LIST)),
            );
        }
        let Some(block) = &raw.children else {
            errs.push(
                error("config::missing-block", "`layers` needs a block")
                    .at(source, raw.value_span, "no block")
                    .help(format!("write `layers {{ {} }}`", layer::written::LIST)),
            );
            return Err(errs);
        };
        let mut spans = Vec::new();
        let list = self.layer_block(block, 0, &mut spans, &mut errs);
        if list.is_empty() && errs.is_empty() {
            errs.push(
                error("config::missing-value", "`layers` holds no layer")
                    .at(source, block.span(), "empty block")
                    .help(format!(
                        "declare the torso's layers: `layers {{ {} }}`",
                        layer::written::LIST
                    )),
            );
        }
        if errs.is_empty() {
            Ok((Val::Layers(list), spans))
        } else {
            Err(errs)
        }
    }

    /// The layers of one block, `depth` residual blocks deep; their spans are appended to
    /// `spans` in preorder.
    fn layer_block(
        &self,
        block: &KdlDocument,
        depth: usize,
        spans: &mut Vec<SourceSpan>,
        errs: &mut Vec<DiagBuilder>,
    ) -> Vec<Layer> {
        let mut list = Vec::new();
        for node in block.nodes() {
            if spans.len() == layer::MAX_LAYERS {
                errs.push(
                    error(
                        "config::too-many-layers",
                        format!("a network declares at most {} layers", layer::MAX_LAYERS),
                    )
                    .at(self.source, node.span(), "one too many")
                    .help("counting those inside residual blocks; declare fewer"),
                );
                return list;
            }
            spans.push(node.span());
            if let Some(layer) = self.layer(node, depth, spans, errs) {
                list.push(layer);
            }
        }
        list
    }

    fn layer(
        &self,
        node: &KdlNode,
        depth: usize,
        spans: &mut Vec<SourceSpan>,
        errs: &mut Vec<DiagBuilder>,
    ) -> Option<Layer> {
        let source = self.source;
        let name = node.name().value();
        let Some(spec) = schema::layer(name) else {
            errs.push(
                error("config::unknown-layer", format!("unknown layer `{name}`"))
                    .at(source, node.name().span(), "unknown layer")
                    .help(did_you_mean(name, schema::LAYERS.iter().map(|l| l.name))),
            );
            return None;
        };
        let raw = raw_of_node(node);
        let before = errs.len();
        let mut given = Given::new();
        let body = match (&raw.children, layer::info(name).is_some_and(|l| l.block)) {
            (Some(block), true) if depth + 1 > layer::MAX_DEPTH => {
                errs.push(
                    error(
                        "config::too-deep",
                        format!("residual blocks nest at most {} deep", layer::MAX_DEPTH),
                    )
                    .at(source, block.span(), "one level too deep")
                    .help("declare the layers without this block"),
                );
                Vec::new()
            }
            (Some(block), true) => {
                let body = self.layer_block(block, depth + 1, spans, errs);
                if block.nodes().is_empty() {
                    errs.push(
                        error(
                            "config::missing-value",
                            format!("layer `{name}` holds no layer"),
                        )
                        .at(source, block.span(), "empty block")
                        .help("e.g. `residual { linear 64; tanh }`"),
                    );
                }
                body
            }
            (None, true) => {
                errs.push(
                    error(
                        "config::missing-block",
                        format!("layer `{name}` needs a block"),
                    )
                    .at(source, node.span(), "no block")
                    .help("e.g. `residual { linear 64; tanh }`"),
                );
                Vec::new()
            }
            (Some(block), false) => {
                errs.push(
                    error(
                        "config::unexpected-block",
                        format!("layer `{name}` takes no block"),
                    )
                    .at(source, block.span(), "unexpected block")
                    .help(format!(
                        "write parameters as properties, e.g. `{}`",
                        spec.example
                    )),
                );
                Vec::new()
            }
            (None, false) => Vec::new(),
        };
        self.wrapper_args(spec, &raw, &mut given, errs);
        self.wrapper_props(spec, &raw, &mut given, errs);
        let vals = self.wrapper_defaults(spec, node, given, errs);
        if errs.len() > before {
            return None;
        }
        let layer = Layer::from_params(name, &item_values(spec, &vals), body);
        Some(layer.unwrap_or_else(|| unreachable!("layer `{name}` is declared in tandem-spec")))
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
        let mut given = Given::new();
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
        self.wrapper_args(spec, &raw, &mut given, &mut errs);
        self.wrapper_props(spec, &raw, &mut given, &mut errs);
        let vals = self.wrapper_defaults(spec, node, given, &mut errs);
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(build_wrapper(spec, &vals))
    }

    /// The wrapper's argument: its first parameter.
    fn wrapper_args(
        &self,
        spec: &'static ItemSpec,
        raw: &Raw,
        given: &mut Given,
        errs: &mut Vec<DiagBuilder>,
    ) {
        let source = self.source;
        let name = spec.name;
        if let Some(list) = spec.list_argument() {
            return self.wrapper_list(name, list, raw, given, errs);
        }
        for (i, (value, span)) in raw.args.iter().enumerate() {
            match spec.params.first() {
                Some(first) if i == 0 => self.wrapper_param(name, first, value, *span, given, errs),
                Some(_) => errs.push(
                    error(
                        "config::extra-value",
                        format!("{} `{name}` takes at most one argument", spec.kind),
                    )
                    .at(source, *span, "extra argument")
                    .help(format!(
                        "name the other parameters, e.g. `{}`",
                        spec.example
                    )),
                ),
                None => errs.push(
                    error(
                        "config::unexpected-argument",
                        format!("{} `{name}` takes no parameters", spec.kind),
                    )
                    .at(source, *span, "unexpected argument")
                    .help(format!("write just `{name}`")),
                ),
            }
        }
    }

    /// A wrapper whose first parameter is a list takes it as all its arguments, each once:
    /// `keep-obs 0 2`.
    fn wrapper_list(
        &self,
        wrapper: &str,
        param: &'static Field,
        raw: &Raw,
        given: &mut Given,
        errs: &mut Vec<DiagBuilder>,
    ) {
        let Ty::IntList { min, max } = param.ty else {
            return;
        };
        let path = format!("{wrapper}.{}", param.name);
        let checker = Checker {
            source: self.source,
            path: &path,
        };
        let mut list: Vec<i64> = Vec::new();
        let mut seen: Vec<(i64, SourceSpan)> = Vec::new();
        for (value, span) in &raw.args {
            match integral(value) {
                Some(i) if i >= min as i128 && i <= max as i128 => {
                    let i = i as i64;
                    if let Some((_, first)) = seen.iter().find(|(v, _)| *v == i) {
                        errs.push(
                            error(
                                "config::duplicate-value",
                                format!("`{path}` lists {i} twice"),
                            )
                            .at(self.source, *span, "second time")
                            .also(self.source, *first, "first time")
                            .help("list each entry once"),
                        );
                    }
                    seen.push((i, *span));
                    list.push(i);
                }
                Some(i) => errs.push(checker.range(param, i.to_string(), *span)),
                None => errs.push(checker.wrong(param, value, *span)),
            }
        }
        // Given (if wrongly): the errors above say what is wrong, not that it is missing.
        if let Some((_, span)) = raw.args.first() {
            given.insert(param.name, (Val::IntList(list), *span));
        }
    }

    /// The wrapper's named parameters.
    fn wrapper_props(
        &self,
        spec: &'static ItemSpec,
        raw: &Raw,
        given: &mut Given,
        errs: &mut Vec<DiagBuilder>,
    ) {
        let source = self.source;
        let name = spec.name;
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
                        format!("unknown parameter `{key}` of {} `{name}`", spec.kind),
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
            self.wrapper_param(name, param, value, *span, given, errs);
        }
    }

    /// Checks one parameter value of wrapper `wrapper` and records it in `given`.
    fn wrapper_param(
        &self,
        wrapper: &str,
        param: &'static Field,
        value: &KdlValue,
        span: SourceSpan,
        given: &mut Given,
        errs: &mut Vec<DiagBuilder>,
    ) {
        let path = format!("{wrapper}.{}", param.name);
        let checker = Checker {
            source: self.source,
            path: &path,
        };
        match checker.scalar(param, value, span) {
            Ok(v) => {
                given.insert(param.name, (v, span));
            }
            Err(e) => {
                // Given (if wrongly): the error says what is wrong, not that it is missing.
                given.insert(param.name, (Val::Null, span));
                errs.push(e)
            }
        }
    }

    /// Every parameter: as given, or its default; a required one missing is an error.
    fn wrapper_defaults(
        &self,
        spec: &'static ItemSpec,
        node: &KdlNode,
        mut given: Given,
        errs: &mut Vec<DiagBuilder>,
    ) -> BTreeMap<&'static str, Val> {
        let source = self.source;
        let name = spec.name;
        let mut vals: BTreeMap<&'static str, Val> = BTreeMap::new();
        for param in &spec.params {
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
                            format!("{} `{name}` needs `{}`", spec.kind, param.name),
                        )
                        .at(source, node.span(), format!("no `{}`", param.name))
                        .help(format!(
                            "e.g. `{name} {}={}`: {}",
                            param.name,
                            example_number(param),
                            param.doc
                        )),
                    ),
                },
            }
        }
        vals
    }
}

/// A value for a wrapper's or layer's required number in help texts: a window's side (up to
/// 64), a layer's width, a count (time-limit's 1000 steps) or a fraction (scale-reward's
/// factor).
fn example_number(param: &Field) -> &'static str {
    match param.ty {
        Ty::Float { .. } => "0.1",
        Ty::Int { max, .. } if max <= 64 => "3",
        Ty::Int { max, .. } if max <= 65_536 => "64",
        _ => "1000",
    }
}

/// A one-line example of a setting, for help texts.
fn example(field: &Field) -> String {
    match field.ty {
        Ty::Modules => return format!("{} \"ale_py\"", field.name),
        Ty::InfoKeys => return format!("{} \"is_success\"", field.name),
        _ => {}
    }
    let value = match field.default {
        Dflt::Required | Dflt::Null => match field.ty {
            Ty::Int { min, .. } => min.max(1).to_string(),
            Ty::Float { .. } => "0.1".into(),
            Ty::Name => "\"my-run\"".into(),
            Ty::Text => "\"CartPole-v1\"".into(),
            _ => "...".into(),
        },
        // A derived default's usual value: one value makes the example.
        ref d => schema::default_text(&d.usual())
            .trim_matches('`')
            .to_string(),
    };
    format!("{} {value}", field.name)
}

/// A Python identifier (ASCII: what `gymnasium.make`'s keyword arguments and module names use).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Ranks do not mix CPU and CUDA. (A CUDA device listed twice depends on `sync.backend`: the
/// cross-field checks decide.)
fn check_device_set(
    source: SourceId,
    devices: &[(Device, SourceSpan)],
    errs: &mut Vec<DiagBuilder>,
) {
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
}

/// The typed wrapper from its complete parameters, through tandem-spec's declaration of it
/// (its parameters in order; checked above against their types and ranges).
fn build_wrapper(spec: &ItemSpec, vals: &BTreeMap<&'static str, Val>) -> Wrapper {
    Wrapper::from_params(spec.name, &item_values(spec, vals))
        .unwrap_or_else(|| unreachable!("wrapper `{}` is declared in tandem-spec", spec.name))
}

/// A wrapper's or layer's checked parameters as tandem-spec's values, in declared order.
fn item_values(spec: &ItemSpec, vals: &BTreeMap<&'static str, Val>) -> Vec<WrapperValue> {
    spec.params
        .iter()
        .map(|p| match vals.get(p.name) {
            Some(Val::Int(i)) => WrapperValue::Int(*i),
            Some(Val::Float(x)) => WrapperValue::Float(*x),
            Some(Val::Bool(b)) => WrapperValue::Bool(*b),
            Some(Val::IntList(list)) => {
                WrapperValue::Indices(list.iter().fold(0u64, |m, &i| m | 1 << i))
            }
            _ => unreachable!(
                "{} `{}`: parameter `{}` is checked",
                spec.kind, spec.name, p.name
            ),
        })
        .collect()
}

/// The parameters given so far, with where each was written.
type Given = BTreeMap<&'static str, (Val, SourceSpan)>;

/// The setting `path` names among those a policy may have of its own: an `algorithm` or
/// `network` setting of any kind that is written as values (not a block).
fn policy_field(path: &str) -> Option<&'static Field> {
    let (section, name) = path.split_once('.')?;
    if !["algorithm", "network"].contains(&section) {
        return None;
    }
    let section = schema::section(section)?;
    let mut fields = section
        .common
        .iter()
        .chain(section.kinds.iter().flat_map(|k| k.fields.iter()));
    fields.find(|f| {
        f.name == name
            && !matches!(
                f.ty,
                Ty::Wrappers | Ty::Layers | Ty::Args | Ty::Policies | Ty::Explore
            )
    })
}
