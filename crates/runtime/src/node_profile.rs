//! Where an execute's time goes, node by node: the per-node wall times of several executes
//! ([`ExecProfile::node_ms`], on when [`PreparedProgram::time_nodes`] is) reduced to one
//! median per LLIR node, then summed per op class (`conv 3x3 depthwise`, `conv 1x1`,
//! `lt_matmul`, `add`, ...). What ONNX Runtime's `enable_profiling` trace and TVM's debug
//! executor table give, as a table a person reads and JSON a script reads.
//!
//! A node's time is the wall time from before its kernel starts to after it returns, on the
//! host thread (its workers included): the nodes of one execute add up to its kernel time.
//! Medians, not means: one execute descheduled on a shared machine moves a mean, not a median.
//!
//! [`ExecProfile::node_ms`]: crate::ExecProfile::node_ms
//! [`PreparedProgram::time_nodes`]: crate::PreparedProgram::time_nodes

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lumen_compiler::conv::ConvGeometry;
use lumen_compiler::{CompiledProgram, LlirOp};
use serde::Serialize;

/// One LLIR node's median time over the executes profiled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeTime {
    /// The node's index in the program's LLIR (its dump's `node N`).
    pub node: usize,
    /// The op's dump name (`conv`, `lt_matmul`, `add`, ...).
    pub op: &'static str,
    /// The class its time is summed under ([`op_class`]).
    pub class: String,
    /// The op's parameters as the LLIR dump prints them (shapes, kernel, epilogue).
    pub params: String,
    /// The buffers it writes, by id.
    pub writes: Vec<String>,
    /// Median wall time, ms.
    pub ms: f64,
    /// Share of the execute's summed node time, 0 to 1.
    pub share: f64,
    /// FLOP per execute (at the compiled shapes; a symbolic program's bound).
    pub flops: u64,
}

/// The nodes of one op class together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassTime {
    /// The class ([`op_class`]).
    pub class: String,
    /// How many nodes it has.
    pub nodes: usize,
    /// The sum of their median times, ms.
    pub ms: f64,
    /// Share of the execute's summed node time, 0 to 1.
    pub share: f64,
    /// FLOP per execute.
    pub flops: u64,
}

/// Per-node and per-class times of a program's executes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeProfile {
    /// Executes the medians are taken over.
    pub executes: usize,
    /// The sum of every node's median, ms (about an execute's time less its checks).
    pub total_ms: f64,
    /// Every node, in LLIR order.
    pub nodes: Vec<NodeTime>,
    /// Every class, the slowest first (ties by name).
    pub classes: Vec<ClassTime>,
}

