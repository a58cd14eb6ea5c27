//! The bench's reports: a markdown table and JSON, from [`BenchReport`].

use crate::demo::report::json_str;
use std::fmt::Write;

use super::layers::LayerKind;
use super::results::{BenchReport, SizeResult};
use super::workloads::Workload;

const KIB_PER_MIB: f64 = 1024.0;

/// The markdown report: setup, then per repo size a table of workload × layer.
pub fn markdown(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# seam-lab bench\n");
    let _ = writeln!(s, "- machine: {}", r.machine);
    let _ = writeln!(s, "- runs: {} per workload and layer, layers interleaved (order rotated each run)", r.runs);
    let _ = writeln!(s, "- TTL: {} s for the share emulator and every layer above it", r.ttl);
    let cache = if r.drop_caches {
        "page cache dropped before each read"
    } else {
        "warm page cache (each layer read everything once, untimed, before run 1)"
    };
    let _ = writeln!(s, "- reads: {cache}; big file {} MiB", r.big_mib);
    let _ = writeln!(s, "- each layer works on its own identical copy of the generated repo; every FUSE layer sits on its own share-emulator mount (`fast` and `seamfs-fast`: on a fast-share mount)");
    for n in &r.notes {
        let _ = writeln!(s, "- note: {n}");
    }
    let _ = writeln!(s, "\nWorkloads:\n");
    for w in Workload::ALL {
        let _ = writeln!(s, "- `{}`: {}", w.name(), w.describe());
    }
    for size in &r.sizes {
        size_section(&mut s, size);
    }
    s
}

fn size_section(s: &mut String, z: &SizeResult) {
    let _ = writeln!(s, "\n## {} files\n", z.files);
    let _ = writeln!(s, "Repo: `{}`\n", z.repo);
    for (l, note) in &z.layer_notes {
        let _ = writeln!(s, "- `{}`: {note}", l.name());
    }
    for n in &z.notes {
        let _ = writeln!(s, "- note: {n}");
    }
    let has = |l| z.layers.contains(&l);
    let _ = writeln!(s, "\n| workload | layer | median ms | min–max ms | × share | × native | RSS MiB |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
    for &w in &z.workloads {
        for &l in &z.layers {
            let Some(sum) = z.summary(w, l) else { continue };
            let vs = |base| if has(base) { z.ratio(w, l, base).map(|x| format!("{x:.2}")) } else { None };
            let rss =
                z.cells.get(&(w, l)).and_then(|c| c.rss_max_kib()).map(|k| format!("{:.1}", k as f64 / KIB_PER_MIB));
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1}–{:.1} | {} | {} | {} |",
                w.name(),
                l.name(),
                sum.median,
                sum.min,
                sum.max,
                vs(LayerKind::Share).unwrap_or_else(|| "—".into()),
                vs(LayerKind::Native).unwrap_or_else(|| "—".into()),
                rss.unwrap_or_else(|| "—".into())
            );
        }
    }
    if has(LayerKind::Seamfs) && has(LayerKind::SeamfsNosplit) {
        let _ = writeln!(
            s,
            "\nWhat the index split (and the sealed heal, in `git-commit`) adds: seamfs against seamfs-nosplit\n"
        );
        let _ = writeln!(s, "| workload | ratio of medians | median of per-run ratios |");
        let _ = writeln!(s, "|---|---:|---:|");
        for &w in &z.workloads {
            let (Some(m), Some(p)) = (
                z.ratio(w, LayerKind::Seamfs, LayerKind::SeamfsNosplit),
                z.paired_ratio(w, LayerKind::Seamfs, LayerKind::SeamfsNosplit),
            ) else {
                continue;
            };
            let _ = writeln!(
                s,
                "| {} | {m:.2} ({:+.0}%) | {p:.2} ({:+.0}%) |",
                w.name(),
                (m - 1.0) * 100.0,
                (p - 1.0) * 100.0
            );
        }
    }
    if has(LayerKind::Fast) {
        fast_section(s, z);
    }
    if has(LayerKind::Share) {
        let _ = writeln!(s, "\nMedian ratio against the raw share (lower is better):\n");
        let _ = write!(s, "| workload |");
        for l in &z.layers {
            let _ = write!(s, " {} |", l.name());
        }
        let _ = write!(s, "\n|---|");
        for _ in &z.layers {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s);
        for &w in &z.workloads {
            let _ = write!(s, "| {} |", w.name());
            for &l in &z.layers {
                let cell = z.ratio(w, l, LayerKind::Share).map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into());
                let _ = write!(s, " {cell} |");
            }
            let _ = writeln!(s);
        }
    }
}

/// Against the fast share (ADR 0024): seamfs over it, and the emulator, as ratios of medians with
/// the median of per-run ratios beside (runs pair the layers under the same load).
fn fast_section(s: &mut String, z: &SizeResult) {
    let _ = writeln!(s, "\nAgainst the fast share (virtiofsd's speed; lower is better):\n");
    let _ = writeln!(s, "| workload | fast ms | seamfs-fast ms | seamfs-fast × fast (paired) | seamfs-fast-feed × fast (paired) | share × fast (paired) | seamfs × share |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let both = |w, l, base| match (z.ratio(w, l, base), z.paired_ratio(w, l, base)) {
        (Some(m), Some(p)) => format!("{m:.2} ({p:.2})"),
        _ => "—".into(),
    };
    let ms = |w, l| z.summary(w, l).map(|x| format!("{:.1}", x.median)).unwrap_or_else(|| "—".into());
    for &w in &z.workloads {
        let seamfs = z.ratio(w, LayerKind::Seamfs, LayerKind::Share).map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {seamfs} |",
            w.name(),
            ms(w, LayerKind::Fast),
            ms(w, LayerKind::SeamfsFast),
            both(w, LayerKind::SeamfsFast, LayerKind::Fast),
            both(w, LayerKind::SeamfsFastFeed, LayerKind::Fast),
            both(w, LayerKind::Share, LayerKind::Fast),
        );
    }
}

