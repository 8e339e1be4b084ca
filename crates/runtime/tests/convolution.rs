//! Convolutions, takes and the spatial composites (padding, pooling, nearest upsampling,
//! transposed convolution) on the CPU runtime, against the HLIR interpreter (which computes
//! every convolution by its definition, `lumen_compiler::conv::conv_f64`) and the LLIR
//! reference: random geometries of every kind the kernel has a path for (im2col, pointwise in
//! place, depthwise; 1 to 3 spatial axes; groups, strides, dilations, asymmetric pads; every
//! epilogue), inputs read through views (a channel slice of a concatenation), on 1 and 2
//! threads, fused and unfused, with NaN poisoning.

use std::collections::BTreeMap;

use lumen_compiler::conv::ConvSpec;
use lumen_compiler::interpret::eval_hlir;
use lumen_compiler::{CompileOptions, ConvTransposeSpec, DType, Graph, PadMode, UnaryOp};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};
use proptest::prelude::*;

/// A program with its leaves: values as the interpreter reads them, and as the runtime does.
struct Case {
    graph: Graph,
    leaves: BTreeMap<String, Vec<f64>>,
    weights: Tensors,
    inputs: Tensors,
}

impl Case {
    fn new() -> Self {
        Self {
            graph: Graph::new(),
            leaves: BTreeMap::new(),
            weights: Tensors::new(),
            inputs: Tensors::new(),
        }
    }