impl NodeProfile {
    /// The profile of `samples` (one [`ExecProfile::node_ms`] per execute) of `program`.
    /// `None` when no sample has one time per node of the program (node timing was off, or the
    /// runtime does not time nodes).
    ///
    /// [`ExecProfile::node_ms`]: crate::ExecProfile::node_ms
    pub fn from_samples(program: &CompiledProgram, samples: &[Vec<f64>]) -> Option<Self> {
        let nodes = &program.llir.nodes;
        let samples: Vec<&Vec<f64>> = samples.iter().filter(|s| s.len() == nodes.len()).collect();
        if samples.is_empty() || nodes.is_empty() {
            return None;
        }
        let medians: Vec<f64> =
            (0..nodes.len()).map(|i| median(samples.iter().map(|s| s[i]).collect())).collect();
        let total_ms: f64 = medians.iter().sum();
        let share = |ms: f64| if total_ms > 0.0 { ms / total_ms } else { 0.0 };
        let llir = &program.llir;
        let times: Vec<NodeTime> = nodes
            .iter()
            .zip(&medians)
            .enumerate()
            .map(|(i, (n, &ms))| NodeTime {
                node: i,
                op: n.op.name(),
                class: op_class(&n.op),
                params: lumen_compiler::dump::op_params(&n.op),
                writes: n.writes.iter().map(|&b| llir.buffers[b].id.clone()).collect(),
                ms,
                share: share(ms),
                flops: n.op.flops(),
            })
            .collect();
        let mut by_class: BTreeMap<&str, ClassTime> = BTreeMap::new();
        for t in &times {
            let c = by_class.entry(&t.class).or_insert_with(|| ClassTime {
                class: t.class.clone(),
                nodes: 0,
                ms: 0.0,
                share: 0.0,
                flops: 0,
            });
            c.nodes += 1;
            c.ms += t.ms;
            c.flops = c.flops.saturating_add(t.flops);
        }
        let mut classes: Vec<ClassTime> = by_class
            .into_values()
            .map(|mut c| {
                c.share = share(c.ms);
                c
            })
            .collect();
        classes.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.class.cmp(&b.class)));
        Some(Self { executes: samples.len(), total_ms, nodes: times, classes })
    }

    /// The `top` slowest nodes, the slowest first (ties in LLIR order).
    pub fn slowest(&self, top: usize) -> Vec<&NodeTime> {
        let mut order: Vec<&NodeTime> = self.nodes.iter().collect();
        order.sort_by(|a, b| b.ms.total_cmp(&a.ms).then(a.node.cmp(&b.node)));
        order.truncate(top);
        order
    }

    /// The table for a person: a heading line, every class, then the `top` slowest nodes with
    /// their parameters and the buffer they write. Times in ms with 3 decimals, GFLOP/s of
    /// the class or node (blank for copies).
    pub fn text(&self, top: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "profile    {} nodes, {:.3} ms summed (medians of {} executes, each node timed on its own)",
            self.nodes.len(),
            self.total_ms,
            self.executes
        );
        let width = self.classes.iter().map(|c| c.class.len()).max().unwrap_or(0).max(8);
        let _ = writeln!(
            s,
            "  {:<width$} {:>5} {:>9} {:>6} {:>8}",
            "op", "nodes", "ms", "share", "GFLOP/s"
        );
        for c in &self.classes {
            let _ = writeln!(
                s,
                "  {:<width$} {:>5} {:>9.3} {:>5.1}% {:>8}",
                c.class,
                c.nodes,
                c.ms,
                c.share * 100.0,
                gflops(c.flops, c.ms)
            );
        }
        let slowest = self.slowest(top);
        if !slowest.is_empty() {
            let _ = writeln!(s, "  slowest {} nodes:", slowest.len());
            for t in slowest {
                let _ = writeln!(
                    s,
                    "  node {:>4} {:>9.3} ms {:>5.1}% {:>8} GFLOP/s  {} {} -> {}",
                    t.node,
                    t.ms,
                    t.share * 100.0,
                    gflops(t.flops, t.ms),
                    t.op,
                    t.params,
                    t.writes.join(", ")
                );
            }
        }
        s
    }
}

/// `flops` in `ms` as GFLOP/s with one decimal; `-` for a node without FLOP or time.
fn gflops(flops: u64, ms: f64) -> String {
    if flops == 0 || ms <= 0.0 {
        "-".to_string()
    } else {
        format!("{:.1}", flops as f64 / (ms * 1e6))
    }
}

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// The class a node's time is summed under: a convolution by kernel, stride and kind
/// (`conv 3x3`, `conv 3x3/2 depthwise`, `conv 1x1 grouped`), a max pool by window and stride
/// (`max_pool 5x5`), any other op by its dump name.
pub fn op_class(op: &LlirOp) -> String {
    match op {
        LlirOp::Conv { geometry: g, .. } => {
            let kind = if g.groups > 1 && g.groups == g.c_in {
                " depthwise"
            } else if g.groups > 1 {
                " grouped"
            } else {
                ""
            };
            format!("conv {}{kind}", window(g))
        }
        LlirOp::MaxPool { geometry: g } => format!("max_pool {}", window(g)),
        other => other.name().to_string(),
    }
}

/// `3x3`, `3x3/2` (every axis strided alike), `3x3/2x1`.
fn window(g: &ConvGeometry) -> String {
    let axes = g.axes();
    let join = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    let stride = &g.stride[axes.clone()];
    let kernel = join(&g.kernel[axes]);
    match stride {
        s if s.iter().all(|&x| x == 1) => kernel,
        s if s.windows(2).all(|w| w[0] == w[1]) => format!("{kernel}/{}", s[0]),
        s => format!("{kernel}/{}", join(s)),
    }
}

#[cfg(test)]
mod tests {
    use lumen_compiler::conv::ConvSpec;
    use lumen_compiler::{CompileOptions, Graph, HostTensor, Tensors};

