//! The feed run's figures: percentiles (nearest rank) of what was seen, what was missed, the
//! targets the issue sets, as a table and as JSON.

use std::fmt::Write;
use std::time::Duration;

use serde_json::{json, Value as Json};

use super::idle::IdleReport;
use super::latency::{Edit, Sample};
use super::watch::{Arrival, Change, Extra};
use super::FeedTarget;
use crate::race::actor::percentile_ms;

/// The feed's p99 edit-to-`stat` latency the issue asks for.
pub const LATENCY_P99_TARGET_MS: f64 = 50.0;
/// The feed's p99 change-to-event latency the issue asks for.
pub const WATCH_P99_TARGET_MS: f64 = 100.0;
/// seamfs with the feed, after the idle, against the raw share.
pub const IDLE_RATIO_TARGET: f64 = 0.5;

/// Everything one `seam-lab feed` run measured.
#[derive(Debug, Default)]
pub struct FeedReport {
    /// Latency samples per target.
    pub latency: Vec<(FeedTarget, Vec<Sample>)>,
    /// The gap between host edits in the latency run.
    pub latency_gap: Option<Duration>,
    /// Watch arrivals per target.
    pub watch: Vec<(FeedTarget, (Vec<Arrival>, Extra))>,
    /// The gap between host changes in the watch run.
    pub watch_gap: Option<Duration>,
    /// The idle `git status` run.
    pub idle: Option<IdleReport>,
}

/// Count, seen, missed and percentiles of the seen ones.
#[derive(Debug, Clone, Copy)]
pub struct Dist {
    /// Edits or changes.
    pub n: usize,
    /// Not seen in time.
    pub missed: usize,
    /// Median of the seen, ms.
    pub p50: f64,
    /// 99th percentile of the seen, ms.
    pub p99: f64,
    /// Slowest seen, ms.
    pub max: f64,
}