    /// Deterministic values in about [-1, 1] from `seed`.
    fn values(seed: u64, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
            })
            .collect()
    }

    fn input(&mut self, name: &str, shape: &[usize], seed: u64) -> lumen_compiler::Tensor {
        let data = Self::values(seed, shape.iter().product());
        self.leaves.insert(name.into(), data.iter().map(|&v| f64::from(v)).collect());
        self.inputs.insert(name.into(), HostTensor::new(shape.to_vec(), data).unwrap());
        self.graph.input(name, shape.to_vec())
    }

    fn weight(&mut self, name: &str, shape: &[usize], seed: u64) -> lumen_compiler::Tensor {
        let data = Self::values(seed, shape.iter().product());
        self.leaves.insert(name.into(), data.iter().map(|&v| f64::from(v)).collect());
        self.weights.insert(name.into(), HostTensor::new(shape.to_vec(), data).unwrap());
        self.graph.weight(name, shape.to_vec())
    }

    fn indices(&mut self, name: &str, values: Vec<i64>) -> lumen_compiler::Tensor {
        self.leaves.insert(name.into(), values.iter().map(|&v| v as f64).collect());
        let n = values.len();
        self.weights.insert(name.into(), HostTensor::from_i64([n], values).unwrap());
        self.graph.weight_typed(name, [n], DType::I64)
    }

    /// Runs the program every way and compares with the interpreter.
    fn check(&self, what: &str) -> Result<(), TestCaseError> {
        if let Some(e) = self.graph.recorded_error() {
            return Err(TestCaseError::fail(format!("{what}: {e}")));
        }
        let want = eval_hlir(&self.graph.hlir(), &self.leaves)
            .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        for fuse in [false, true] {
            let program = self
                .graph
                .compile(&CompileOptions { fuse, ..Default::default() })
                .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
            let reference = execute_f64(&program.llir, &self.weights, &self.inputs).unwrap();
            let mut runs = Vec::new();
            for (threads, memory_debug) in [(1, false), (2, false), (2, true)] {
                let rt = CpuRuntime::new(CpuOptions {
                    memory_debug,
                    threads: Some(threads),
                    ..Default::default()
                });
                let mut prepared = rt.prepare(&program, &self.weights).unwrap();
                runs.push(prepared.execute(&self.inputs).unwrap());
            }
            prop_assert_eq!(&runs[1], &runs[2], "{}: NaN poisoning changed outputs", what);
            for (name, w) in &want {
                for run in &runs {
                    let got = &run[name];
                    prop_assert_eq!(got.shape(), w.shape.as_slice(), "{} {}", what, name);
                    for (i, (&g, &x)) in got.data().iter().zip(&w.data).enumerate() {
                        let ok =
                            f64::from(g) == x || (f64::from(g) - x).abs() <= 1e-4 * (1.0 + x.abs());
                        prop_assert!(
                            ok,
                            "{} fuse={} {}[{}]: cpu {} vs interpreter {}\n{}",
                            what,
                            fuse,
                            name,
                            i,
                            g,
                            x,
                            lumen_compiler::dump::llir_text(&program)
                        );
                        let r = reference[name].data[i];
                        prop_assert!(
                            r == x || (r - x).abs() <= 1e-9 * (1.0 + x.abs()),
                            "{} {}[{}]: LLIR reference {} vs interpreter {}",
                            what,
                            name,
                            i,
                            r,
                            x
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// A random convolution: spatial rank, sizes, kernel, strides, dilations, pads, groups,
/// epilogue, and whether the input is a channel slice of a larger tensor.
#[derive(Debug, Clone)]
struct ConvCase {
    batch: usize,
    groups: usize,
    cg: usize,
    ocg: usize,
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<(usize, usize)>,
    bias: bool,
    residual: bool,
    activation: Option<UnaryOp>,
    sliced: bool,
    seed: u64,
}

fn conv_case() -> impl Strategy<Value = ConvCase> {
    (1usize..=3, 1usize..=2, 0usize..4, any::<u64>())
        .prop_flat_map(|(rank, batch, kind, seed)| {
            // kind 0: dense; 1: grouped; 2: depthwise; 3: pointwise.
            let groups = match kind {
                1 => 2usize,
                2 => 3,
                _ => 1,
            };
            let cg = if kind == 2 { Just(1usize).boxed() } else { (1usize..=3).boxed() };
            let ocg = 1usize..=3;
            let dims = proptest::collection::vec(
                (2usize..=7, 1usize..=3, 1usize..=2, 1usize..=2, 0usize..=2, 0usize..=2),
                rank,
            );
            (
                Just((rank, batch, kind, seed, groups)),
                cg,
                ocg,
                dims,
                any::<(bool, bool, bool, u8)>(),
            )
        })
        .prop_map(
            |((_, batch, kind, seed, groups), cg, ocg, dims, (bias, residual, sliced, act))| {
                let pointwise = kind == 3;
                let mut c = ConvCase {
                    batch,
                    groups,
                    cg,
                    ocg,
                    input: Vec::new(),
                    kernel: Vec::new(),
                    strides: Vec::new(),
                    dilations: Vec::new(),
                    pads: Vec::new(),
                    bias,
                    residual,
                    activation: [
                        None,
                        Some(UnaryOp::Relu),
                        Some(UnaryOp::Silu),
                        Some(UnaryOp::HardSwish),
                        Some(UnaryOp::Relu6),
                        Some(UnaryOp::Sigmoid),
                    ][usize::from(act) % 6],
                    sliced,
                    seed,
                };
                for (len, k, s, d, pb, pe) in dims {
                    let (k, s, d, pb, pe) =
                        if pointwise { (1, 1, 1, 0, 0) } else { (k, s, d, pb, pe) };
                    // The dilated kernel fits the padded input.
                    let span = (k - 1) * d + 1;
                    c.input.push(len.max(span.saturating_sub(pb + pe)));
                    c.kernel.push(k);
                    c.strides.push(s);
                    c.dilations.push(d);
                    c.pads.push((pb, pe));
                }
                c
            },
        )
}

fn build_conv(c: &ConvCase) -> Case {
    let mut case = Case::new();
    let (ci, co) = (c.groups * c.cg, c.groups * c.ocg);
    let mut xs = vec![c.batch, ci];
    xs.extend(&c.input);
    let x = if c.sliced {
        // The input is channels 1.. of a larger tensor: a view with an offset.
        let mut bigger = xs.clone();
        bigger[1] += 1;
        case.input("x", &bigger, c.seed).slice(1, 1, ci + 1)
    } else {
        case.input("x", &xs, c.seed)
    };
    let mut ws = vec![co, c.cg];
    ws.extend(&c.kernel);
    let w = case.weight("w", &ws, c.seed ^ 1);
    let b = c.bias.then(|| case.weight("b", &[co], c.seed ^ 2));
    let spec = ConvSpec {
        strides: c.strides.clone(),
        dilations: c.dilations.clone(),
        pads: c.pads.clone(),
        groups: c.groups,
    };
    let mut y = x.conv(&w, b.as_ref(), &spec);
    if c.residual {
        let shape = y.shape().unwrap_or_default();
        y = y + case.input("r", &shape, c.seed ^ 3);
    }
    y = match c.activation {
        None => y,
        Some(UnaryOp::Relu) => y.relu(),
        Some(UnaryOp::Silu) => y.silu(),
        Some(UnaryOp::HardSwish) => y.hardswish(),
        Some(UnaryOp::Relu6) => y.relu6(),
        Some(_) => y.sigmoid(),
    };
    y.output("y");
    case
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_convolutions_match_the_definition(c in conv_case()) {
        build_conv(&c).check(&format!("{c:?}"))?;
    }
}

/// A convolution large enough for the threads (both the row and the column split of its
/// GEMM) and for the im2col rows to be split too.
#[test]
fn large_convolutions_split_over_threads() {
    for (c, oc, hw, k, s) in
        [(16, 64, 32, 3, 1), (8, 4, 64, 3, 2), (32, 32, 16, 1, 1), (24, 24, 40, 3, 1)]
    {
        let mut case = Case::new();
        let x = case.input("x", &[1, c, hw, hw], 7);
        let groups = if c == 24 { 24 } else { 1 };
        let w = case.weight("w", &[oc, c / groups, k, k], 8);
        let b = case.weight("b", &[oc], 9);
        let spec = ConvSpec {
            strides: vec![s, s],
            dilations: vec![1, 1],
            pads: vec![(k / 2, k / 2); 2],
            groups,
        };
        x.conv(&w, Some(&b), &spec).relu().output("y");
        case.check(&format!("c={c} oc={oc} hw={hw} k={k} s={s}")).unwrap();
    }
}

#[test]
fn padding_pooling_and_upsampling_match_the_definition() {
    let mut case = Case::new();
    let x = case.input("x", &[2, 3, 7, 6], 11);
    x.pad(&[(1, 2), (0, 3)], PadMode::Constant(0.5)).output("constant");
    x.pad(&[(2, 1), (3, 0)], PadMode::Edge).output("edge");
    x.pad(&[(3, 2), (1, 5)], PadMode::Reflect).output("reflect");
    x.max_pool(&[3, 3], &[2, 2], &[1, 1], &[(1, 1), (1, 1)], false).output("max");
    x.max_pool(&[2, 3], &[2, 2], &[2, 1], &[(0, 1), (1, 0)], true).output("max_ceil");
    x.avg_pool(&[3, 3], &[2, 2], &[1, 1], &[(1, 1), (1, 1)], false, true).output("avg_incl");
    x.avg_pool(&[3, 2], &[2, 2], &[1, 1], &[(1, 1), (0, 1)], true, false).output("avg_excl_ceil");
    x.avg_pool(&[2, 2], &[3, 3], &[1, 1], &[(1, 0), (1, 1)], true, true).output("avg_incl_ceil");
    x.upsample_nearest(&[2, 3]).output("up");
    case.check("spatial composites").unwrap();
}

#[test]
fn takes_pick_fill_and_refuse() {
    let mut case = Case::new();
    let x = case.input("x", &[2, 5, 3], 21);
    let idx = case.indices("idx", vec![4, -1, 0, 0, 2, -1]);
    x.take(1, &idx, -2.5).output("y");
    x.transpose(0, 2).take(1, &idx, 0.0).output("z");
    case.check("take").unwrap();
    // An index past the axis is a runtime error naming the indices.
    let mut bad = Case::new();
    let x = bad.input("x", &[4, 2], 1);
    let idx = bad.indices("ids", vec![1, 4]);
    x.take(0, &idx, 0.0).output("y");
    let program = bad.graph.compile(&CompileOptions::default()).unwrap();
    let mut prepared = CpuRuntime::default().prepare(&program, &bad.weights).unwrap();
    let err = prepared.execute(&bad.inputs).unwrap_err().to_string();
    assert!(err.contains("ids") && err.contains('4'), "{err}");
}

#[test]
fn transposed_convolutions_match_a_scatter_by_hand() {
    // A transposed convolution scatters each input element times the kernel into the output
    // (PyTorch's definition); computed here directly and compared.
    for (stride, pad, out_pad, dil, groups) in
        [(2, 1, 1, 1, 1), (1, 0, 0, 1, 1), (3, 2, 0, 2, 2), (2, 0, 1, 1, 2)]
    {
        let (n, c, oc_per, len, k) = (1usize, 2usize, 3usize, 4usize, 3usize);
        let mut case = Case::new();
        let x = case.input("x", &[n, c, len, len], 31);
        let w = case.weight("w", &[c, oc_per, k, k], 32);
        let spec = ConvTransposeSpec {
            strides: vec![stride; 2],
            dilations: vec![dil; 2],
            pads: vec![(pad, pad); 2],
            output_padding: vec![out_pad; 2],
            groups,
        };
        x.conv_transpose(&w, None, &spec).output("y");
        let xs = case.leaves["x"].clone();
        let ws = case.leaves["w"].clone();
        let out_len = stride * (len - 1) + out_pad + dil * (k - 1) + 1 - 2 * pad;
        let oc = oc_per * groups;
        let cg = c / groups;
        let mut want = vec![0.0f64; oc * out_len * out_len];
        for ci in 0..c {
            let grp = ci / cg;
            for i in 0..len {
                for j in 0..len {
                    for o in 0..oc_per {
                        for a in 0..k {
                            for b in 0..k {
                                let (y, x_) = (i * stride + a * dil, j * stride + b * dil);
                                if y < pad || x_ < pad || y - pad >= out_len || x_ - pad >= out_len
                                {
                                    continue;
                                }
                                let oco = grp * oc_per + o;
                                want[(oco * out_len + y - pad) * out_len + x_ - pad] += xs
                                    [(ci * len + i) * len + j]
                                    * ws[((ci * oc_per + o) * k + a) * k + b];
                            }
                        }
                    }
                }
            }
        }
        let got = eval_hlir(&case.graph.hlir(), &case.leaves).unwrap();
        assert_eq!(got["y"].shape, [n, oc, out_len, out_len]);
        for (g, w) in got["y"].data.iter().zip(&want) {
            assert!((g - w).abs() < 1e-9, "stride {stride} pad {pad}: {g} vs {w}");
        }
        case.check(&format!("conv_transpose stride {stride} pad {pad} groups {groups}")).unwrap();
    }
}

#[test]
fn bad_convolutions_are_compile_errors() {
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 4, 5, 5]);
    let w = cx.weight("w", [6, 1, 3, 3]);
    let spec =
        ConvSpec { strides: vec![1, 1], dilations: vec![1, 1], pads: vec![(0, 0); 2], groups: 3 };
    x.conv(&w, None, &spec).output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err().to_string();
    assert!(err.contains("conv: group = 3 must divide the input channels (4)"), "{err}");
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 2, 3, 3]);
    let w = cx.weight("w", [2, 2, 5, 5]);
    x.conv(&w, None, &ConvSpec::unit(2)).output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err().to_string();
    assert!(err.contains("larger than the padded input"), "{err}");
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 2, 3, 3]);
    x.window(2, 0, 1, 1).output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err().to_string();
    assert!(err.contains("window: size 0"), "{err}");
}

