//! Differential tests over random tensor programs drawn from every op: unary and binary
//! elementwise ops with NumPy broadcasting, comparisons and select, reductions, movement
//! (permute, reshape, expand, slice, concat) folded into views or copied, batched and
//! transposed matmuls, gather, and the composites (softmax, log-softmax, layer norm, erf-GELU,
//! sigmoid). Each program runs on the CPU runtime, fused and unfused, planned and NaN-poisoned,
//! and is checked against the HLIR interpreter (lumen_compiler::interpret), which never sees a
//! view or a fused op; the LLIR reference interpreter must agree with it to f64 rounding.

use std::collections::BTreeMap;

use lumen_compiler::interpret::eval_hlir;
use lumen_compiler::{CompileOptions, DType, Graph, Tensor};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};
use proptest::prelude::*;

/// SplitMix64: every choice of a program comes from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
}

/// A random program: its graph, the tensors to feed it, and the same values for the HLIR
/// interpreter. Also which op kinds it used, for the coverage check.
struct Case {
    graph: Graph,
    weights: Tensors,
    inputs: Tensors,
    leaves: BTreeMap<String, Vec<f64>>,
    kinds: Vec<&'static str>,
}

fn leaf(cx: &mut Graph, rng: &mut Rng, case: &mut Case, shape: Vec<usize>) -> Tensor {
    let name = format!("a{}", case.leaves.len());
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    case.leaves.insert(name.clone(), data.iter().map(|&v| f64::from(v)).collect());
    let t = HostTensor::new(shape.clone(), data).unwrap();
    if rng.below(2) == 0 {
        case.inputs.insert(name.clone(), t);
        cx.input(name, shape)
    } else {
        case.weights.insert(name.clone(), t);
        cx.weight(name, shape)
    }
}

