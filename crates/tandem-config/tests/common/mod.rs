//! What the resolver tests share.

use tandem_config::{Source, resolve};

/// The one error resolving `source` gives: its code, line, label and help.
#[allow(dead_code)]
pub fn only_error(source: &Source) -> (String, usize, String, String) {
    let diags = resolve(source, &[]).unwrap_err();
    let all: Vec<_> = diags.iter().collect();
    assert_eq!(
        all.len(),
        1,
        "{:?}",
        all.iter().map(|d| d.message()).collect::<Vec<_>>()
    );
    let d = all[0];
    (
        d.code().to_string(),
        d.line_column().expect("positioned").0,
        d.label().unwrap_or_default().to_string(),
        d.help().unwrap_or_default().to_string(),
    )
}

/// The experiment `text` resolves to; a refusal fails the test, rendered.
#[allow(dead_code)]
pub fn resolved(text: &str) -> tandem_config::Experiment {
    resolve(&Source::Stdin(text.into()), &[])
        .unwrap_or_else(|d| panic!("{}", d.render(false)))
        .experiment
}

/// The one diagnostic resolving `text` gives.
#[allow(dead_code)]
pub fn the_error(text: &str) -> tandem_config::Diagnostic {
    let diags = resolve(&Source::Stdin(text.into()), &[]).expect_err("refused");
    assert_eq!(diags.len(), 1, "{}", diags.render(false));
    diags.iter().next().unwrap().clone()
}