/// A residual block (`relu(conv(x) + b + x)`) fuses into one convolution launch with the
/// FusedConv epilogue; `relu(conv) + z` keeps its add (the order is not the epilogue's).
#[test]
fn residual_blocks_fuse_into_the_convolution() {
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 4, 6, 6]);
    let w = cx.weight("w", [4, 4, 3, 3]);
    let b = cx.weight("b", [4]);
    let spec =
        ConvSpec { strides: vec![1, 1], dilations: vec![1, 1], pads: vec![(1, 1); 2], groups: 1 };
    (x.conv(&w, Some(&b), &spec) + &x).relu().output("y");
    (x.conv(&w, None, &spec).relu() + &x).output("z");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let text = lumen_compiler::dump::llir_text(&program);
    assert!(text.contains("epilogue=bias+residual+relu"), "{text}");
    assert!(text.contains("epilogue=relu inputs"), "{text}");
    assert_eq!(program.figures.launches, 3, "{text}");
    let unfused = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    assert_eq!(unfused.figures.launches, 6);
}

/// A deep, small-width convolution: column blocks of 64 positions that start mid-row of a
/// non-square output, with padding on every side and a stride, on 1 and 2 threads.
#[test]
fn column_blocks_start_mid_row() {
    let mut case = Case::new();
    let x = case.input("x", &[1, 128, 21, 13], 41);
    let w = case.weight("w", &[8, 128, 3, 3], 42);
    let spec = ConvSpec {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![(1, 2), (2, 1)],
        groups: 1,
    };
    x.conv(&w, None, &spec).silu().output("y");
    case.check("deep narrow conv").unwrap();
}

