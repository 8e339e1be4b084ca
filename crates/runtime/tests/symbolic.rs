//! Symbolic dimensions on the CPU runtime: a program compiled once at the bound of `seq`
//! runs at every value `1..=bound`, and gives what the same program compiled at that value
//! gives (bit for bit: the live LLIR has the fixed program's sizes and views), fused and
//! unfused, planned, unshared and NaN-poisoned; then the errors of a bad binding and of ops
//! that would change a symbol's meaning.

use lumen_compiler::dump::{llir_text, plan_text};
use lumen_compiler::{
    BindError, CompileError, CompileOptions, CompiledProgram, DType, Dim, Graph, HostTensor,
};
use lumen_runtime::layout::Placement;
use lumen_runtime::{CpuOptions, CpuRuntime, Runtime, RuntimeError, Tensors};

const BOUND: usize = 8;
const D: usize = 8;
const VOCAB: usize = 10;

/// A small attention block over `seq` tokens: embedding gather, two heads with a causal mask
/// input, softmax and products over `seq`, a fused bias + relu, reductions and an argmax over
/// `seq`, a permute + reshape that needs a copy.
fn program(seq: Option<usize>) -> Graph {
    let mut cx = Graph::new();
    let s: Dim = match seq {
        Some(n) => Dim::Fixed(n),
        None => cx.symbol("seq", BOUND).into(),
    };
    let x = cx.input_dims("x", [s, Dim::Fixed(D)], DType::F32);
    let ids = cx.input_dims("ids", [s], DType::I32);
    let mask = cx.input_dims("mask", [s, s], DType::F32);
    let emb = cx.weight("emb", [VOCAB, D]);
    let [wq, wk, wv, wo] = ["wq", "wk", "wv", "wo"].map(|n| cx.weight(n, [D, D]));
    let b = cx.weight("b", [D]);
    let n = s.bound();
    let h = &x + emb.gather(&ids);
    let heads = |w: &lumen_compiler::Tensor| h.matmul(w).reshape([n, 2, 4]).permute(&[1, 0, 2]);
    let (q, k, v) = (heads(&wq), heads(&wk), heads(&wv));
    let scores = q.matmul(k.transpose(-1, -2)) * 0.5 + &mask;
    let ctx = scores.softmax(-1).matmul(&v).permute(&[1, 0, 2]).reshape([n, D]);
    (ctx.matmul(&wo) + &b).relu().output("y");
    h.sum(0, false).output("colsum");
    h.max(1, false).output("rowmax");
    h.argmax(0, false, false).output("first_max");
    cx
}

fn weights() -> Tensors {
    let fill = |shape: &[usize], seed: u32| {
        let len: usize = shape.iter().product();
        let data = (0..len)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        HostTensor::new(shape.to_vec(), data).unwrap()
    };
    let mut w = Tensors::new();
    w.insert("emb".into(), fill(&[VOCAB, D], 1));
    for (i, n) in ["wq", "wk", "wv", "wo"].iter().enumerate() {
        w.insert(n.to_string(), fill(&[D, D], 10 + i as u32));
    }
    w.insert("b".into(), fill(&[D], 7));
    w
}

fn inputs(n: usize) -> Tensors {
    let x: Vec<f32> = (0..n * D).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
    let ids: Vec<i32> = (0..n).map(|i| (i * 3 % VOCAB) as i32).collect();
    let mask: Vec<f32> =
        (0..n * n).map(|i| if i % n <= i / n { 0.0 } else { f32::NEG_INFINITY }).collect();
    let mut t = Tensors::new();
    t.insert("x".into(), HostTensor::new([n, D], x).unwrap());
    t.insert("ids".into(), HostTensor::from_i32([n], ids).unwrap());
    t.insert("mask".into(), HostTensor::new([n, n], mask).unwrap());
    t
}

fn compile(g: &Graph, fuse: bool) -> CompiledProgram {
    g.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap()
}

fn assert_same(got: &Tensors, want: &Tensors, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (name, w) in want {
        let g = &got[name];
        assert_eq!(g.shape(), w.shape(), "{what}: {name} shape");
        assert_eq!(g.dtype(), w.dtype(), "{what}: {name} dtype");
        let same = g.words().iter().zip(w.words().iter()).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{what}: {name}: {:?} vs {:?}", g.words(), w.words());
    }
}

