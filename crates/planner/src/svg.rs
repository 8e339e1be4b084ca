//! The slab layout picture: one rectangle per buffer, its byte range on the vertical axis and its
//! lifetime (the span of its uses in the DAG's topological order) on the horizontal one. Reuse
//! shows as rectangles stacked at the same offsets over disjoint spans. The picture in the style
//! of TFLite's and XLA's memory-viewer plots; the bytes of the SVG are deterministic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::{SlabBuffer, SlabPlan};

const LEFT: f64 = 100.0;
const TOP: f64 = 48.0;
const PLOT_W: f64 = 720.0;
const PLOT_H: f64 = 480.0;
const BOTTOM: f64 = 90.0;
const LEGEND_GAP: f64 = 36.0;
const LEGEND_ROW: f64 = 16.0;
const LEGEND_W: f64 = 360.0;
/// At most this many labelled ticks on the step axis.
const MAX_STEP_LABELS: usize = 24;

/// The layout of `plan` as an SVG document, steps labelled by their position in the order.
///
/// Horizontal axis: the DAG's nodes in a deterministic topological order (Kahn's algorithm,
/// ties broken by the lower node index); a buffer spans from its first to its last use,
/// inclusive. Vertical axis: byte offset in the slab, 0 at the bottom; a buffer covers
/// `offset .. offset + reserved`. Dashed lines mark `slab_bytes` and `lower_bound`. A legend
/// lists every buffer's id, size, reserved size and offset (bytes), in request order.
///
/// Never fails: nodes of a cycle are appended in index order, uses of absent nodes are ignored,
/// and buffers without an offset in `plan` are listed but not drawn.
pub fn layout_svg<N, E>(dag: &DiGraph<N, E>, buffers: &[SlabBuffer], plan: &SlabPlan) -> String {
    layout_svg_with_names(dag, buffers, plan, |node| format!("{}", node.index()))
}