/// A random max pool: spatial rank, sizes, window, strides, dilations, pads (larger than the
/// window too: windows of padding alone), and whether the input is a channel slice.
#[derive(Debug, Clone)]
struct PoolCase {
    batch: usize,
    channels: usize,
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<(usize, usize)>,
    sliced: bool,
    seed: u64,
}

fn pool_case() -> impl Strategy<Value = PoolCase> {
    (1usize..=3, 1usize..=2, 1usize..=3, any::<bool>(), any::<u64>())
        .prop_flat_map(|(rank, batch, channels, sliced, seed)| {
            let axis = (1usize..=4, 1usize..=3, 1usize..=2, 0usize..=3, 0usize..=3, 0usize..=12);
            (Just((rank, batch, channels, sliced, seed)), proptest::collection::vec(axis, rank))
        })
        .prop_map(|((_, batch, channels, sliced, seed), axes)| {
            let mut c = PoolCase {
                batch,
                channels,
                input: Vec::new(),
                kernel: Vec::new(),
                strides: Vec::new(),
                dilations: Vec::new(),
                pads: Vec::new(),
                sliced,
                seed,
            };
            for (k, s, d, pb, pe, extra) in axes {
                let span = (k - 1) * d + 1;
                // At least the window: every axis has an output position.
                c.input.push(span.saturating_sub(pb + pe).max(1) + extra);
                c.kernel.push(k);
                c.strides.push(s);
                c.dilations.push(d);
                c.pads.push((pb, pe));
            }
            c
        })
}