#[test]
fn one_compile_runs_every_value_as_the_program_compiled_at_it() {
    let weights = weights();
    let options = [
        CpuOptions::default(),
        CpuOptions { placement: Placement::NoReuse, ..CpuOptions::default() },
        CpuOptions { memory_debug: true, ..CpuOptions::default() },
        CpuOptions { threads: Some(1), unpacked_weights: true, ..CpuOptions::default() },
    ];
    for fuse in [false, true] {
        let symbolic = compile(&program(None), fuse);
        for opts in &options {
            let rt = CpuRuntime::new(opts.clone());
            let mut prepared = rt.prepare(&symbolic, &weights).unwrap();
            // Up, down and repeated: steps are rebuilt or reused per binding.
            for n in [3, 1, BOUND, 3, 5, 1] {
                let got = prepared.execute(&inputs(n)).unwrap();
                let fixed = compile(&program(Some(n)), fuse);
                let want = rt.prepare(&fixed, &weights).unwrap().execute(&inputs(n)).unwrap();
                assert_same(&got, &want, &format!("fuse={fuse} {opts:?} seq={n}"));
                assert_eq!(got["y"].shape(), [n, D]);
                assert_eq!(got["rowmax"].shape(), [n]);
            }
        }
    }
}

#[test]
fn the_slab_is_planned_once_at_the_bound() {
    let symbolic = compile(&program(None), true);
    let at_bound = compile(&program(Some(BOUND)), true);
    assert_eq!(symbolic.figures.slab_bytes, at_bound.figures.slab_bytes);
    assert_eq!(symbolic.plan.offsets, at_bound.plan.offsets);
    let text = llir_text(&symbolic);
    assert!(text.contains("symbol seq <= 8\n"), "{text}");
    assert!(text.contains("buffer x f32[seq<=8, 8] input"), "{text}");
    assert!(text.contains("buffer mask f32[seq<=8, seq<=8] input"), "{text}");
    assert!(text.contains("buffer colsum f32[8] output"), "{text}");
    // The fixed program dumps as it always did: no symbol line.
    assert!(!llir_text(&at_bound).contains("symbol"));
    // The FLOP count as a polynomial in seq: at every value, the count of the program
    // compiled at that value.
    let poly = symbolic.llir.flops_polynomial().unwrap();
    for n in 1..=BOUND {
        let fixed = compile(&program(Some(n)), true);
        assert_eq!(poly.value(&[n]), Some(fixed.figures.flops), "seq={n}: {poly}");
    }
    let plan = plan_text(&symbolic);
    assert!(plan.contains(&format!("\nflops_expr   {poly}\n")), "{plan}");
    assert!(!plan_text(&at_bound).contains("flops_expr"));
}

#[test]
fn bad_bindings_are_errors_naming_the_symbol() {
    let symbolic = compile(&program(None), false);
    let rt = CpuRuntime::new(CpuOptions::default());
    let mut prepared = rt.prepare(&symbolic, &weights()).unwrap();
    let err = prepared.execute(&inputs(BOUND + 1)).unwrap_err();
    assert!(
        matches!(&err, RuntimeError::Bind(BindError::OutOfRange { name, value: 9, bound: 8 }) if name == "seq"),
        "{err}"
    );
    assert_eq!(err.to_string(), "symbol `seq` = 9 is outside 1..=8");
    let mut mixed = inputs(4);
    mixed.insert("mask".into(), inputs(3).swap_remove("mask").unwrap());
    let err = prepared.execute(&mixed).unwrap_err();
    assert!(matches!(err, RuntimeError::Bind(BindError::Conflict { .. })), "{err}");
    let mut wide = inputs(4);
    wide.insert("x".into(), HostTensor::zeros([4, D + 1]).unwrap());
    let err = prepared.execute(&wide).unwrap_err();
    assert_eq!(err.to_string(), "input `x` is [4, 9] but is declared [seq<=8, 8]");
    // A good execute after the errors still gives the right answer.
    let want = compile(&program(Some(2)), false);
    let want = rt.prepare(&want, &weights()).unwrap().execute(&inputs(2)).unwrap();
    assert_same(&prepared.execute(&inputs(2)).unwrap(), &want, "after errors");
}