/// As [`layout_svg`], with each step of the horizontal axis labelled `name(node)` (for example
/// the node's op name).
pub fn layout_svg_with_names<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    plan: &SlabPlan,
    name: impl Fn(NodeIndex) -> String,
) -> String {
    let order = topological_order(dag);
    let steps = order.len().max(1);
    let mut rank = vec![0usize; dag.node_count()];
    for (r, node) in order.iter().enumerate() {
        if let Some(slot) = rank.get_mut(node.index()) {
            *slot = r;
        }
    }

    let top_bytes = plan.slab_bytes.max(plan.lower_bound).max(1);
    let scale = PLOT_H / top_bytes as f64;
    let col = PLOT_W / steps as f64;
    let y_of = |bytes: usize| TOP + PLOT_H - bytes as f64 * scale;

    let legend_h = LEGEND_ROW * (buffers.len() as f64 + 1.0);
    let width = LEFT + PLOT_W + LEGEND_GAP + LEGEND_W;
    let height = (TOP + PLOT_H + BOTTOM).max(TOP + legend_h + 16.0);

    let mut s = String::new();
    // Writing to a String cannot fail; the results are ignored throughout.
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14">slab layout: {} buffers, slab_bytes {}, lower_bound {}, naive_bytes {}</text>"#,
        buffers.len(),
        group(plan.slab_bytes),
        group(plan.lower_bound),
        group(plan.naive_bytes)
    );

    // Axes and grid.
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#444"/>"##
    );
    let step_every = order.len().div_ceil(MAX_STEP_LABELS).max(1);
    for (r, &node) in order.iter().enumerate() {
        let x = LEFT + (r as f64 + 0.5) * col;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.2}" y1="{:.2}" x2="{x:.2}" y2="{:.2}" stroke="#444"/>"##,
            TOP + PLOT_H,
            TOP + PLOT_H + 4.0
        );
        if r % step_every == 0 {
            let y = TOP + PLOT_H + 8.0;
            let _ = writeln!(
                s,
                r#"<text x="{x:.2}" y="{y:.2}" transform="rotate(45 {x:.2} {y:.2})">{}</text>"#,
                escape(&name(node))
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">DAG order (topological, ties by node index)</text>"#,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + BOTTOM - 6.0
    );
    let tick = nice_step(top_bytes);
    let mut v = 0usize;
    while v <= top_bytes {
        let y = y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{:.2}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}" stroke="#ddd"/>"##,
            LEFT,
            LEFT + PLOT_W
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            group(v)
        );
        v = match v.checked_add(tick) {
            Some(next) => next,
            None => break,
        };
    }
    let (ax, ay) = (16.0, TOP + PLOT_H / 2.0);
    let _ = writeln!(
        s,
        r#"<text x="{ax}" y="{ay}" text-anchor="middle" transform="rotate(-90 {ax} {ay})">offset (bytes)</text>"#
    );

    // Buffers.
    for (i, buf) in buffers.iter().enumerate() {
        let (Some(&offset), Some(&reserved)) = (plan.offsets.get(i), plan.reserved.get(i)) else {
            continue;
        };
        let ranks = buf.uses.iter().filter_map(|u| rank.get(u.index()).copied());
        let (Some(first), Some(last)) = (ranks.clone().min(), ranks.max()) else { continue };
        let end = offset.saturating_add(reserved);
        let x = LEFT + first as f64 * col;
        let w = (last + 1 - first) as f64 * col;
        let y = y_of(end);
        let h = reserved as f64 * scale;
        let _ = writeln!(
            s,
            r##"<rect x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{}" fill-opacity="0.85" stroke="#222" stroke-width="0.5"><title>{}: {} bytes, reserved {}, offset {}..{}</title></rect>"##,
            color(i),
            escape(&buf.id),
            group(buf.bytes),
            group(reserved),
            group(offset),
            group(end)
        );
        if h >= 13.0 && w >= 7.0 * buf.id.chars().count() as f64 + 4.0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                x + w / 2.0,
                y + h / 2.0 + 4.0,
                escape(&buf.id)
            );
        }
    }

    // Totals.
    for (label, bytes, color) in
        [("slab_bytes", plan.slab_bytes, "#c00"), ("lower_bound", plan.lower_bound, "#06c")]
    {
        let y = y_of(bytes);
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}" stroke="{color}" stroke-dasharray="6 3"/>"#,
            LEFT + PLOT_W
        );
        let anchor_y = if label == "slab_bytes" { y - 3.0 } else { y + 12.0 };
        let _ = writeln!(
            s,
            r#"<text x="{:.2}" y="{anchor_y:.2}" text-anchor="end" fill="{color}">{label} {}</text>"#,
            LEFT + PLOT_W - 4.0,
            group(bytes)
        );
    }

    // Legend.
    let lx = LEFT + PLOT_W + LEGEND_GAP;
    let _ = writeln!(s, r#"<text x="{lx}" y="{TOP}">id: bytes (reserved) @ offset</text>"#);
    for (i, buf) in buffers.iter().enumerate() {
        let y = TOP + LEGEND_ROW * (i as f64 + 1.0);
        let placed = match (plan.offsets.get(i), plan.reserved.get(i)) {
            (Some(o), Some(r)) => format!(" ({}) @ {}", group(*r), group(*o)),
            _ => " (not placed)".to_string(),
        };
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="{:.2}" width="10" height="10" fill="{}" stroke="#222" stroke-width="0.5"/><text x="{:.2}" y="{y:.2}">{}: {}{}</text>"##,
            y - 9.0,
            color(i),
            lx + 16.0,
            escape(&buf.id),
            group(buf.bytes),
            placed
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Kahn's algorithm taking the lowest ready node index first; nodes left on a cycle follow in
/// index order, so the result always lists every node once.
pub(crate) fn topological_order<N, E>(dag: &DiGraph<N, E>) -> Vec<NodeIndex> {
    let n = dag.node_count();
    let mut indegree = vec![0usize; n];
    for e in dag.edge_references() {
        if let Some(d) = indegree.get_mut(e.target().index()) {
            *d += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&v| indegree[v] == 0).map(Reverse).collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(v)) = ready.pop() {
        done[v] = true;
        order.push(NodeIndex::new(v));
        for e in dag.edges(NodeIndex::new(v)) {
            let t = e.target().index();
            if let Some(d) = indegree.get_mut(t) {
                *d = d.saturating_sub(1);
                if *d == 0 && !done[t] {
                    ready.push(Reverse(t));
                }
            }
        }
    }
    order.extend((0..n).filter(|&v| !done[v]).map(NodeIndex::new));
    order
}

/// A tick spacing of 1, 2 or 5 times a power of ten giving at most about 8 ticks up to `top`.
fn nice_step(top: usize) -> usize {
    let raw = (top / 8).max(1);
    let mut pow = 1usize;
    while pow.saturating_mul(10) <= raw {
        pow *= 10;
    }
    [1, 2, 5, 10]
        .iter()
        .map(|m| pow.saturating_mul(*m))
        .find(|&step| step >= raw)
        .unwrap_or(pow.saturating_mul(10))
}

/// A byte count (or any count) with its digits grouped by thousands for reports:
/// `1196288` -> `1,196,288`. Shared by every readable table lumen prints.
pub fn group(v: usize) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A distinct, stable fill per request index (golden-angle hues).
fn color(i: usize) -> String {
    let hue = (i as u64 * 137_508 / 1000) % 360;
    format!("hsl({hue},55%,68%)")
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_196_288), "1,196,288");
        assert_eq!(nice_step(1_196_288), 200_000);
        assert_eq!(nice_step(12), 1);
        // usize::MAX / 8 is about 2.3e18: the next 1-2-5 step is 5e18, no overflow.
        assert_eq!(nice_step(usize::MAX), 5_000_000_000_000_000_000);
        assert_eq!(escape("a<&>\"'b"), "a&lt;&amp;&gt;&quot;&apos;b");
    }

    #[test]
    fn order_breaks_ties_by_index_and_survives_cycles() {
        let mut g: DiGraph<(), ()> = DiGraph::new();
        let n: Vec<NodeIndex> = (0..5).map(|_| g.add_node(())).collect();
        g.extend_with_edges([(n[3], n[0]), (n[4], n[1]), (n[1], n[2]), (n[2], n[1])]);
        let order: Vec<usize> = topological_order(&g).iter().map(|v| v.index()).collect();
        assert_eq!(order, vec![3, 0, 4, 1, 2]);
    }
}
