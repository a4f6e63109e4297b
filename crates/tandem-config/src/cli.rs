//! The `tandem validate` and `tandem resolve` subcommands as pure functions: they
//! return the text to print and the exit code (0 valid, 1 invalid, 2 usage error)
//! and print nothing themselves. `-` as a file name reads standard input.

use std::path::PathBuf;

use crate::{
    Bytes, Diagnostic, Diagnostics, Machine, Resolved, Severity, Source, canonical_json,
    canonical_kdl, config_hash, memory_estimate, resolve as resolve_source, resolve_on, steps_run,
};

/// Exit code of a valid run.
pub const EXIT_OK: i32 = 0;
/// Exit code when a config is invalid.
pub const EXIT_INVALID: i32 = 1;
/// Exit code for a malformed command line.
pub const EXIT_USAGE: i32 = 2;

fn source_of(file: &str) -> Result<Source, String> {
    if file == "-" {
        crate::read_capped(std::io::stdin())
            .map(Source::Stdin)
            .map_err(|e| format!("error: cannot read the config from standard input: {e}\n"))
    } else {
        Ok(Source::Path(PathBuf::from(file)))
    }
}

fn check_sets(sets: &[String]) -> Result<(), String> {
    match sets.iter().find(|s| !s.contains('=')) {
        Some(bad) => Err(format!(
            "error: `--set {bad}` is not PATH=VALUE\n  for example `--set algorithm.lr=0.001` or `--set train.max-steps=4096`\n"
        )),
        None => Ok(()),
    }
}

/// A caller's checks of a resolved experiment against what the resolver does not look at
/// (this build, this machine's programs): errors make the file invalid, warnings are reported.
pub type HostCheck<'a> = dyn Fn(&Resolved) -> HostFindings + 'a;

/// What a caller's checks found: problems, and lines shown under a valid file's cost line
/// (a declared network's shapes, which `validate --deep` computes).
#[derive(Debug, Default)]
pub struct HostFindings {
    pub diagnostics: Vec<Diagnostic>,
    pub notes: Vec<String>,
}

/// `tandem validate FILE...`: checks every file, reports every problem of each, and
/// checks that one rank of each fits in this machine's available memory (where the ranks
/// will run is not known here).
/// Returns the text to print on standard output and the exit code.
pub fn validate(files: &[String], json: bool, color: bool) -> (String, i32) {
    validate_with(files, &[], json, color, &|_| HostFindings::default())
}

/// [`validate`] with `--set` overrides applied to every file, and `host`'s checks of each
/// resolved experiment.
pub fn validate_with(
    files: &[String],
    sets: &[String],
    json: bool,
    color: bool,
    host: &HostCheck,
) -> (String, i32) {
    if let Err(message) = check_sets(sets) {
        return (message, EXIT_USAGE);
    }
    if files.is_empty() {
        return ("error: no file to validate\nusage: tandem validate FILE... (`-` reads standard input)\n".into(), EXIT_USAGE);
    }
    if files.iter().filter(|f| *f == "-").count() > 1 {
        return (
            "error: `-` (standard input) can be given only once\n".into(),
            EXIT_USAGE,
        );
    }
    let mut text = String::new();
    let mut reports = Vec::new();
    let (mut valid, mut errors, mut warnings) = (0usize, 0usize, 0usize);
    let machine = Machine::detect(None);
    for file in files {
        let outcome: Result<Resolved, Result<Diagnostics, String>> = match source_of(file) {
            Ok(source) => match &machine {
                Some(machine) => resolve_on(&source, sets, machine).map_err(Ok),
                None => resolve_source(&source, sets).map_err(Ok),
            },
            Err(message) => Err(Err(message)),
        };
        let mut notes = Vec::new();
        let outcome = outcome.and_then(|resolved| with_host_checks(resolved, host, &mut notes));
        let mut report = serde_json::Map::new();
        report.insert("file".into(), file.clone().into());
        match outcome {
            Ok(resolved) => {
                valid += 1;
                warnings += resolved.warnings.len();
                let hash = config_hash(&resolved.experiment);
                text.push_str(&resolved.warnings.render(color));
                text.push_str(&format!("ok: {file} (sha256 {})\n", &hash[..16]));
                text.push_str(&format!("    {}\n", cost_line(&resolved)));
                for note in &notes {
                    text.push_str(&format!("    {note}\n"));
                }
                if !notes.is_empty() {
                    report.insert("notes".into(), notes.clone().into());
                }
                report.insert("valid".into(), true.into());
                report.insert("hash".into(), hash.into());
                let (updates, steps) = steps_run(&resolved.experiment);
                report.insert("updates".into(), updates.into());
                report.insert("steps".into(), steps.into());
                let memory = memory_estimate(&resolved.experiment).per_rank();
                report.insert("memory_per_rank_bytes".into(), memory.into());
                report.insert(
                    "diagnostics".into(),
                    serde_json::Value::Array(resolved.warnings.json_values()),
                );
            }
            Err(Ok(diags)) => {
                errors += diags.errors();
                warnings += diags.len() - diags.errors();
                text.push_str(&diags.render(color));
                text.push_str(&format!(
                    "invalid: {file} ({} error{})\n",
                    diags.errors(),
                    if diags.errors() == 1 { "" } else { "s" }
                ));
                report.insert("valid".into(), false.into());
                report.insert(
                    "diagnostics".into(),
                    serde_json::Value::Array(diags.json_values()),
                );
            }
            Err(Err(message)) => {
                errors += 1;
                text.push_str(&message);
                report.insert("valid".into(), false.into());
                let mut d = serde_json::Map::new();
                d.insert("severity".into(), "error".into());
                d.insert("code".into(), "config::read".into());
                d.insert("message".into(), message.trim().into());
                report.insert(
                    "diagnostics".into(),
                    serde_json::Value::Array(vec![serde_json::Value::Object(d)]),
                );
            }
        }
        reports.push(serde_json::Value::Object(report));
    }
    let invalid = files.len() - valid;
    let code = if invalid == 0 { EXIT_OK } else { EXIT_INVALID };
    if json {
        let mut root = serde_json::Map::new();
        root.insert("valid".into(), (invalid == 0).into());
        root.insert("files".into(), serde_json::Value::Array(reports));
        let mut out = serde_json::Value::Object(root).to_string();
        out.push('\n');
        return (out, code);
    }
    let warned = match warnings {
        0 => String::new(),
        1 => ", 1 warning".to_string(),
        n => format!(", {n} warnings"),
    };
    text.push_str(&format!(
        "{} file{} checked: {valid} valid, {invalid} invalid, {errors} error{}{warned}\n",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        if errors == 1 { "" } else { "s" }
    ));
    (text, code)
}