/// A one-input program over `x [seq<=4, 6]` built by `f`, compiled unfused.
fn compile_with(
    f: impl Fn(&mut Graph, lumen_compiler::Tensor),
) -> Result<CompiledProgram, CompileError> {
    let mut cx = Graph::new();
    let seq = cx.symbol("seq", 4);
    let x = cx.input_dims("x", [seq.into(), Dim::Fixed(6)], DType::F32);
    f(&mut cx, x);
    cx.compile(&CompileOptions::default())
}

#[test]
fn ops_that_would_change_a_symbol_are_refused_at_the_users_line() {
    let refused = |f: &dyn Fn(&mut Graph, lumen_compiler::Tensor), what: &str| {
        let err = compile_with(f).unwrap_err();
        assert!(matches!(err, CompileError::Symbolic { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(what) && text.contains("symbolic.rs:"), "{text}");
    };
    refused(&|_, x| drop(x.slice(0, 1, 3).output("y")), "slices symbolic axis `seq`");
    refused(
        &|cx, x| drop(cx.concat(&[x.clone(), x], 0).output("y")),
        "joins along symbolic axis 0",
    );
    refused(&|_, x| drop(x.reshape([24]).output("y")), "merges or splits symbolic axis `seq`");
    refused(
        &|cx, x| {
            let w = cx.weight("w", [4, 6]);
            drop((x + w).output("y"))
        },
        "axis 0: symbol `seq` against a fixed axis",
    );
    refused(&|_, x| drop(x.top_k(0, 2, true).output("y")), "k of a live length");
    // Allowed: reductions, permutes, reshapes that keep the axis, broadcasting a length 1.
    let ok = compile_with(|cx, x| {
        let one = cx.weight("one", [1, 3]);
        (x.reshape([4, 2, 3]).permute(&[1, 0, 2]).sum(1, false) + one).output("y");
    });
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn a_bad_symbol_declaration_is_a_compile_error() {
    let mut cx = Graph::new();
    let seq = cx.symbol("seq", 0);
    let x = cx.input_dims("x", [seq.into()], DType::F32);
    x.relu().output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err();
    assert!(err.to_string().contains("symbol name \"seq\" is given a bound of 0"), "{err}");
    let mut cx = Graph::new();
    let a = cx.symbol("n", 3);
    let _ = cx.symbol("n", 4);
    cx.input_dims("x", [a.into()], DType::F32).relu().output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err();
    assert!(err.to_string().contains("symbol name \"n\" is already used"), "{err}");
    // A symbol no input carries (only a state, or nothing) could never be bound.
    for state_only in [false, true] {
        let mut cx = Graph::new();
        let seq = cx.symbol("seq", 4);
        let ghost = cx.symbol("ghost", 4);
        let x = cx.input_dims("x", [seq.into(), Dim::Fixed(2)], DType::F32);
        if state_only {
            let cache = cx.state("cache", [ghost.into(), Dim::Fixed(2)]);
            cache.append_rows(&x).sum(0, false).output("s");
        }
        x.relu().output("y");
        let err = cx.compile(&CompileOptions::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`ghost` appears in no input's shape") && text.contains("symbolic.rs:"),
            "{text}"
        );
    }
}

#[test]
fn binding_and_state_misuse_are_one_line_errors() {
    // Two symbols of one bound are still two symbols.
    let err = compile_with(|cx, x| {
        let u = cx.symbol("u", 4);
        let y = cx.input_dims("y", [u.into(), Dim::Fixed(6)], DType::F32);
        drop((x + y).output("z"));
    })
    .unwrap_err();
    assert!(err.to_string().contains("axis 0: symbol `seq` against symbol `u`"), "{err}");
    // A bias over symbolic columns, fused or not.
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let s = cx.symbol("s", 5);
        let a = cx.input("a", [3, 4]);
        let b = cx.input_dims("b", [Dim::Fixed(4), s.into()], DType::F32);
        let c = cx.input_dims("c", [s.into()], DType::F32);
        (a.matmul(b) + c).relu().output("y");
        let p = compile(&cx, fuse);
        let mut prepared = CpuRuntime::default().prepare(&p, &Tensors::new()).unwrap();
        let mut inputs = Tensors::new();
        inputs.insert("a".into(), HostTensor::new([3, 4], vec![1.0; 12]).unwrap());
        inputs.insert("b".into(), HostTensor::new([4, 2], vec![0.5; 8]).unwrap());
        inputs.insert("c".into(), HostTensor::new([2], vec![-1.0, -3.0]).unwrap());
        let y = prepared.execute(&inputs).unwrap().swap_remove("y").unwrap();
        assert_eq!(y.data(), [1.0, 0.0, 1.0, 0.0, 1.0, 0.0], "fuse {fuse}");
        // A missing input is named as missing, not as an unbound symbol.
        inputs.swap_remove("b");
        let err = prepared.execute(&inputs).unwrap_err();
        assert!(err.to_string().starts_with("missing input `b`"), "{err}");
    }
    // An append of more rows than the state has live.
    let program = compile(&cache_program(), false);
    let mut prepared = CpuRuntime::default().prepare(&program, &Tensors::new()).unwrap();
    let mut inputs = Tensors::new();
    inputs.insert("x".into(), HostTensor::zeros([3, 3]).unwrap());
    inputs.insert("mask".into(), HostTensor::zeros([3, 2]).unwrap());
    let err = prepared.execute(&inputs).unwrap_err();
    assert_eq!(
        err.to_string(),
        "append_rows to `cache` writes 3 rows but the state has 2 live rows (`total` = 2)"
    );
    // An append nothing reads would be dropped: refused, fused or not.
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let _ = cx.state("cache", [Dim::Fixed(4), Dim::Fixed(3)]).append_rows(&x);
        x.relu().output("y");
        let err = cx.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap_err();
        assert!(
            err.to_string().contains("append_rows to state `cache` reaches no output"),
            "{err}"
        );
        // A state declared and never appended to: it would have no buffer to keep.
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let _ = cx.state("unused", [Dim::Fixed(4), Dim::Fixed(3)]);
        x.relu().output("y");
        let err = cx.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap_err();
        assert!(
            err.to_string()
                .contains("state `unused` is declared but no output reads an append_rows"),
            "{err}"
        );
    }
}

/// A state `cache [total<=8, 3]` appended to by each execute: `x [seq<=4, 3]` doubled lands at
/// rows `total - seq .. total`, the rows before kept from the earlier executes.
fn cache_program() -> Graph {
    let mut cx = Graph::new();
    let seq = cx.symbol("seq", 4);
    let total = cx.symbol("total", 8);
    let x = cx.input_dims("x", [seq.into(), Dim::Fixed(3)], DType::F32);
    let mask = cx.input_dims("mask", [seq.into(), total.into()], DType::F32);
    let cache = cx.state("cache", [total.into(), Dim::Fixed(3)]);
    let cache = cache.append_rows(&x * 2.0);
    cache.sum(0, false).output("colsum");
    (cache.sum(1, false) + mask.sum(0, false)).output("rows");
    cx
}

#[test]
fn a_state_keeps_its_rows_and_each_execute_appends_at_its_live_end() {
    let weights = Tensors::new();
    for (fuse, opts) in [
        (false, CpuOptions::default()),
        (true, CpuOptions::default()),
        (false, CpuOptions { memory_debug: true, ..CpuOptions::default() }),
        (false, CpuOptions { placement: Placement::NoReuse, ..CpuOptions::default() }),
    ] {
        let program = compile(&cache_program(), fuse);
        let text = llir_text(&program);
        assert!(text.contains("buffer cache f32[total<=8, 3] state"), "{text}");
        assert!(text.contains("append_rows len=12"), "{text}");
        let mut prepared = CpuRuntime::new(opts.clone()).prepare(&program, &weights).unwrap();
        let mut rows: Vec<[f32; 3]> = Vec::new();
        // Prefill 3 rows, then 1 at a time, then 4 more: total 3, 4, 5, 6, 10 is past 8.
        for (step, n) in [3usize, 1, 1, 1].into_iter().enumerate() {
            let x: Vec<f32> = (0..n * 3).map(|i| (step * 10 + i) as f32).collect();
            rows.extend(x.chunks(3).map(|r| [r[0] * 2.0, r[1] * 2.0, r[2] * 2.0]));
            let total = rows.len();
            let mut inputs = Tensors::new();
            inputs.insert("x".into(), HostTensor::new([n, 3], x).unwrap());
            inputs.insert("mask".into(), HostTensor::zeros([n, total]).unwrap());
            let out = prepared.execute(&inputs).unwrap();
            let colsum: Vec<f32> = (0..3).map(|j| rows.iter().map(|r| r[j]).sum()).collect();
            assert_eq!(out["colsum"].data(), colsum, "{opts:?} fuse={fuse} step {step}");
            let per_row: Vec<f32> = rows.iter().map(|r| r.iter().sum()).collect();
            assert_eq!(out["rows"].data(), per_row);
            let state = prepared.state("cache").unwrap();
            assert_eq!(state.shape(), [8, 3]);
            assert_eq!(&state.data()[..total * 3], rows.concat().as_slice());
        }
        // Four more rows would need total 10, past the bound.
        let mut inputs = Tensors::new();
        inputs.insert("x".into(), HostTensor::zeros([4, 3]).unwrap());
        inputs.insert("mask".into(), HostTensor::zeros([4, 10]).unwrap());
        let err = prepared.execute(&inputs).unwrap_err();
        assert_eq!(err.to_string(), "symbol `total` = 10 is outside 1..=8");
        assert!(prepared.state("x").is_none());
    }
}

#[test]
fn a_state_is_read_only_through_its_append() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let cache = cx.state("cache", [Dim::Fixed(4), Dim::Fixed(3)]);
    cache.append_rows(&x).sum(0, false).output("a");
    cache.sum(0, false).output("b");
    let err = cx.compile(&CompileOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("state `cache` is read other than by one append_rows"),
        "{err}"
    );
    // Without symbols an append writes the last rows: 2..4 of 4.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let cache = cx.state("cache", [Dim::Fixed(4), Dim::Fixed(3)]);
    cache.append_rows(&x).output("c");
    let p = compile(&cx, false);
    let mut prepared = CpuRuntime::default().prepare(&p, &Tensors::new()).unwrap();
    let mut inputs = Tensors::new();
    inputs.insert("x".into(), HostTensor::new([2, 3], vec![1.0; 6]).unwrap());
    let out = prepared.execute(&inputs).unwrap();
    assert_eq!(out["c"].data(), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
}

/// One op of a random program over `x [seq, d]` (the last tensor, `[seq, width]`).
#[derive(Debug, Clone, Copy)]
enum Step {
    /// relu, exp of a scaled value, tanh.
    Unary(u8),
    /// A weight `[width]` added along the rows.
    Bias,
    /// A product with a weight `[width, 3]`.
    Project,
    /// Softmax over the rows (the symbolic axis) or over the columns.
    Softmax(bool),
    /// Attention over itself: `softmax(t t^T) t`, `[seq, seq]` scores.
    SelfAttend,
    /// Plus its column sums (a reduction over the symbolic axis, broadcast back).
    AddColumnSums,
    /// Split the columns in two heads, permute heads first, and back: a copy.
    Heads,
}

fn random_program(seq: Option<usize>, bound: usize, d: usize, steps: &[Step]) -> Graph {
    let mut cx = Graph::new();
    let s: Dim = match seq {
        Some(n) => Dim::Fixed(n),
        None => cx.symbol("seq", bound).into(),
    };
    let n = s.bound();
    let mut t = cx.input_dims("x", [s, Dim::Fixed(d)], DType::F32);
    let mut width = d;
    for (i, step) in steps.iter().enumerate() {
        t = match *step {
            Step::Unary(0) => t.relu(),
            Step::Unary(1) => (&t * 0.25).exp(),
            Step::Unary(_) => t.tanh(),
            Step::Bias => &t + cx.weight(format!("b{i}"), [width]),
            Step::Project => {
                let w = cx.weight(format!("w{i}"), [width, 3]);
                width = 3;
                t.matmul(w)
            }
            Step::Softmax(rows) => t.softmax(if rows { 0 } else { -1 }),
            Step::SelfAttend => t.matmul(t.transpose(0, 1)).softmax(-1).matmul(&t),
            Step::AddColumnSums => &t + t.sum(0, true),
            Step::Heads if width % 2 == 0 => {
                let h = t.reshape([n, 2, width / 2]).permute(&[1, 0, 2]);
                h.permute(&[1, 0, 2]).reshape([n, width])
            }
            Step::Heads => t.sigmoid(),
        };
    }
    t.output("y");
    t.sum(0, false).output("colsum");
    cx
}

fn random_weights(d: usize, steps: &[Step]) -> Tensors {
    let mut w = Tensors::new();
    let mut width = d;
    for (i, step) in steps.iter().enumerate() {
        let vals =
            |len: usize| (0..len).map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.4).collect();
        match step {
            Step::Bias => {
                w.insert(format!("b{i}"), HostTensor::new([width], vals(width)).unwrap());
            }
            Step::Project => {
                w.insert(format!("w{i}"), HostTensor::new([width, 3], vals(width * 3)).unwrap());
                width = 3;
            }
            _ => {}
        }
    }
    w
}

