//! The figures of a race: named values, each with the rule that says whether it is an invariant,
//! printed as one table (control beside seamfs) or as JSON.
//!
//! A figure is only worth printing if it can fail: every invariant figure here is computed from
//! what the run observed (git's own output and the backing dir's state), never assumed.

use std::fmt::Write as _;

use serde_json::{json, Map, Value as Json};

use super::Target;

/// What a figure must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// An invariant: the count must be 0.
    Zero,
    /// An invariant: the flag must be true.
    Holds,
    /// Reported, not judged.
    Info,
}

impl Rule {
    fn label(self) -> &'static str {
        match self {
            Rule::Zero => "= 0",
            Rule::Holds => "yes",
            Rule::Info => "",
        }
    }

    fn json(self) -> &'static str {
        match self {
            Rule::Zero => "zero",
            Rule::Holds => "holds",
            Rule::Info => "info",
        }
    }
}

/// A figure's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A count.
    Count(u64),
    /// How many of the attempts landed.
    Share {
        /// Exited 0.
        landed: u64,
        /// Tried.
        attempted: u64,
    },
    /// Milliseconds.
    Ms(f64),
    /// Yes or no.
    Flag(bool),
    /// Free text (a command's output).
    Text(String),
}

impl Value {
    fn cell(&self) -> String {
        match self {
            Value::Count(n) => n.to_string(),
            Value::Share { landed, attempted } => format!("{landed}/{attempted} ({})", percent(*landed, *attempted)),
            Value::Ms(ms) => format!("{ms:.1} ms"),
            Value::Flag(b) => if *b { "yes" } else { "no" }.to_string(),
            Value::Text(t) if t.is_empty() => "(empty)".to_string(),
            Value::Text(t) => t.replace('\n', " | "),
        }
    }

    fn json(&self) -> Json {
        match self {
            Value::Count(n) => json!(n),
            Value::Share { landed, attempted } => {
                let pct = if *attempted == 0 { Json::Null } else { json!(100.0 * *landed as f64 / *attempted as f64) };
                json!({ "landed": landed, "attempted": attempted, "percent": pct })
            }
            Value::Ms(ms) => json!(ms),
            Value::Flag(b) => json!(b),
            Value::Text(t) => json!(t),
        }
    }
}

fn percent(landed: u64, attempted: u64) -> String {
    if attempted == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * landed as f64 / attempted as f64)
    }
}

/// One named figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Stable key (JSON, tests).
    pub key: &'static str,
    /// What it counts, for the table.
    pub label: &'static str,
    /// The value.
    pub value: Value,
    /// The rule it is judged by.
    pub rule: Rule,
}

impl Figure {
    /// True when an invariant figure does not hold.
    pub fn violated(&self) -> bool {
        match (self.rule, &self.value) {
            (Rule::Zero, Value::Count(n)) => *n != 0,
            (Rule::Holds, Value::Flag(b)) => !*b,
            _ => false,
        }
    }
}

/// The figures of one target's run, in the order they were added, plus free-form notes
/// (samples of refusal messages, the seamfs log's path...).
#[derive(Debug, Clone, Default)]
pub struct Figures {
    list: Vec<Figure>,
    notes: Vec<String>,
}

impl Figures {
    fn push(&mut self, key: &'static str, label: &'static str, value: Value, rule: Rule) {
        self.list.push(Figure { key, label, value, rule });
    }

    /// An invariant count that must be 0.
    pub fn zero(&mut self, key: &'static str, label: &'static str, n: u64) {
        self.push(key, label, Value::Count(n), Rule::Zero);
    }

    /// An invariant flag that must be true.
    pub fn holds(&mut self, key: &'static str, label: &'static str, b: bool) {
        self.push(key, label, Value::Flag(b), Rule::Holds);
    }

    /// A count, reported only.
    pub fn count(&mut self, key: &'static str, label: &'static str, n: u64) {
        self.push(key, label, Value::Count(n), Rule::Info);
    }

    /// Landed out of attempted, reported only.
    pub fn share(&mut self, key: &'static str, label: &'static str, landed: u64, attempted: u64) {
        self.push(key, label, Value::Share { landed, attempted }, Rule::Info);
    }

    /// A latency, reported only.
    pub fn ms(&mut self, key: &'static str, label: &'static str, ms: f64) {
        self.push(key, label, Value::Ms(ms), Rule::Info);
    }

    /// A flag, reported only.
    pub fn flag(&mut self, key: &'static str, label: &'static str, b: bool) {
        self.push(key, label, Value::Flag(b), Rule::Info);
    }

    /// Text, reported only.
    pub fn text(&mut self, key: &'static str, label: &'static str, t: impl Into<String>) {
        self.push(key, label, Value::Text(t.into()), Rule::Info);
    }

    /// A note printed under the table.
    pub fn note(&mut self, n: impl Into<String>) {
        self.notes.push(n.into());
    }

    /// Every figure.
    pub fn all(&self) -> &[Figure] {
        &self.list
    }

    /// The notes.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A figure by key.
    pub fn get(&self, key: &str) -> Option<&Figure> {
        self.list.iter().find(|f| f.key == key)
    }

    /// The invariant figures that do not hold.
    pub fn violations(&self) -> Vec<&Figure> {
        self.list.iter().filter(|f| f.violated()).collect()
    }
}

/// One target's run.
#[derive(Debug, Clone)]
pub struct TargetRun {
    /// Control or seamfs.
    pub target: Target,
    /// What it measured.
    pub figures: Figures,
    /// Wall time of the run, seconds.
    pub seconds: f64,
}

