//! Doctor reports, human and JSON, shared by `seamfs doctor` (in the box) and `seamd doctor`
//! (on the host): every row has a stable kind, a severity, what was found, and the recovery
//! as text for a human to read and run, never run by the doctor.
//!
//! JSON: `{"tool": .., "path": .., "worst": SEVERITY, "rows": [{"kind", "severity", "at",
//! "found", "recovery"}]}`; severities `ok`, `info`, `warn`, `error`. Field names are stable.

use std::fmt::Write;

/// How much a row matters, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// A check that passed.
    Ok,
    /// For information.
    Info,
    /// Needs a look; the recovery says what to do.
    Warn,
    /// Broken: the recovery says how to mend it.
    Error,
}

impl Severity {
    /// The word used in both outputs.
    pub fn word(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// A stable identifier of what the row is about (`old-lock`, `mount`...).
    pub kind: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// The path it is about.
    pub at: String,
    /// What was found.
    pub found: String,
    /// What to do, as text (empty when nothing).
    pub recovery: String,
}

/// The worst severity among `rows` (`ok` when there are none).
pub fn worst(rows: &[Finding]) -> Severity {
    rows.iter().map(|r| r.severity).max().unwrap_or(Severity::Ok)
}

/// Human text: one line per row, the recovery indented below it.
pub fn human(rows: &[Finding]) -> String {
    let mut s = String::new();
    for r in rows {
        let _ = writeln!(s, "{:<5}  {}: {}", r.severity.word(), r.at, r.found);
        if !r.recovery.is_empty() {
            let _ = writeln!(s, "       fix: {}", r.recovery);
        }
    }
    s
}

/// A JSON string literal.
pub fn json_str(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The JSON document (one line).
pub fn json(tool: &str, path: &str, rows: &[Finding]) -> String {
    let worst = worst(rows);
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"kind\":{},\"severity\":{},\"at\":{},\"found\":{},\"recovery\":{}}}",
                json_str(r.kind),
                json_str(r.severity.word()),
                json_str(&r.at),
                json_str(&r.found),
                json_str(&r.recovery)
            )
        })
        .collect();
    format!(
        "{{\"tool\":{},\"path\":{},\"worst\":{},\"rows\":[{}]}}",
        json_str(tool),
        json_str(path),
        json_str(worst.word()),
        rows.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_keeps_field_names() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        let r = Finding { kind: "old-lock", severity: Severity::Warn, at: "x".into(), found: "f".into(), recovery: "r".into() };
        let j = json("seamd doctor", "/c", std::slice::from_ref(&r));
        assert!(j.contains("\"kind\":\"old-lock\",\"severity\":\"warn\",\"at\":\"x\",\"found\":\"f\",\"recovery\":\"r\""), "{j}");
        assert!(j.contains("\"worst\":\"warn\""), "{j}");
        assert!(human(&[r]).contains("fix: r"));
    }
}