fn build(seed: u64) -> Case {
    let mut rng = Rng(seed);
    let mut cx = Graph::new();
    let mut case = Case {
        graph: cx.clone(),
        weights: Tensors::new(),
        inputs: Tensors::new(),
        leaves: BTreeMap::new(),
        kinds: Vec::new(),
    };
    // Every tensor broadcasts to one shape S, so any two combine.
    let rank = 1 + rng.below(4);
    let full: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
    let mut leaves: Vec<Tensor> = Vec::new();
    for _ in 0..2 + rng.below(2) {
        let drop = rng.below(rank);
        let shape: Vec<usize> =
            full[drop..].iter().map(|&d| if rng.below(3) == 0 { 1 } else { d }).collect();
        leaves.push(leaf(&mut cx, &mut rng, &mut case, shape));
    }
    let mut pool: Vec<Tensor> = leaves.clone();
    let mut extra_outputs: Vec<Tensor> = Vec::new();
    let steps = 2 + rng.below(8);
    for _ in 0..steps {
        let x = pool[rng.below(pool.len())].clone();
        let y = pool[rng.below(pool.len())].clone();
        let shape = x.shape().unwrap();
        let r = shape.len();
        let kind = rng.below(11);
        let t = match kind {
            0 => {
                case.kinds.push("unary");
                match rng.below(11) {
                    0 => -&x,
                    1 => x.tanh().exp(),
                    2 => (&x * &x + 0.5).log(),
                    3 => (&x * &x + 0.5).sqrt(),
                    4 => (&x * &x + 0.5).recip(),
                    5 => x.tanh(),
                    6 => x.erf(),
                    7 => x.relu(),
                    8 => x.gelu(),
                    9 => x.contiguous(),
                    _ => 1.0 - &x,
                }
            }
            1 => {
                case.kinds.push("binary");
                match rng.below(5) {
                    0 => &x + &y,
                    1 => &x - &y,
                    2 => &x * &y,
                    3 => &x / (&y * &y + 0.5),
                    _ => x.maximum(&y),
                }
            }
            2 => {
                // Comparisons of leaves only: exact in f32 and f64 alike.
                case.kinds.push("select");
                let (a, b) = (&leaves[rng.below(leaves.len())], &leaves[rng.below(leaves.len())]);
                let cond = if rng.below(2) == 0 { a.less_than(b) } else { a.equal(a.maximum(b)) };
                cond.select(&x, &y)
            }
            3 if r > 0 => {
                case.kinds.push("reduce");
                let axis = rng.below(r) as isize;
                if rng.below(2) == 0 { x.sum(axis, true) * 0.25 } else { x.max(axis, true) }
            }
            4 if r > 1 => {
                case.kinds.push("permute");
                let mut perm: Vec<isize> = (0..r as isize).collect();
                perm.rotate_left(1 + rng.below(r - 1));
                let mut inverse = vec![0isize; r];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p as usize] = i as isize;
                }
                let moved = x.permute(&perm);
                let n: usize = shape.iter().product();
                // A flat reshape of a permuted view needs a copy; sometimes make one.
                let moved = if rng.below(2) == 0 {
                    let s = moved.shape().unwrap();
                    moved.reshape([n]).exp().reshape(s)
                } else {
                    moved.tanh()
                };
                moved.permute(&inverse)
            }
            5 if shape.iter().any(|&d| d >= 2) => {
                case.kinds.push("slice_concat");
                let axis = shape.iter().position(|&d| d >= 2).unwrap_or(0);
                let cut = 1 + rng.below(shape[axis] - 1);
                let (lo, hi) =
                    (x.slice(axis as isize, 0, cut), x.slice(axis as isize, cut, shape[axis]));
                // The halves swapped: the same shape as x, so it still broadcasts to S.
                cx.concat(&[&hi.relu(), &lo], axis as isize)
            }
            6 => {
                case.kinds.push("expand");
                x.expand(full.clone()) * 0.5
            }
            7 if r >= 2 => {
                case.kinds.push("matmul");
                x.matmul(x.transpose(-1, -2)).matmul(&x) * 0.1
            }
            8 if r >= 1 => {
                case.kinds.push("composite");
                let last = shape[r - 1];
                match rng.below(5) {
                    0 => x.softmax(-1),
                    1 => x.log_softmax((rng.below(r)) as isize),
                    2 => {
                        let g = leaf(&mut cx, &mut rng, &mut case, vec![last]);
                        let b = leaf(&mut cx, &mut rng, &mut case, vec![last]);
                        x.layer_norm(&g, &b, 1e-5)
                    }
                    3 => x.gelu_erf(),
                    _ => x.sigmoid(),
                }
            }
            9 if r >= 1 => {
                case.kinds.push("gather");
                let dim = shape[r - 1];
                let vocab = 2 + rng.below(4);
                let table = leaf(&mut cx, &mut rng, &mut case, vec![vocab, dim]);
                let count = 1 + rng.below(4);
                let ids: Vec<i64> = (0..count).map(|_| rng.below(vocab) as i64).collect();
                let name = format!("ids{}", case.leaves.len());
                case.leaves.insert(name.clone(), ids.iter().map(|&i| i as f64).collect());
                case.inputs.insert(name.clone(), HostTensor::from_i64([count], ids).unwrap());
                let ids = cx.input_typed(name, [count], DType::I64);
                let n: usize = shape.iter().product();
                let scale = x.tanh().reshape([n]).sum(0, true);
                extra_outputs.push(table.gather(&ids) * scale);
                continue;
            }
            _ => {
                case.kinds.push("binary");
                &x + 1.0
            }
        };
        pool.push(t);
    }
    let last = pool.last().cloned().unwrap();
    let y = if pool.len() > leaves.len() { last } else { pool[0].relu() };
    y.output("y");
    for (i, t) in extra_outputs.iter().enumerate() {
        t.output(format!("g{i}"));
    }
    case.graph = cx;
    case
}