fn step_strategy() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (0u8..3).prop_map(Step::Unary),
        Just(Step::Bias),
        Just(Step::Project),
        any::<bool>().prop_map(Step::Softmax),
        Just(Step::SelfAttend),
        Just(Step::AddColumnSums),
        Just(Step::Heads),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any random program of these ops, compiled once at the bound, gives at every value the
    /// bits of the same program compiled at that value, fused or not, over a sequence of
    /// executes that moves the value up and down.
    #[test]
    fn a_random_program_bound_at_n_is_the_program_compiled_at_n(
        steps in proptest::collection::vec(step_strategy(), 1..5),
        d in 2usize..6,
        bound in 2usize..7,
        fuse in proptest::prelude::any::<bool>(),
        values in proptest::collection::vec(1usize..7, 1..4),
    ) {
        let weights = random_weights(d, &steps);
        let symbolic = compile(&random_program(None, bound, d, &steps), fuse);
        let rt = CpuRuntime::new(CpuOptions { threads: Some(1), ..CpuOptions::default() });
        let mut prepared = rt.prepare(&symbolic, &weights).unwrap();
        for n in values.into_iter().map(|v| v.min(bound)) {
            let x: Vec<f32> = (0..n * d).map(|i| ((i * 5) % 9) as f32 / 4.0 - 1.0).collect();
            let mut inputs = Tensors::new();
            inputs.insert("x".into(), HostTensor::new([n, d], x).unwrap());
            let got = prepared.execute(&inputs).unwrap();
            let fixed = compile(&random_program(Some(n), bound, d, &steps), fuse);
            let want = rt.prepare(&fixed, &weights).unwrap().execute(&inputs).unwrap();
            assert_same(&got, &want, &format!("{steps:?} d={d} bound={bound} n={n}"));
        }
    }
}