    use super::*;
    use crate::{CpuOptions, CpuRuntime, Runtime};

    /// A 3x3 depthwise convolution of stride 2 with bias, then a ReLU, unfused.
    fn program() -> CompiledProgram {
        let mut cx = Graph::new();
        let x = cx.input("x", [1, 4, 9, 9]);
        let w = cx.weight("w", [4, 1, 3, 3]);
        let b = cx.weight("b", [4]);
        let spec =
            ConvSpec { strides: vec![2, 2], pads: vec![(1, 1); 2], groups: 4, ..ConvSpec::unit(2) };
        x.conv(&w, Some(&b), &spec).relu().output("y");
        cx.compile(&CompileOptions { fuse: false, ..CompileOptions::default() }).unwrap()
    }

    fn filled(shape: &[usize]) -> HostTensor {
        let n = shape.iter().product();
        HostTensor::new(shape.to_vec(), (0..n).map(|i| (i % 7) as f32 - 3.0).collect()).unwrap()
    }

    #[test]
    fn a_cpu_execute_times_every_node_when_asked() {
        let p = program();
        let weights: Tensors =
            [("w".to_string(), filled(&[4, 1, 3, 3])), ("b".to_string(), filled(&[4]))].into();
        let inputs: Tensors = [("x".to_string(), filled(&[1, 4, 9, 9]))].into();
        let rt = CpuRuntime::new(CpuOptions { threads: Some(1), ..CpuOptions::default() });
        let mut prepared = rt.prepare(&p, &weights).unwrap();
        let untimed = prepared.execute(&inputs).unwrap();
        assert!(prepared.last_profile().unwrap().node_ms.is_empty(), "off by default");
        assert!(prepared.time_nodes(true));
        let mut samples = Vec::new();
        for _ in 0..3 {
            let out = prepared.execute(&inputs).unwrap();
            assert_eq!(out["y"].data(), untimed["y"].data(), "timing changes no result");
            samples.push(prepared.last_profile().unwrap().node_ms.clone());
        }
        assert!(
            samples.iter().all(|s| s.len() == p.llir.nodes.len() && s.iter().all(|&t| t >= 0.0))
        );
        let prof = NodeProfile::from_samples(&p, &samples).unwrap();
        let classes: Vec<&str> = prof.classes.iter().map(|c| c.class.as_str()).collect();
        for class in ["conv 3x3/2 depthwise", "relu", "upload", "readback"] {
            assert!(classes.contains(&class), "{class} in {classes:?}");
        }
        let conv = prof.nodes.iter().find(|t| t.op == "conv").unwrap();
        assert_eq!(conv.flops, p.llir.nodes[conv.node].op.flops());
        assert!(conv.params.contains("g=4"), "{}", conv.params);
    }

    #[test]
    fn medians_per_node_and_sums_per_class() {
        let p = program();
        let n = p.llir.nodes.len();
        // Three executes; node i takes i + 1 ms, but for one slow execute of node 0.
        let mut samples: Vec<Vec<f64>> =
            (0..3).map(|_| (0..n).map(|i| (i + 1) as f64).collect()).collect();
        samples[1][0] = 1000.0;
        let prof = NodeProfile::from_samples(&p, &samples).expect("a profile");
        assert_eq!(prof.executes, 3);
        assert_eq!(prof.nodes[0].ms, 1.0, "the median ignores one slow execute");
        let total: f64 = (1..=n).map(|i| i as f64).sum();
        assert_eq!(prof.total_ms, total);
        assert_eq!(prof.classes.iter().map(|c| c.ms).sum::<f64>(), total);
        assert_eq!(prof.classes.iter().map(|c| c.nodes).sum::<usize>(), n);
        assert!(prof.classes.windows(2).all(|w| w[0].ms >= w[1].ms));
        assert_eq!(prof.slowest(1)[0].node, n - 1);
        let text = prof.text(2);
        assert!(text.starts_with(&format!("profile    {n} nodes")), "{text}");
        assert!(text.contains("slowest 2 nodes"), "{text}");
    }

    #[test]
    fn no_profile_without_node_times() {
        let p = program();
        assert_eq!(NodeProfile::from_samples(&p, &[]), None);
        assert_eq!(NodeProfile::from_samples(&p, &[vec![1.0]]), None);
    }
}