fn close(got: f32, want: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.abs() > f64::from(f32::MAX) {
        return got.is_infinite() && (got > 0.0) == (want > 0.0);
    }
    (f64::from(got) - want).abs() <= 1e-4 + 1e-3 * want.abs()
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let case = build(seed);
    if let Some(e) = case.graph.recorded_error() {
        return Err(TestCaseError::fail(format!(
            "seed {seed}: the generator built a bad program: {e}"
        )));
    }
    let hlir = case.graph.hlir();
    let want = eval_hlir(&hlir, &case.leaves).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    for fuse in [false, true] {
        let options = CompileOptions { fuse, ..Default::default() };
        let program = case
            .graph
            .compile(&options)
            .map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        let reference = execute_f64(&program.llir, &case.weights, &case.inputs).unwrap();
        let mut runs = Vec::new();
        for memory_debug in [false, true] {
            let rt = CpuRuntime::new(CpuOptions { memory_debug, ..Default::default() });
            let mut prepared = rt.prepare(&program, &case.weights).unwrap();
            runs.push(prepared.execute(&case.inputs).unwrap());
        }
        prop_assert_eq!(&runs[0], &runs[1], "seed {}: NaN poisoning changed outputs", seed);
        for (name, w) in &want {
            let got = &runs[0][name];
            prop_assert_eq!(got.shape(), w.shape.as_slice(), "seed {} {}", seed, name);
            for (i, (&g, &x)) in got.data().iter().zip(&w.data).enumerate() {
                prop_assert!(
                    close(g, x),
                    "seed {} fuse={} {}[{}]: cpu {} vs interpreter {}\n{}",
                    seed,
                    fuse,
                    name,
                    i,
                    g,
                    x,
                    lumen_compiler::dump::llir_text(&program)
                );
                let r = reference[name].data[i];
                prop_assert!(
                    (r - x).abs() <= 1e-9 * (1.0 + x.abs()) || (r.is_nan() && x.is_nan()),
                    "seed {} fuse={} {}[{}]: LLIR reference {} vs HLIR interpreter {}",
                    seed,
                    fuse,
                    name,
                    i,
                    r,
                    x
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_over_every_op_match_the_hlir_interpreter(seed in any::<u64>()) {
        check(seed)?;
    }
}

/// The generator reaches every op kind within a few seeds (so the property above covers them).
#[test]
fn the_generator_covers_every_op_kind() {
    let mut seen: Vec<&str> = (0..200u64).flat_map(|s| build(s).kinds).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "binary",
            "composite",
            "expand",
            "gather",
            "matmul",
            "permute",
            "reduce",
            "select",
            "slice_concat",
            "unary"
        ]
    );
    for seed in 0..24 {
        check(seed).unwrap();
    }
}

#[test]
fn a_gather_id_out_of_range_is_a_runtime_error_naming_the_tensor_and_the_id() {
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("token_ids", [3], DType::I64);
    table.gather(&ids).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let weights: Tensors = [(
        "table".to_string(),
        HostTensor::new([4, 2], (0..8).map(|v| v as f32).collect()).unwrap(),
    )]
    .into();
    let rt = CpuRuntime::new(CpuOptions::default());
    let mut prepared = rt.prepare(&program, &weights).unwrap();
    let ok: Tensors =
        [("token_ids".to_string(), HostTensor::from_i64([3], vec![3, 0, 3]).unwrap())].into();
    assert_eq!(prepared.execute(&ok).unwrap()["y"].data(), [6.0, 7.0, 0.0, 1.0, 6.0, 7.0]);
    for bad in [4i64, -1, i64::MAX] {
        let inputs: Tensors =
            [("token_ids".to_string(), HostTensor::from_i64([3], vec![0, bad, 1]).unwrap())].into();
        let err = prepared.execute(&inputs).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "gather: id {bad} at position 1 of `token_ids` is out of range for a table of 4 rows"
            )
        );
        // The f64 reference refuses it too.
        assert!(execute_f64(&program.llir, &weights, &inputs).is_err());
    }
    // f32 given where the program declares i64 ids: refused by dtype, before any kernel.
    let wrong: Tensors =
        [("token_ids".to_string(), HostTensor::new([3], vec![0.0; 3]).unwrap())].into();
    assert_eq!(
        prepared.execute(&wrong).unwrap_err().to_string(),
        "input `token_ids` has dtype f32, the program expects i64"
    );
    // i32 ids work the same way.
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("ids", [2], DType::I32);
    table.gather(&ids).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let mut prepared = rt.prepare(&program, &weights).unwrap();
    let inputs: Tensors =
        [("ids".to_string(), HostTensor::from_i32([2], vec![1, 2]).unwrap())].into();
    assert_eq!(prepared.execute(&inputs).unwrap()["y"].data(), [2.0, 3.0, 4.0, 5.0]);
}

