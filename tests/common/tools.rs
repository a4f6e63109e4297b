//! The one rule for tests that read results back with external tools (TensorBoard's Python
//! reader, Nix): whether a missing tool skips the check or fails the test. Every crate's tests
//! include this file by path (`#[path = ...] mod tools;`), so the rule has one definition.
//!
//! `TANDEM_REQUIRE_PYTHON_TOOLS=1` (scripts/test sets it) requires the tools; unset, empty or
//! `0` lets a test skip with a note; any other value is refused, so a typo cannot turn the
//! requirement off.

/// The variable that decides.
pub const REQUIRE_TOOLS: &str = "TANDEM_REQUIRE_PYTHON_TOOLS";

/// Whether a missing tool must fail the test (see the module doc).
pub fn tools_required() -> bool {
    match std::env::var(REQUIRE_TOOLS) {
        Err(std::env::VarError::NotPresent) => false,
        Ok(value) if value == "1" => true,
        Ok(value) if value.is_empty() || value == "0" => false,
        other => panic!("{REQUIRE_TOOLS} must be 1 (require the tools) or 0, got {other:?}"),
    }
}

/// Called where `tool` is missing: fails the test when the tools are required, else prints a
/// note that `what` is skipped. `fix` says how to get the tool.
pub fn tool_missing(tool: &str, what: &str, fix: &str) {
    assert!(
        !tools_required(),
        "{REQUIRE_TOOLS}=1 but {tool} is missing; {fix}"
    );
    eprintln!("note: skipping {what}: {tool} is missing ({fix})");
}
