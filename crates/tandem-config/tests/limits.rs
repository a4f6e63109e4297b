//! Inputs far beyond any real experiment get bounded answers: a file over the size cap
//! is refused before it is read, and however many problems a file holds (or however long
//! the line they are on), the rendered and JSON reports stay a few kilobytes.

use std::path::PathBuf;

use tandem_config::{Diagnostics, MAX_CONFIG_BYTES, Source, resolve};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-limits-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn errors_of(source: &Source) -> Diagnostics {
    match resolve(source, &[]) {
        Ok(_) => panic!("resolved"),
        Err(d) => d,
    }
}

/// `experiment "x" { ... }` padded with a comment to exactly `size` bytes.
fn valid_of_size(size: usize) -> String {
    let head = "experiment \"x\" {\n    env \"cartpole\"\n}\n// ";
    let mut text = format!("{head}{}", "x".repeat(size - head.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), size);
    text
}

#[test]
fn a_file_at_the_cap_is_read_and_one_byte_more_is_refused_with_its_size() {
    let dir = scratch("cap");
    let at_cap = dir.join("at-cap.kdl");
    std::fs::write(&at_cap, valid_of_size(MAX_CONFIG_BYTES)).unwrap();
    resolve(&Source::Path(at_cap), &[]).expect("a file of exactly the cap resolves");
    let over = dir.join("over.kdl");
    std::fs::write(&over, valid_of_size(MAX_CONFIG_BYTES + 1)).unwrap();
    let diags = errors_of(&Source::Path(over.clone()));
    assert_eq!(diags.len(), 1, "{diags}");
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large");
    assert_eq!(d.file(), Some(over.display().to_string().as_str()));
    assert!(
        d.message()
            .contains("is 262145 bytes (256.0 KiB), more than the 262144 bytes (256 KiB)"),
        "{}",
        d.message()
    );
    assert!(d.help().unwrap().contains("few kilobytes"), "{d:?}");
    // Standard input is read one byte past the cap, so its size is not known.
    let stdin = errors_of(&Source::Stdin(valid_of_size(MAX_CONFIG_BYTES + 1)));
    let d = stdin.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large");
    assert_eq!(
        d.message(),
        "<stdin> holds more than the 262144 bytes (256 KiB) a config may hold"
    );
    let capped = tandem_config::read_capped(std::io::repeat(b' ')).unwrap();
    assert_eq!(capped.len(), MAX_CONFIG_BYTES + 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_included_file_over_the_cap_is_refused_at_its_include() {
    let dir = scratch("include");
    let big = format!("// {}\n", "x".repeat(MAX_CONFIG_BYTES));
    std::fs::write(dir.join("big.kdl"), big).unwrap();
    let main = dir.join("main.kdl");
    std::fs::write(
        &main,
        "experiment \"x\" {\n    include \"big.kdl\"\n    env \"cartpole\"\n}\n",
    )
    .unwrap();
    let diags = errors_of(&Source::Path(main));
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large", "{diags}");
    assert_eq!(d.line_column(), Some((2, 13)));
    assert!(
        d.label().unwrap().starts_with("262148 bytes (256.0 KiB)"),
        "{d:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nine_thousand_unknown_settings_print_fifty_and_a_count() {
    let n = 9_000;
    let text = format!("experiment \"x\" {{\n{}}}\n", "    foo 1\n".repeat(n));
    assert!(text.len() <= MAX_CONFIG_BYTES);
    let diags = errors_of(&Source::Stdin(text));
    assert!(diags.len() > n, "{}", diags.len());
    let rendered = diags.render(false);
    let more = diags.len() - 50;
    assert!(
        rendered.ends_with(&format!(
            "and {more} more errors not shown (the first 50 are); fix these and check again\n"
        )),
        "{}",
        &rendered[rendered.len() - 300..]
    );
    assert!(rendered.len() < 50 * 1000, "{} bytes", rendered.len());
    let json: serde_json::Value = serde_json::from_str(&diags.to_json()).unwrap();
    let list = json.as_array().unwrap();
    assert_eq!(list.len(), 51);
    assert_eq!(list[50]["code"], "config::more-errors");
    assert_eq!(list[50]["severity"], "note");
}

#[test]
fn a_name_as_long_as_the_file_is_cut_in_the_report() {
    let name = "a".repeat(MAX_CONFIG_BYTES - 100);
    let text = format!("experiment \"x\" {{\n    env \"cartpole\"\n    {name} 1\n}}\n");
    let diags = errors_of(&Source::Stdin(text));
    let rendered = diags.render(false);
    assert!(
        rendered.len() < 4000,
        "{} bytes:\n{}",
        rendered.len(),
        &rendered[..2000]
    );
    let line = format!("    {name} 1");
    assert!(
        rendered.contains(&format!(
            "(line 3 is {} bytes long, too long to show)",
            line.len()
        )),
        "{rendered}"
    );
    assert!(
        rendered.contains("characters in all)"),
        "the name in the message is cut: {rendered}"
    );
    assert!(diags.to_json().len() < 4000, "{}", diags.to_json().len());
}

/// `experiment "x" { env "cartpole" a{a{...}} }` with `levels` blocks in all, the experiment's
/// included; the offset of the brace that opens level 33.
fn nested(levels: usize) -> (String, usize) {
    let head = "experiment \"x\" {\n    env \"cartpole\"\n    ";
    let inner = levels - 1;
    let text = format!("{head}{}{}\n}}\n", "a{".repeat(inner), "}".repeat(inner));
    let level_33 = head.len() + 2 * (32 - 1) + 1;
    (text, level_33)
}

#[test]
fn blocks_nested_past_32_levels_are_refused_at_the_33rd_brace_without_recursing() {
    // 60,000 levels (inside the size cap) overflowed the parser's stack long before the fix
    // (1,500 did).
    let (text, at) = nested(60_000);
    let diags = errors_of(&Source::Stdin(text.clone()));
    assert_eq!(diags.len(), 1, "{diags}");
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-deep");
    assert_eq!(d.message(), "blocks nest more than 32 levels deep");
    assert_eq!(
        d.line_column(),
        Some((3, at - text[..at].rfind('\n').unwrap()))
    );
    assert!(d.help().unwrap().contains("never closed"), "{d:?}");
    // At the limit the parser runs: the unknown node is what is reported, not the depth.
    let (text, _) = nested(32);
    let codes: Vec<_> = errors_of(&Source::Stdin(text))
        .iter()
        .map(|d| d.code())
        .collect();
    assert!(!codes.contains(&"config::too-deep"), "{codes:?}");
    assert!(codes.contains(&"config::unknown-node"), "{codes:?}");
}

#[test]
fn more_than_4096_braces_are_refused_at_the_4097th_wherever_they_are() {
    // 2,000 flat blocks and 3,000 braces in a comment: shallow, but past the count.
    let text = format!(
        "experiment \"x\" {{\n    env \"cartpole\"\n{}    // {}\n}}\n",
        "    a {}\n".repeat(2000),
        "{".repeat(3000)
    );
    let diags = errors_of(&Source::Stdin(text.clone()));
    assert_eq!(diags.len(), 1, "{diags}");
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-deep");
    assert_eq!(
        d.message(),
        "this text holds more than 4096 `{`, in blocks, strings or comments"
    );
    // The experiment's brace and 2,000 blocks' come first: the 4,097th is the comment's 2,096th.
    let comment = text.find("// ").unwrap() + 3;
    let line = text[..comment].lines().count();
    assert_eq!(d.line_column(), Some((line, 3 + 2096 + 4)));
}

#[test]
fn a_set_value_nested_past_the_limit_is_refused_with_its_span() {
    let value = format!("{}{}", "a{".repeat(100_000), "}".repeat(100_000));
    let set = format!("env.wrappers={value}");
    let main = Source::Stdin("experiment \"x\" {\n    env \"cartpole\"\n}\n".to_string());
    let diags = match resolve(&main, &[set]) {
        Ok(_) => panic!("resolved"),
        Err(d) => d,
    };
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-deep", "{diags}");
    assert_eq!(d.file(), Some("--set"));
    // `env.wrappers=` is 13 bytes; the 33rd `a{` starts 64 bytes on, its brace one more.
    assert_eq!(d.line_column(), Some((1, 13 + 2 * 32 + 2)));
}

#[test]
fn includes_that_multiply_stop_at_the_file_limit_with_one_report() {
    // Four levels, each including the next 30 times: 810,000 reads without a limit.
    let dir = scratch("amplify");
    for level in 0..4 {
        let body = if level == 3 {
            "algorithm \"ppo\"\n".to_string()
        } else {
            format!("include \"level{}.kdl\"\n", level + 1).repeat(30)
        };
        std::fs::write(dir.join(format!("level{level}.kdl")), body).unwrap();
    }
    let main = dir.join("main.kdl");
    std::fs::write(
        &main,
        "experiment \"x\" {\n    env \"cartpole\"\n    include \"level0.kdl\"\n}\n",
    )
    .unwrap();
    let diags = errors_of(&Source::Path(main));
    let limits: Vec<_> = diags
        .iter()
        .filter(|d| d.code() == "config::include-limit")
        .collect();
    assert_eq!(limits.len(), 1, "{diags}");
    assert!(
        limits[0]
            .message()
            .starts_with("this include is file number 257 of one experiment"),
        "{}",
        limits[0].message()
    );
    assert!(
        limits[0].file().unwrap().ends_with("level2.kdl"),
        "{limits:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn included_files_stop_at_half_a_mebibyte_in_all() {
    // Includes of a file just under the 256 KiB cap: each is allowed, the second's sum is, the
    // third's is not.
    let dir = scratch("bytes");
    let big = format!(
        "// {}\nalgorithm \"ppo\"\n",
        "x".repeat(MAX_CONFIG_BYTES - 1000)
    );
    std::fs::write(dir.join("big.kdl"), big).unwrap();
    let main = dir.join("main.kdl");
    let includes = "    include \"big.kdl\"\n".repeat(5);
    std::fs::write(
        &main,
        format!("experiment \"x\" {{\n    env \"cartpole\"\n{includes}}}\n"),
    )
    .unwrap();
    let diags = errors_of(&Source::Path(main));
    let d = diags
        .iter()
        .find(|d| d.code() == "config::include-limit")
        .unwrap_or_else(|| panic!("{diags}"));
    assert!(
        d.message().contains("more than the 524288 (512 KiB)"),
        "{}",
        d.message()
    );
    assert_eq!(d.line_column(), Some((5, 13)), "the third include");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `f` on a thread; a hang fails the test after 20 s instead of stalling the suite.
fn within_20s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("still waiting after 20 s")
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn an_include_naming_a_pipe_without_a_writer_is_refused_instead_of_waited_for() {
    let dir = scratch("fifo");
    mkfifo(&dir.join("pipe.kdl"));
    let main = dir.join("main.kdl");
    std::fs::write(
        &main,
        "experiment \"x\" {\n    env \"cartpole\"\n    include \"pipe.kdl\"\n}\n",
    )
    .unwrap();
    let diags = within_20s(move || errors_of(&Source::Path(main)));
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::include-missing", "{diags}");
    assert_eq!(
        d.label(),
        Some("it is a named pipe and no process was writing to it")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pipe_with_a_writer_is_read_as_a_config() {
    // What `tandem validate <(tandem resolve x.kdl)` hands over: a pipe written before it is read.
    use std::io::Write;
    use std::os::unix::io::AsRawFd;
    let (reader, mut writer) = std::io::pipe().unwrap();
    writer
        .write_all(b"experiment \"x\" {\n    env \"cartpole\"\n}\n")
        .unwrap();
    drop(writer);
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", reader.as_raw_fd()));
    let resolved = within_20s(move || resolve(&Source::Path(path), &[])).unwrap();
    drop(reader);
    assert_eq!(resolved.experiment.name, "x");
}

/// `experiment "x" { env "cartpole"; network "mlp" { hidden 1 1 ... } }` with `ones` values:
/// seven words and the ones.
fn hidden_of(ones: usize) -> String {
    format!(
        "experiment \"x\" {{\n    env \"cartpole\"\n    network \"mlp\" {{\n        hidden{}\n    }}\n}}\n",
        " 1".repeat(ones)
    )
}

fn word_refusals(diags: &Diagnostics) -> Vec<&tandem_config::Diagnostic> {
    diags
        .iter()
        .filter(|d| d.code() == "config::too-large")
        .collect()
}

#[test]
fn more_than_20000_words_are_refused_at_the_20001st_over_files_and_sets() {
    use tandem_config::MAX_WORDS;
    assert_eq!(MAX_WORDS, 20_000);
    // Exactly the budget is parsed; one word more is refused before parsing, at that word.
    let at_budget = resolve(&Source::Stdin(hidden_of(MAX_WORDS - 7)), &[]);
    if let Err(diags) = &at_budget {
        assert!(word_refusals(diags).is_empty(), "{diags}");
    }
    let diags = errors_of(&Source::Stdin(hidden_of(MAX_WORDS - 6)));
    let refusals = word_refusals(&diags);
    assert_eq!(refusals.len(), 1, "{diags}");
    let d = refusals[0];
    assert_eq!(
        d.message(),
        "the experiment holds more than the 20000 words a resolution reads (values, names, \
         strings and comments, over all its files and --sets)"
    );
    assert_eq!(d.label(), Some("word 20001"));
    // Line 4 is `        hidden 1 1 ...`: the last `1` is the 20,001st word.
    assert_eq!(d.line_column(), Some((4, 14 + 2 * (MAX_WORDS - 6))));
    assert!(d.help().unwrap().contains("few hundred words"), "{d:?}");

    // The budget is the resolution's: an include and a --set spend it too, and it is said once.
    let dir = scratch("words");
    std::fs::write(
        dir.join("comments.kdl"),
        "// many words\n".repeat(MAX_WORDS / 3),
    )
    .unwrap();
    let main = dir.join("main.kdl");
    std::fs::write(
        &main,
        "experiment \"x\" {\n    env \"cartpole\"\n    include \"comments.kdl\"\n    include \"comments.kdl\"\n}\n",
    )
    .unwrap();
    let diags = errors_of(&Source::Path(main.clone()));
    let refusals = word_refusals(&diags);
    assert_eq!(refusals.len(), 1, "{diags}");
    assert!(refusals[0].file().unwrap().ends_with("comments.kdl"));
    let small = dir.join("small.kdl");
    std::fs::write(&small, hidden_of(10)).unwrap();
    let set = format!("network.hidden={}", "1 ".repeat(MAX_WORDS));
    let diags = match resolve(&Source::Path(small), &[set]) {
        Ok(_) => panic!("resolved"),
        Err(d) => d,
    };
    let refusals = word_refusals(&diags);
    assert_eq!(refusals.len(), 1, "{diags}");
    assert_eq!(refusals[0].file(), Some("--set"));
    // 17 words in the file: the --set's 19,984th value is word 20,001.
    let column = "network.hidden=".len() + 2 * (MAX_WORDS - 17) + 1;
    assert_eq!(refusals[0].line_column(), Some((1, column)));
    // JSON counts alike: an array of 30,000 numbers.
    let json = format!(
        "{{\"experiment\": {{\"name\": \"x\", \"env\": {{\"game\": \"cartpole\"}}, \
         \"network\": {{\"hidden\": [{}]}}}}}}",
        vec!["1"; 30_000].join(",")
    );
    std::fs::write(dir.join("dense.json"), json).unwrap();
    let diags = errors_of(&Source::Path(dir.join("dense.json")));
    assert_eq!(word_refusals(&diags).len(), 1, "{diags}");
    std::fs::remove_dir_all(&dir).unwrap();
}