/// A product with one output column (the GEMV paths pick by strides) and one with one row:
/// the same bits as the program compiled at each value.
#[test]
fn one_column_and_one_row_products_keep_their_bits() {
    for (rows, cols) in [(1, 1), (2, 1), (5, 1), (1, 3)] {
        let build = |seq: Option<usize>| {
            let mut cx = Graph::new();
            let s: Dim = match seq {
                Some(n) => Dim::Fixed(n),
                None => cx.symbol("s", 6).into(),
            };
            let a = cx.input_dims("a", [Dim::Fixed(rows), s], DType::F32);
            let b = cx.input_dims("b", [s, Dim::Fixed(cols)], DType::F32);
            a.matmul(b).output("y");
            cx
        };
        let symbolic = compile(&build(None), true);
        let rt = CpuRuntime::default();
        let mut prepared = rt.prepare(&symbolic, &Tensors::new()).unwrap();
        for n in [3, 6, 1, 4] {
            let mut inputs = Tensors::new();
            let a: Vec<f32> = (0..rows * n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n * cols).map(|i| (i as f32 * 0.71).cos()).collect();
            inputs.insert("a".into(), HostTensor::new([rows, n], a).unwrap());
            inputs.insert("b".into(), HostTensor::new([n, cols], b).unwrap());
            let got = prepared.execute(&inputs).unwrap();
            let fixed = compile(&build(Some(n)), true);
            let want = rt.prepare(&fixed, &Tensors::new()).unwrap().execute(&inputs).unwrap();
            assert_same(&got, &want, &format!("[{rows}, s] x [s, {cols}] at s = {n}"));
        }
    }
}