/// Values with every kind of special: NaNs of several payloads and signs, both zeros, both
/// infinities, ties, ordinary numbers.
fn special_values(seed: u64, n: usize) -> Vec<f32> {
    let pool = [
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_0001),
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0,
        -1.0,
        0.5,
    ];
    Case::values(seed, n)
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let pick = ((v.to_bits() as usize) ^ i.wrapping_mul(7)) % 40;
            // A NaN in about 1 of 40, a special in about a quarter, zeros often (ties of -0 and
            // +0 decide by position), else the random value.
            match pick {
                0 => pool[(i / 40) % 3],
                1..=6 => pool[3 + pick % 2],
                7..=9 => pool[3 + pick % 7],
                _ => v,
            }
        })
        .collect()
}

/// The max pool of `c`, built two ways in one program: the `max_pool` op, and the lowering it
/// replaced (the input padded with -inf by concatenations, a `window` view per axis, `max` over
/// each window axis).
fn build_pool(c: &PoolCase, case: &mut Case) {
    let rank = c.input.len();
    let mut shape = vec![c.batch, c.channels + usize::from(c.sliced)];
    shape.extend(&c.input);
    let all = case.input("x", &shape, c.seed);
    let x = if c.sliced { all.slice(1, 1, c.channels + 1) } else { all };
    let spec = lumen_compiler::conv::PoolSpec {
        kernel: c.kernel.clone(),
        strides: c.strides.clone(),
        dilations: c.dilations.clone(),
        pads: c.pads.clone(),
    };
    // The DSL's max_pool with pads and no ceil_mode is the op over exactly these pads.
    x.max_pool(&spec.kernel, &spec.strides, &spec.dilations, &spec.pads, false).output("op");
    let mut t = x.pad(&c.pads, PadMode::Constant(f32::NEG_INFINITY));
    for i in 0..rank {
        t = t.window((2 + 2 * i) as isize, c.kernel[i], c.strides[i], c.dilations[i]);
    }
    for i in (0..rank).rev() {
        t = t.max((2 + 2 * i + 1) as isize, false);
    }
    t.output("windows");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The max pool op against the definition (the interpreter and the LLIR reference), and
    /// bit for bit against the window reduction it replaced, NaNs, infinities and both zeros
    /// in the input, on 1 and 2 threads.
    #[test]
    fn random_max_pools_match_the_window_reduction_bit_for_bit(c in pool_case()) {
        let mut case = Case::new();
        build_pool(&c, &mut case);
        case.check(&format!("{c:?}"))?;
        let x = case.inputs.get("x").unwrap();
        let special = special_values(c.seed, x.data().len());
        let mut inputs = Tensors::new();
        inputs.insert("x".into(), HostTensor::new(x.shape().to_vec(), special).unwrap());
        let program = case.graph.compile(&CompileOptions::default()).unwrap();
        prop_assert!(
            program.llir.nodes.iter().any(|n| n.op.name() == "max_pool"),
            "no max_pool node"
        );
        for threads in [1, 2] {
            let rt = CpuRuntime::new(CpuOptions { threads: Some(threads), ..Default::default() });
            let out = rt.prepare(&program, &case.weights).unwrap().execute(&inputs).unwrap();
            let bits = |name: &str| -> Vec<u32> {
                out[name].data().iter().map(|v| v.to_bits()).collect()
            };
            prop_assert_eq!(bits("op"), bits("windows"), "{:?} on {} threads", c, threads);
        }
    }
}