impl Dist {
    /// Of these latencies (None: missed).
    pub fn of<'a>(v: impl Iterator<Item = &'a Option<Duration>>) -> Dist {
        let all: Vec<Option<Duration>> = v.copied().collect();
        let seen: Vec<Duration> = all.iter().flatten().copied().collect();
        Dist { n: all.len(), missed: all.len() - seen.len(), p50: percentile_ms(&seen, 50.0), p99: percentile_ms(&seen, 99.0), max: percentile_ms(&seen, 100.0) }
    }

    /// Nothing seen: no percentile to give.
    fn none_seen(&self) -> bool {
        self.missed == self.n
    }

    fn json(&self) -> Json {
        let ms = |x: f64| if self.none_seen() { Json::Null } else { json!(round(x)) };
        json!({ "n": self.n, "missed": self.missed, "p50_ms": ms(self.p50), "p99_ms": ms(self.p99), "max_ms": ms(self.max) })
    }

    fn row(&self, out: &mut String, target: &str, kind: &str, extra: &str) {
        let ms = |x: f64| if self.none_seen() { "-".to_string() } else { format!("{x:.1}") };
        let _ = writeln!(out, "| {target} | {kind} | {} | {} | {} | {} | {} |{extra}", self.n, self.missed, ms(self.p50), ms(self.p99), ms(self.max));
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn latency_dists(s: &[Sample]) -> Vec<(&'static str, Dist, usize)> {
    let mut v: Vec<(&'static str, Dist, usize)> = Edit::ALL
        .iter()
        .map(|k| {
            let of: Vec<&Sample> = s.iter().filter(|x| x.edit == *k).collect();
            (k.key(), Dist::of(of.iter().map(|x| &x.latency)), of.iter().filter(|x| x.torn).count())
        })
        .collect();
    v.push(("all", Dist::of(s.iter().map(|x| &x.latency)), s.iter().filter(|x| x.torn).count()));
    v
}

fn watch_dists(a: &[Arrival]) -> Vec<(&'static str, Dist)> {
    let mut v: Vec<(&'static str, Dist)> =
        Change::ALL.iter().map(|k| (k.key(), Dist::of(a.iter().filter(|x| x.change == *k).map(|x| &x.latency)))).collect();
    v.push(("all", Dist::of(a.iter().map(|x| &x.latency))));
    v
}

impl FeedReport {
    fn latency_feed_p99(&self) -> Option<(f64, usize)> {
        let (_, s) = self.latency.iter().find(|(t, _)| *t == FeedTarget::SeamfsFeed)?;
        let d = Dist::of(s.iter().map(|x| &x.latency));
        Some((d.p99, d.missed))
    }

    fn watch_feed(&self) -> Option<Dist> {
        let (_, (a, _)) = self.watch.iter().find(|(t, _)| *t == FeedTarget::SeamfsFeed)?;
        Some(Dist::of(a.iter().map(|x| &x.latency)))
    }

    fn idle_ratio(&self) -> Option<f64> {
        let i = self.idle.as_ref()?;
        let of = |t| i.runs.iter().find(|r| r.target == t).map(|r| r.idle_s);
        Some(of(FeedTarget::SeamfsFeed)? / of(FeedTarget::Share)?)
    }

    /// The JSON report.
    pub fn to_json(&self) -> Json {
        let mut j = json!({ "share": format!("seam-lab share (the emulator), entry/attr/negative TTL {} s; seamfs --ttl {} s", super::SHARE_TTL, super::SHARE_TTL) });
        if !self.latency.is_empty() {
            let per: serde_json::Map<String, Json> = self
                .latency
                .iter()
                .map(|(t, s)| {
                    let kinds: serde_json::Map<String, Json> = latency_dists(s)
                        .into_iter()
                        .map(|(k, d, torn)| {
                            let mut v = d.json();
                            v["torn"] = json!(torn);
                            (k.to_string(), v)
                        })
                        .collect();
                    (t.key().to_string(), Json::Object(kinds))
                })
                .collect();
            let (p99, missed) = self.latency_feed_p99().unwrap_or((f64::NAN, 0));
            j["latency"] = json!({
                "gap_ms": self.latency_gap.map(|g| g.as_millis() as u64),
                "targets": per,
                "feed_p99_target_ms": LATENCY_P99_TARGET_MS,
                "feed_p99_met": missed == 0 && p99 <= LATENCY_P99_TARGET_MS,
            });
        }
        if !self.watch.is_empty() {
            let per: serde_json::Map<String, Json> = self
                .watch
                .iter()
                .map(|(t, (a, extra))| {
                    let mut kinds: serde_json::Map<String, Json> = watch_dists(a).into_iter().map(|(k, d)| (k.to_string(), d.json())).collect();
                    kinds.insert("events_on_dir".into(), json!(extra.on_dir));
                    kinds.insert("queue_overflows".into(), json!(extra.overflows));
                    (t.key().to_string(), Json::Object(kinds))
                })
                .collect();
            let met = self.watch_feed().is_some_and(|d| d.missed == 0 && d.p99 <= WATCH_P99_TARGET_MS);
            j["watch"] = json!({
                "gap_ms": self.watch_gap.map(|g| g.as_millis() as u64),
                "targets": per,
                "feed_p99_target_ms": WATCH_P99_TARGET_MS,
                "feed_met": met,
            });
        }
        if let Some(i) = &self.idle {
            let runs: serde_json::Map<String, Json> = i
                .runs
                .iter()
                .map(|r| {
                    let v = json!({ "first_s": r.first_s, "warm_median_s": r.warm_s, "after_idle_s": r.idle_s, "idled_s": round(r.idled_s), "porcelain_lines": r.changes_shown });
                    (r.target.key().to_string(), v)
                })
                .collect();
            let ratio = self.idle_ratio();
            j["idle_status"] = json!({
                "files": i.files,
                "idle_s": i.idle.as_secs(),
                "targets": runs,
                "feed_over_share_after_idle": ratio,
                "ratio_target": IDLE_RATIO_TARGET,
                "ratio_met": ratio.is_some_and(|r| r <= IDLE_RATIO_TARGET),
            });
        }
        j
    }

    /// Markdown tables.
    pub fn to_table(&self) -> String {
        let mut out = format!("Against seam-lab share (the emulator, TTL {} s); seamfs --ttl {} s.\n", super::SHARE_TTL, super::SHARE_TTL);
        if !self.latency.is_empty() {
            let gap = self.latency_gap.map(|g| g.as_millis()).unwrap_or(0);
            let _ = writeln!(out, "\nHost edit -> visible to a box `stat` (one edit every {gap} ms)\n");
            out.push_str("| target | edit | n | missed | p50 ms | p99 ms | max ms | torn |\n|---|---|---|---|---|---|---|---|\n");
            for (t, s) in &self.latency {
                for (k, d, torn) in latency_dists(s) {
                    d.row(&mut out, t.key(), k, &format!(" {torn} |"));
                }
            }
            if let Some((p99, missed)) = self.latency_feed_p99() {
                let _ = writeln!(out, "\nfeed p99 {p99:.1} ms, {missed} missed (target <= {LATENCY_P99_TARGET_MS} ms, 0 missed)");
            }
        }
        if !self.watch.is_empty() {
            let gap = self.watch_gap.map(|g| g.as_millis()).unwrap_or(0);
            let _ = writeln!(out, "\nHost change -> box inotify event (one change every {gap} ms)\n");
            out.push_str("| target | change | n | missed | p50 ms | p99 ms | max ms | events on the dir, overflows |\n|---|---|---|---|---|---|---|---|\n");
            for (t, (a, extra)) in &self.watch {
                for (k, d) in watch_dists(a) {
                    let x = if k == "all" { format!(" {}, {} |", extra.on_dir, extra.overflows) } else { " |".into() };
                    d.row(&mut out, t.key(), k, &x);
                }
            }
            if let Some(d) = self.watch_feed() {
                let _ = writeln!(out, "\nfeed: {} missed, p99 {:.1} ms (target 0 missed, <= {WATCH_P99_TARGET_MS} ms)", d.missed, d.p99);
            }
        }
        if let Some(i) = &self.idle {
            let _ = writeln!(out, "\n`git status` of {} files, warm and after {} s idle\n", i.files, i.idle.as_secs());
            out.push_str("| target | first s | warm s (median of 3) | after idle s | idle s | porcelain lines |\n|---|---|---|---|---|---|\n");
            for r in &i.runs {
                let _ = writeln!(out, "| {} | {:.3} | {:.3} | {:.3} | {:.1} | {} |", r.target.key(), r.first_s, r.warm_s, r.idle_s, r.idled_s, r.changes_shown);
            }
            if let Some(ratio) = self.idle_ratio() {
                let _ = writeln!(out, "\nseamfs-feed / share after the idle: {ratio:.2}x (target <= {IDLE_RATIO_TARGET}x)");
            }
        }
        out
    }
}