/// The JSON report (same content, every sample).
pub fn json(r: &BenchReport) -> String {
    let notes: Vec<String> = r.notes.iter().map(|n| json_str(n)).collect();
    let sizes: Vec<String> = r.sizes.iter().map(size_json).collect();
    format!(
        "{{\"machine\":{},\"runs\":{},\"ttl_s\":{},\"big_mib\":{},\"drop_caches\":{},\"notes\":[{}],\"sizes\":[{}]}}\n",
        json_str(&r.machine),
        r.runs,
        num(r.ttl),
        r.big_mib,
        r.drop_caches,
        notes.join(","),
        sizes.join(",")
    )
}

fn size_json(z: &SizeResult) -> String {
    let layers: Vec<String> = z
        .layer_notes
        .iter()
        .map(|(l, n)| format!("{{\"layer\":{},\"setup\":{}}}", json_str(l.name()), json_str(n)))
        .collect();
    let notes: Vec<String> = z.notes.iter().map(|n| json_str(n)).collect();
    let mut results = Vec::new();
    for &w in &z.workloads {
        for &l in &z.layers {
            let Some(cell) = z.cells.get(&(w, l)) else { continue };
            let Some(sum) = cell.summary() else { continue };
            let samples: Vec<String> = cell.samples_ms.iter().map(|&x| num(x)).collect();
            let rss: Vec<String> = cell.rss_kib.iter().map(u64::to_string).collect();
            results.push(format!(
                "{{\"workload\":{},\"layer\":{},\"samples_ms\":[{}],\"median_ms\":{},\"min_ms\":{},\"max_ms\":{},\"ratio_vs_share\":{},\"ratio_vs_native\":{},\"rss_kib\":[{}]}}",
                json_str(w.name()),
                json_str(l.name()),
                samples.join(","),
                num(sum.median),
                num(sum.min),
                num(sum.max),
                opt_num(z.ratio(w, l, LayerKind::Share)),
                opt_num(z.ratio(w, l, LayerKind::Native)),
                rss.join(",")
            ));
        }
    }
    format!(
        "{{\"files\":{},\"repo\":{},\"layers\":[{}],\"notes\":[{}],\"results\":[{}]}}",
        z.files,
        json_str(&z.repo),
        layers.join(","),
        notes.join(","),
        results.join(",")
    )
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "null".into()
    }
}

fn opt_num(x: Option<f64>) -> String {
    x.map(num).unwrap_or_else(|| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::Cell;
    use std::collections::BTreeMap;

    fn sample() -> BenchReport {
        let mut cells = BTreeMap::new();
        cells.insert((Workload::GitLog, LayerKind::Native), Cell { samples_ms: vec![10.0], rss_kib: vec![] });
        cells.insert((Workload::GitLog, LayerKind::Share), Cell { samples_ms: vec![20.0], rss_kib: vec![2048] });
        cells.insert(
            (Workload::GitLog, LayerKind::Seamfs),
            Cell { samples_ms: vec![22.0, 21.0, 30.0], rss_kib: vec![4096] },
        );
        cells.insert(
            (Workload::GitLog, LayerKind::SeamfsNosplit),
            Cell { samples_ms: vec![20.0, 20.0, 25.0], rss_kib: vec![4096] },
        );
        BenchReport {
            runs: 3,
            ttl: 1.0,
            big_mib: 1024,
            drop_caches: false,
            machine: "test \"box\"".into(),
            notes: vec![],
            sizes: vec![SizeResult {
                files: 100,
                repo: "/tmp/r".into(),
                layers: vec![LayerKind::Native, LayerKind::Share, LayerKind::Seamfs, LayerKind::SeamfsNosplit],
                layer_notes: vec![],
                workloads: vec![Workload::GitLog],
                cells,
                notes: vec![],
            }],
        }
    }

    #[test]
    fn markdown_has_ratios_and_rss() {
        let md = markdown(&sample());
        assert!(md.contains("| git-log | seamfs | 22.0 | 21.0–30.0 | 1.10 | 2.20 | 4.0 |"), "{md}");
        // Per run: 22/20, 21/20, 30/25.
        assert!(md.contains("| git-log | 1.10 (+10%) | 1.10 (+10%) |"), "the split's cost: {md}");
    }

    #[test]
    fn json_escapes_and_carries_samples() {
        let j = json(&sample());
        assert!(j.contains("\"machine\":\"test \\\"box\\\"\""), "{j}");
        assert!(j.contains("\"samples_ms\":[22.000,21.000,30.000]"), "{j}");
        assert!(j.contains("\"ratio_vs_native\":null") || j.contains("\"ratio_vs_native\":1.000"), "{j}");
    }
}
