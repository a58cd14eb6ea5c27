//! `ratios.svg`: a grouped bar chart, by hand. One group per workload, one bar per layer, the
//! height is the layer's median over the raw share's (the share itself is the dashed line at 1).

use std::fmt::Write;

use super::layers::LayerKind;
use super::results::SizeResult;

/// Bars taller than this are clipped and labelled with their value, so one slow peer does not
/// flatten everything else.
const Y_CAP: f64 = 6.0;
const BAR: f64 = 14.0;
const GAP: f64 = 22.0;
const LEFT: f64 = 64.0;
const TOP: f64 = 48.0;
const PLOT_H: f64 = 320.0;
const BOTTOM: f64 = 110.0;

fn colour(l: LayerKind) -> &'static str {
    match l {
        LayerKind::Native => "#7f7f7f",
        LayerKind::Share => "#bcbd22",
        LayerKind::Seamfs => "#1f77b4",
        LayerKind::SeamfsNosplit => "#17becf",
        LayerKind::Bindfs => "#ff7f0e",
        LayerKind::FuseOverlayfs => "#d62728",
        LayerKind::Fast => "#2ca02c",
        LayerKind::SeamfsFast => "#9467bd",
        LayerKind::SeamfsFastFeed => "#e377c2",
        LayerKind::SeamfsFastBaseline => "#8c564b",
    }
}

/// The chart for one repo size; None when the raw share was not measured (no ratios).
pub fn ratios_svg(z: &SizeResult, ttl: f64) -> Option<String> {
    if !z.layers.contains(&LayerKind::Share) {
        return None;
    }
    let bars: Vec<LayerKind> = z.layers.iter().copied().filter(|&l| l != LayerKind::Share).collect();
    let group_w = bars.len() as f64 * BAR + GAP;
    let plot_w = group_w * z.workloads.len() as f64;
    let legend_w = 170.0;
    let width = LEFT + plot_w + 20.0 + legend_w;
    let height = TOP + PLOT_H + BOTTOM;
    let max = z
        .workloads
        .iter()
        .flat_map(|&w| bars.iter().filter_map(move |&l| z.ratio(w, l, LayerKind::Share)))
        .fold(1.0f64, f64::max);
    let ymax = (max.min(Y_CAP) * 2.0).ceil() / 2.0 + 0.25;
    let y = |v: f64| TOP + PLOT_H - v.min(ymax) / ymax * PLOT_H;

    let mut s = String::new();
    let _ = writeln!(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"11\">");
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{} files: median time as a multiple of the raw share (TTL {ttl} s); lower is better</text>",
        z.files
    );
    // Y axis: gridlines every 0.5.
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e0e0e0\"/>",
            LEFT + plot_w
        );
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.1}×</text>", LEFT - 6.0, yy + 4.0);
        v += 0.5;
    }
    let _ = writeln!(
        s,
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">time ÷ raw share's time</text>",
        TOP + PLOT_H / 2.0
    );
    let one = y(1.0);
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{one:.1}\" y2=\"{one:.1}\" stroke=\"#333\" stroke-dasharray=\"5,3\"/>",
        LEFT + plot_w
    );
    for (gi, &w) in z.workloads.iter().enumerate() {
        let gx = LEFT + GAP / 2.0 + gi as f64 * group_w;
        for (bi, &l) in bars.iter().enumerate() {
            let Some(r) = z.ratio(w, l, LayerKind::Share) else { continue };
            let x = gx + bi as f64 * BAR;
            let top = y(r);
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {r:.2}×</title></rect>",
                BAR - 2.0,
                TOP + PLOT_H - top,
                colour(l),
                w.name(),
                l.name()
            );
            if r > ymax {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{r:.1}</text>",
                    x + BAR / 2.0 - 1.0,
                    top - 3.0
                );
            }
        }
        let lx = gx + bars.len() as f64 * BAR / 2.0;
        let ly = TOP + PLOT_H + 12.0;
        let _ = writeln!(
            s,
            "<text transform=\"translate({lx:.1},{ly:.1}) rotate(-35)\" text-anchor=\"end\">{}</text>",
            w.name()
        );
    }
    let _ = writeln!(s, "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#333\"/>", TOP + PLOT_H);
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
        LEFT + plot_w,
        TOP + PLOT_H,
        TOP + PLOT_H
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">workload</text>",
        LEFT + plot_w / 2.0,
        height - 8.0
    );
    // Legend.
    let lx = LEFT + plot_w + 20.0;
    for (i, &l) in bars.iter().enumerate() {
        let ly = TOP + i as f64 * 18.0;
        let _ = writeln!(s, "<rect x=\"{lx:.1}\" y=\"{ly:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>", colour(l));
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", lx + 18.0, ly + 10.0, l.name());
    }
    let ly = TOP + bars.len() as f64 * 18.0 + 6.0;
    let _ = writeln!(
        s,
        "<line x1=\"{lx:.1}\" x2=\"{:.1}\" y1=\"{ly:.1}\" y2=\"{ly:.1}\" stroke=\"#333\" stroke-dasharray=\"5,3\"/>",
        lx + 12.0
    );
    let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\">share = 1×</text>", lx + 18.0, ly + 4.0);
    let _ = writeln!(s, "</svg>");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::Cell;
    use crate::bench::workloads::Workload;
    use std::collections::BTreeMap;

    #[test]
    fn chart_has_a_bar_per_layer_and_a_legend() {
        let mut cells = BTreeMap::new();
        for (l, ms) in [(LayerKind::Share, 10.0), (LayerKind::Seamfs, 11.0), (LayerKind::Bindfs, 100.0)] {
            cells.insert((Workload::GitLog, l), Cell { samples_ms: vec![ms], rss_kib: vec![] });
        }
        let z = SizeResult {
            files: 100,
            repo: String::new(),
            layers: vec![LayerKind::Share, LayerKind::Seamfs, LayerKind::Bindfs],
            layer_notes: vec![],
            workloads: vec![Workload::GitLog],
            cells,
            notes: vec![],
        };
        let svg = ratios_svg(&z, 1.0).expect("the share was measured");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("git-log seamfs: 1.10×"), "{svg}");
        // bindfs at 10× is clipped and labelled.
        assert!(svg.contains(">10.0</text>"), "{svg}");
        assert!(svg.contains(">bindfs</text>") && svg.contains("share = 1×"));
    }
}