/// Programs a first-time user found broken, each against the HLIR interpreter: a concat
/// whose output is taken over through a reshape or a size-1 transpose, products over an empty
/// batch, and a long sum.
#[test]
fn edge_cases_match_the_interpreter() {
    let ramp = |shape: &[usize]| -> (HostTensor, Vec<f64>) {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.25 - 1.0).collect();
        let wide = data.iter().map(|&v| f64::from(v)).collect();
        (HostTensor::new(shape.to_vec(), data).unwrap(), wide)
    };
    // Each program with its leaves' names and shapes.
    type Program = (Graph, Vec<(&'static str, Vec<usize>)>);
    let programs: Vec<Program> = vec![
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [2, 3]);
            cx.concat(&[&x, &x], 0).reshape([12]).output("a");
            (cx, vec![("x", vec![2, 3])])
        },
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [1, 3, 2, 1]);
            let c = cx.concat(&[&x, &x], 3);
            c.transpose(0, 1).output("o1");
            c.output("o2");
            (cx, vec![("x", vec![1, 3, 2, 1])])
        },
        {
            let mut cx = Graph::new();
            let a = cx.input("a", [0, 3, 2]);
            let b = cx.input("b", [0, 2, 4]);
            a.matmul(&b).output("o");
            a.matmul(a.transpose(-1, -2)).output("p");
            (cx, vec![("a", vec![0, 3, 2]), ("b", vec![0, 2, 4])])
        },
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [3, 40_000]);
            x.mean(-1, false).output("m");
            x.sum(0, true).output("s");
            (cx, vec![("x", vec![3, 40_000])])
        },
    ];
    for (graph, leaves) in programs {
        let mut inputs = Tensors::new();
        let mut wide = BTreeMap::new();
        for (name, shape) in leaves {
            let (t, w) = ramp(&shape);
            inputs.insert(name.to_string(), t);
            wide.insert(name.to_string(), w);
        }
        let want = eval_hlir(&graph.hlir(), &wide).unwrap();
        for fuse in [false, true] {
            let program = graph.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
            let rt = CpuRuntime::new(CpuOptions { memory_debug: true, ..Default::default() });
            let out = rt.prepare(&program, &Tensors::new()).unwrap().execute(&inputs).unwrap();
            for (name, w) in &want {
                assert_eq!(out[name].shape(), w.shape.as_slice(), "{name}");
                for (g, x) in out[name].data().iter().zip(&w.data) {
                    // Sums of 40,000 elements: f64 accumulation leaves only f32 rounding.
                    assert!(
                        (f64::from(*g) - x).abs() <= 1e-6 * (1.0 + x.abs()),
                        "{name}: {g} vs {x}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_gather_error_names_the_position_in_the_ids_as_declared() {
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("ids", [2, 3], DType::I64);
    table.gather(ids.transpose(0, 1)).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let weights: Tensors =
        [("table".to_string(), HostTensor::new([4, 2], vec![0.0; 8]).unwrap())].into();
    let inputs: Tensors =
        [("ids".to_string(), HostTensor::from_i64([2, 3], vec![0, 9, 1, 2, 3, 0]).unwrap())].into();
    let mut prepared = CpuRuntime::default().prepare(&program, &weights).unwrap();
    let err = prepared.execute(&inputs).unwrap_err().to_string();
    assert_eq!(err, "gather: id 9 at position 1 of `ids` is out of range for a table of 4 rows");
    let err = execute_f64(&program.llir, &weights, &inputs).unwrap_err().to_string();
    assert_eq!(err, "gather: id 9 at position 1 of `ids` is out of range for a table of 4 rows");
}