/// A scenario's report: its parameters and one run per target.
#[derive(Debug, Clone)]
pub struct RaceReport {
    /// Scenario name.
    pub scenario: &'static str,
    /// Parameters as (name, value), in display order.
    pub params: Vec<(String, String)>,
    /// The runs, control first.
    pub runs: Vec<TargetRun>,
}

impl RaceReport {
    /// The seamfs run's violated invariants (empty when seamfs did not run).
    pub fn seamfs_violations(&self) -> Vec<&Figure> {
        self.runs.iter().filter(|r| r.target == Target::Seamfs).flat_map(|r| r.figures.violations()).collect()
    }

    /// The control run's violated invariants (empty when the control did not run).
    pub fn control_violations(&self) -> Vec<&Figure> {
        self.runs.iter().filter(|r| r.target == Target::Control).flat_map(|r| r.figures.violations()).collect()
    }

    /// The human-readable report.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let params: Vec<String> = self.params.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "seam-lab race {}: {}\n", self.scenario, params.join(", "));
        if self.runs.is_empty() {
            return s;
        }
        // Every run's figures, in the order they first appear: a figure only seamfs has (one
        // read from its log) gets a row too, "-" for the control.
        let mut rows: Vec<&Figure> = Vec::new();
        for f in self.runs.iter().flat_map(|r| r.figures.all()) {
            if !rows.iter().any(|g| g.key == f.key) {
                rows.push(f);
            }
        }
        let width = rows.iter().map(|f| f.label.len()).max().unwrap_or(10).max(10);
        let _ = write!(s, "  {:<width$}  {:<4}", "figure", "must");
        for r in &self.runs {
            let _ = write!(s, "  {:<22}", r.target.label());
        }
        s.push('\n');
        for f in rows {
            let _ = write!(s, "  {:<width$}  {:<4}", f.label, f.rule.label());
            for r in &self.runs {
                let cell = match r.figures.get(f.key) {
                    Some(g) if g.violated() => format!("{}  BROKEN", g.value.cell()),
                    Some(g) => g.value.cell(),
                    None => "-".into(),
                };
                let _ = write!(s, "  {cell:<22}");
            }
            s.push('\n');
        }
        let seconds: Vec<String> = self.runs.iter().map(|r| format!("{} {:.1} s", r.target.label(), r.seconds)).collect();
        let _ = writeln!(s, "  (run time: {})", seconds.join(", "));
        for r in &self.runs {
            for n in r.figures.notes() {
                let _ = writeln!(s, "  note ({}): {n}", r.target.label());
            }
        }
        for r in &self.runs {
            let v: Vec<&str> = r.figures.violations().iter().map(|f| f.key).collect();
            let verdict = if v.is_empty() { "held every invariant".to_string() } else { format!("BROKE {}", v.join(", ")) };
            let _ = writeln!(s, "  {}: {verdict}", r.target.label());
        }
        s
    }

    /// The machine-readable report.
    pub fn to_json(&self) -> Json {
        let params: Map<String, Json> = self.params.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let runs: Map<String, Json> = self
            .runs
            .iter()
            .map(|r| {
                let figures: Map<String, Json> = r
                    .figures
                    .all()
                    .iter()
                    .map(|f| {
                        let v = json!({
                            "label": f.label,
                            "rule": f.rule.json(),
                            "value": f.value.json(),
                            "violated": f.violated(),
                        });
                        (f.key.to_string(), v)
                    })
                    .collect();
                let violations: Vec<&str> = r.figures.violations().iter().map(|f| f.key).collect();
                let run = json!({
                    "seconds": r.seconds,
                    "figures": figures,
                    "violations": violations,
                    "notes": r.figures.notes(),
                });
                (r.target.key().to_string(), run)
            })
            .collect();
        json!({ "scenario": self.scenario, "params": params, "runs": runs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invariants_are_judged_and_info_is_not() {
        let mut f = Figures::default();
        f.zero("lost", "lost", 0);
        f.zero("torn", "torn", 2);
        f.holds("same", "same", false);
        f.count("made", "made", 9);
        f.share("landed", "landed", 1, 2);
        let v: Vec<&str> = f.violations().iter().map(|x| x.key).collect();
        assert_eq!(v, vec!["torn", "same"]);
        assert_eq!(f.get("landed").map(|x| x.value.cell()), Some("1/2 (50.0%)".to_string()));
    }

    #[test]
    fn a_figure_only_seamfs_has_gets_a_row() {
        let mut control = Figures::default();
        control.zero("lost", "host commits lost", 3);
        let mut seamfs = Figures::default();
        seamfs.zero("lost", "host commits lost", 0);
        seamfs.zero("unexcluded", "box rewrites without the shared index lock", 1);
        let runs = vec![
            TargetRun { target: Target::Control, figures: control, seconds: 1.0 },
            TargetRun { target: Target::Seamfs, figures: seamfs, seconds: 1.0 },
        ];
        let t = RaceReport { scenario: "host-commits", params: vec![], runs }.to_table();
        let row = t.lines().find(|l| l.contains("without the shared index lock")).unwrap_or_else(|| panic!("no row:\n{t}"));
        assert!(row.contains(" - ") && row.contains("1  BROKEN"), "{row}");
        let lost = t.lines().find(|l| l.contains("host commits lost")).expect("lost row");
        assert!(lost.contains("3  BROKEN") && lost.contains(" 0 "), "{lost}");
    }
}