/// Max pools large enough for the threads, bit for bit against the window reduction.
#[test]
fn large_max_pools_split_over_threads() {
    for (kernel, stride, pad, hw) in [(3, 2, 1, 112), (5, 1, 2, 40), (2, 2, 0, 64)] {
        let c = PoolCase {
            batch: 2,
            channels: 32,
            input: vec![hw, hw],
            kernel: vec![kernel; 2],
            strides: vec![stride; 2],
            dilations: vec![1; 2],
            pads: vec![(pad, pad); 2],
            sliced: true,
            seed: 5,
        };
        let mut case = Case::new();
        build_pool(&c, &mut case);
        let x = case.inputs.get("x").unwrap();
        let special = special_values(c.seed, x.data().len());
        let mut inputs = Tensors::new();
        inputs.insert("x".into(), HostTensor::new(x.shape().to_vec(), special).unwrap());
        let program = case.graph.compile(&CompileOptions::default()).unwrap();
        for threads in [1, 2] {
            let rt = CpuRuntime::new(CpuOptions { threads: Some(threads), ..Default::default() });
            let out = rt.prepare(&program, &case.weights).unwrap().execute(&inputs).unwrap();
            let bits =
                |name: &str| -> Vec<u32> { out[name].data().iter().map(|v| v.to_bits()).collect() };
            assert!(bits("op") == bits("windows"), "{c:?} on {threads} threads");
        }
    }
}