/// `resolved` with `host`'s findings: invalid when one is an error (every finding and the
/// resolver's warnings reported), else its warnings added.
fn with_host_checks(
    mut resolved: Resolved,
    host: &HostCheck,
    notes: &mut Vec<String>,
) -> Result<Resolved, Result<Diagnostics, String>> {
    let HostFindings {
        diagnostics: found,
        notes: found_notes,
    } = host(&resolved);
    *notes = found_notes;
    let mut all: Vec<Diagnostic> = resolved.warnings.iter().cloned().collect();
    let invalid = found.iter().any(|d| d.severity() == Severity::Error);
    all.extend(found);
    if invalid {
        return Err(Ok(Diagnostics::new(all)));
    }
    resolved.warnings = Diagnostics::new(all);
    Ok(resolved)
}

/// `runs 500224 steps (977 updates of 512); at least 1.2 MiB of memory a rank` (a population's:
/// `4 members of 1 rank(s), each runs ...`).
pub fn cost_line(resolved: &Resolved) -> String {
    let e = &resolved.experiment;
    let (updates, steps) = steps_run(e);
    let unit = crate::update_steps(e);
    let each = match e.population.members {
        Some(members) => format!("{members} members of {} rank(s), each runs", e.world_size()),
        None => "runs".into(),
    };
    format!(
        "{each} {steps} steps ({updates} update{} of {unit}); at least {} of memory a rank",
        if updates == 1 { "" } else { "s" },
        Bytes(memory_estimate(e).per_rank())
    )
}

/// `tandem resolve FILE [--set PATH=VALUE]... [--format kdl|json] [--hash]`.
/// Returns (standard output, standard error, exit code). With `json`, diagnostics
/// on standard error are JSON too. Warnings go to standard error beside a valid result.
pub fn resolve(
    file: &str,
    sets: &[String],
    json: bool,
    hash_only: bool,
    color: bool,
) -> (String, String, i32) {
    if let Err(message) = check_sets(sets) {
        return (String::new(), message, EXIT_USAGE);
    }
    let source = match source_of(file) {
        Ok(source) => source,
        Err(message) => return (String::new(), message, EXIT_INVALID),
    };
    match resolve_source(&source, sets) {
        Ok(resolved) => {
            let e = &resolved.experiment;
            let out = if hash_only {
                format!("{}\n", config_hash(e))
            } else if json {
                canonical_json(e)
            } else {
                canonical_kdl(e)
            };
            let warnings = if json {
                match resolved.warnings.is_empty() {
                    true => String::new(),
                    false => format!("{}\n", resolved.warnings.to_json()),
                }
            } else {
                resolved.warnings.render(color)
            };
            (out, warnings, EXIT_OK)
        }
        Err(diags) => {
            let err = if json {
                format!("{}\n", diags.to_json())
            } else {
                diags.render(color)
            };
            (String::new(), err, EXIT_INVALID)
        }
    }
}
