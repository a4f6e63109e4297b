//! What the resolver tests share.

use tandem_config::{Source, resolve};

/// The one error resolving `source` gives: its code, line, label and help.
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
