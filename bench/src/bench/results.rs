//! What a bench run measured, and the summaries every report is made of (medians, min–max,
//! ratios against the raw share and native).

use std::collections::BTreeMap;

use super::layers::LayerKind;
use super::workloads::Workload;

/// All samples of one workload on one layer.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    /// Wall times in ms, one per run.
    pub samples_ms: Vec<f64>,
    /// The layer daemon's VmRSS in KiB at the end of each run of this workload.
    pub rss_kib: Vec<u64>,
}

/// Median, min and max of a cell.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Fastest.
    pub min: f64,
    /// Slowest.
    pub max: f64,
}

impl Cell {
    /// None when nothing was measured.
    pub fn summary(&self) -> Option<Summary> {
        if self.samples_ms.is_empty() {
            return None;
        }
        let mut v = self.samples_ms.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Summary { median, min: v[0], max: v[n - 1] })
    }

    /// The largest RSS seen, in KiB.
    pub fn rss_max_kib(&self) -> Option<u64> {
        self.rss_kib.iter().copied().max()
    }
}

/// One repo size's results.
#[derive(Debug, Clone)]
pub struct SizeResult {
    /// Files in the generated repo.
    pub files: usize,
    /// The generated repo's cache dir.
    pub repo: String,
    /// Layers measured, in report order.
    pub layers: Vec<LayerKind>,
    /// How each layer was set up.
    pub layer_notes: Vec<(LayerKind, String)>,
    /// Workloads measured, in report order.
    pub workloads: Vec<Workload>,
    /// Samples per (workload, layer).
    pub cells: BTreeMap<(Workload, LayerKind), Cell>,
    /// Layers skipped at this size, and why.
    pub notes: Vec<String>,
}

impl SizeResult {
    /// The summary of a cell, if measured.
    pub fn summary(&self, w: Workload, l: LayerKind) -> Option<Summary> {
        self.cells.get(&(w, l)).and_then(Cell::summary)
    }

    /// Median over runs of `l`'s sample divided by `base`'s sample of the same run, for
    /// workload `w`: layers run one after the other within a run, so a pair shares the
    /// machine's load of the moment, which a ratio of medians does not.
    pub fn paired_ratio(&self, w: Workload, l: LayerKind, base: LayerKind) -> Option<f64> {
        let (a, b) = (self.cells.get(&(w, l))?, self.cells.get(&(w, base))?);
        let ratios: Vec<f64> =
            a.samples_ms.iter().zip(&b.samples_ms).filter(|(_, &y)| y > 0.0).map(|(x, y)| x / y).collect();
        Cell { samples_ms: ratios, rss_kib: Vec::new() }.summary().map(|s| s.median)
    }

    /// Median of `l` over median of `base`, for workload `w`.
    pub fn ratio(&self, w: Workload, l: LayerKind, base: LayerKind) -> Option<f64> {
        let (a, b) = (self.summary(w, l)?, self.summary(w, base)?);
        (b.median > 0.0).then(|| a.median / b.median)
    }
}

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Runs per workload and layer.
    pub runs: usize,
    /// The share's TTL (and every layer's), in seconds.
    pub ttl: f64,
    /// Size of the big file in MiB.
    pub big_mib: usize,
    /// Whether the page cache was dropped before read workloads.
    pub drop_caches: bool,
    /// Kernel and CPU count.
    pub machine: String,
    /// Notes for the whole run (peers skipped...).
    pub notes: Vec<String>,
    /// Per repo size.
    pub sizes: Vec<SizeResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd_counts() {
        let c = Cell { samples_ms: vec![3.0, 1.0, 2.0], rss_kib: vec![] };
        let s = c.summary().expect("three samples");
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let c = Cell { samples_ms: vec![4.0, 1.0, 2.0, 3.0], rss_kib: vec![] };
        assert_eq!(c.summary().expect("four samples").median, 2.5);
        assert!(Cell::default().summary().is_none());
    }
}
