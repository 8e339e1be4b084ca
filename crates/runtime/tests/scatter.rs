//! ScatterElements on the CPU runtime against values worked out by hand: the ONNX example,
//! duplicates (the last plain update wins, reductions combine in row-major order), negative
//! indices, every reduction on f32, i32 and i64 data, integer wrapping, NaN and ±0 in max and
//! min, operands read through views (transposed, sliced, strided, computed), a copy large
//! enough to split over threads; the f64 interpreters (the HLIR's and the LLIR reference)
//! agreeing with the CPU bit for bit, fused and unfused, planned and NaN-poisoned; an index out
//! of range as an error value naming the op, the indices and the index; bad shapes and types
//! refused at compile time.

use std::collections::BTreeMap;

use lumen_compiler::interpret::eval_hlir;
use lumen_compiler::{CompileError, CompileOptions, DType, Graph, ScatterReduction, Tensor};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, RuntimeError, Tensors};

const REDUCTIONS: [ScatterReduction; 5] = ScatterReduction::ALL;

/// A tensor's elements as f64, whatever its type.
fn values(t: &HostTensor) -> Vec<f64> {
    match t.index_values() {
        Some(v) => v.iter().map(|&x| x as f64).collect(),
        None => t.data().iter().map(|&x| f64::from(x)).collect(),
    }
}

/// The leaves the HLIR interpreter reads: each input's values as f64.
fn leaves(inputs: &Tensors) -> BTreeMap<String, Vec<f64>> {
    inputs.iter().map(|(k, t)| (k.clone(), values(t))).collect()
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Runs `cx` on the CPU (fused and unfused; planned, NaN-poisoned and no-reuse; 1 and 2
/// threads), checks every output bit for bit against the HLIR interpreter and the LLIR
/// reference, and returns the CPU outputs.
fn run_all(cx: &Graph, inputs: &Tensors) -> Tensors {
    let want = eval_hlir(&cx.hlir(), &leaves(inputs)).expect("interpreter");
    let mut first: Option<Tensors> = None;
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
        let reference = execute_f64(&program.llir, &Tensors::new(), inputs).expect("reference");
        for (memory_debug, placement, threads) in [
            (false, lumen_runtime::Placement::Planned, 1),
            (true, lumen_runtime::Placement::Planned, 2),
            (false, lumen_runtime::Placement::NoReuse, 2),
        ] {
            let options = CpuOptions {
                memory_debug,
                placement,
                threads: Some(threads),
                ..Default::default()
            };
            let rt = CpuRuntime::new(options);
            let out = rt.prepare(&program, &Tensors::new()).unwrap().execute(inputs).unwrap();
            for (name, w) in &want {
                let got = values(&out[name]);
                assert_eq!(out[name].shape(), w.shape.as_slice(), "{name}");
                for (i, (&g, &e)) in got.iter().zip(&w.data).enumerate() {
                    assert!(same(g, e), "{name}[{i}]: cpu {g} vs interpreter {e}");
                    let r = reference[name].data[i];
                    assert!(same(r, e), "{name}[{i}]: reference {r} vs interpreter {e}");
                }
            }
            match &first {
                None => first = Some(out),
                Some(f) => {
                    for (name, t) in f {
                        let bits = |t: &HostTensor| {
                            t.words().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                        };
                        assert_eq!(bits(t), bits(&out[name]), "{name}: fuse {fuse}");
                    }
                }
            }
        }
    }
    first.unwrap()
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype(), DType::F32);
    t.data().to_vec()
}

#[test]
fn plain_scatters_by_hand_the_last_duplicate_wins() {
    let mut cx = Graph::new();
    let d = cx.input("d", [3, 3]);
    let idx = cx.input_typed("idx", [2, 3], DType::I64);
    let upd = cx.input("upd", [2, 3]);
    d.scatter_elements(0, &idx, &upd, ScatterReduction::None).output("onnx_example");
    let row = cx.input("row", [1, 5]);
    let dup = cx.input_typed("dup", [1, 4], DType::I32);
    let vals = cx.input("vals", [1, 4]);
    row.scatter_elements(-1, &dup, &vals, ScatterReduction::None).output("duplicates");
    let inputs: Tensors = [
        ("d".into(), HostTensor::new([3, 3], (10..19).map(|v| v as f32).collect()).unwrap()),
        ("idx".into(), HostTensor::from_i64([2, 3], vec![1, 0, 2, 0, 2, 1]).unwrap()),
        ("upd".into(), HostTensor::new([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()),
        ("row".into(), HostTensor::new([1, 5], vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap()),
        ("dup".into(), HostTensor::from_i32([1, 4], vec![1, 3, -4, -1]).unwrap()),
        ("vals".into(), HostTensor::new([1, 4], vec![1.5, 2.5, 3.5, 4.5]).unwrap()),
    ]
    .into();
    let out = run_all(&cx, &inputs);
    // Updates in row-major order: (0,0) -> out[1][0] = 1, (0,1) -> out[0][1] = 2, (0,2) ->
    // out[2][2] = 3, (1,0) -> out[0][0] = 4, (1,1) -> out[2][1] = 5, (1,2) -> out[1][2] = 6.
    assert_eq!(f32s(&out["onnx_example"]), [4.0, 2.0, 12.0, 1.0, 14.0, 6.0, 16.0, 5.0, 3.0]);
    // -4 is 1 (1.5 then 3.5 land there: the last wins), -1 is 4.
    assert_eq!(f32s(&out["duplicates"]), [1.0, 3.5, 3.0, 2.5, 4.5]);
}

/// `d [2, 3] = [[1, 2, 3], [4, 5, 6]]` scattered along axis 1 at `[[0, 0, 2], [1, -1, 1]]`
/// with `[[10, 20, 30], [-1, -2, -3]]`, by every reduction, as f32, i32 and i64 data.
#[test]
fn every_reduction_by_hand_on_f32_i32_and_i64_data() {
    let want: [(ScatterReduction, [i64; 6]); 5] = [
        // Row 0: position 0 gets 10 then 20, position 2 gets 30; row 1: position 1 gets -1
        // then -3, position 2 (-1) gets -2.
        (ScatterReduction::None, [20, 2, 30, 4, -3, -2]),
        (ScatterReduction::Add, [31, 2, 33, 4, 1, 4]),
        (ScatterReduction::Mul, [200, 2, 90, 4, 15, -12]),
        (ScatterReduction::Max, [20, 2, 30, 4, 5, 6]),
        (ScatterReduction::Min, [1, 2, 3, 4, -3, -2]),
    ];
    for dtype in [DType::F32, DType::I32, DType::I64] {
        let mut cx = Graph::new();
        let d = cx.input_typed("d", [2, 3], dtype);
        let idx = cx.input_typed("idx", [2, 3], DType::I32);
        let upd = cx.input_typed("upd", [2, 3], dtype);
        for r in REDUCTIONS {
            d.scatter_elements(1, &idx, &upd, r).output(r.name());
        }
        let typed = |v: Vec<i64>| match dtype {
            DType::F32 => HostTensor::new([2, 3], v.iter().map(|&x| x as f32).collect()).unwrap(),
            DType::I32 => {
                HostTensor::from_i32([2, 3], v.iter().map(|&x| x as i32).collect()).unwrap()
            }
            _ => HostTensor::from_i64([2, 3], v).unwrap(),
        };
        let inputs: Tensors = [
            ("d".into(), typed(vec![1, 2, 3, 4, 5, 6])),
            ("idx".into(), HostTensor::from_i32([2, 3], vec![0, 0, 2, 1, -1, 1]).unwrap()),
            ("upd".into(), typed(vec![10, 20, 30, -1, -2, -3])),
        ]
        .into();
        let out = run_all(&cx, &inputs);
        for (r, w) in want {
            let got = &out[r.name()];
            assert_eq!(got.dtype(), dtype, "{r}");
            let w: Vec<f64> = w.iter().map(|&x| x as f64).collect();
            assert_eq!(values(got), w, "{dtype} {r}");
        }
    }
}

/// Integers wrap (two's complement) on the CPU, in i64 and i32: beyond what the f64
/// interpreters hold exactly, so checked by hand only.
#[test]
fn integer_sums_and_products_wrap() {
    let mut cx = Graph::new();
    let wide = cx.input_typed("wide", [2], DType::I64);
    let narrow = cx.input_typed("narrow", [2], DType::I32);
    let idx = cx.input_typed("idx", [3], DType::I64);
    let (up_w, up_n) =
        (cx.input_typed("up_w", [3], DType::I64), cx.input_typed("up_n", [3], DType::I32));
    wide.scatter_elements(0, &idx, &up_w, ScatterReduction::Add).output("wide_add");
    wide.scatter_elements(0, &idx, &up_w, ScatterReduction::Mul).output("wide_mul");
    wide.scatter_elements(0, &idx, &up_w, ScatterReduction::Max).output("wide_max");
    narrow.scatter_elements(0, &idx, &up_n, ScatterReduction::Add).output("narrow_add");
    narrow.scatter_elements(0, &idx, &up_n, ScatterReduction::Mul).output("narrow_mul");
    let inputs: Tensors = [
        ("wide".into(), HostTensor::from_i64([2], vec![i64::MAX, -3]).unwrap()),
        ("narrow".into(), HostTensor::from_i32([2], vec![i32::MAX, -3]).unwrap()),
        ("idx".into(), HostTensor::from_i64([3], vec![0, -2, 1]).unwrap()),
        ("up_w".into(), HostTensor::from_i64([3], vec![1, 2, i64::MIN]).unwrap()),
        ("up_n".into(), HostTensor::from_i32([3], vec![1, 2, i32::MIN]).unwrap()),
    ]
    .into();
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let out = CpuRuntime::default().prepare(&program, &Tensors::new()).unwrap().execute(&inputs);
    let out = out.unwrap();
    let ints = |name: &str| out[name].index_values().unwrap();
    // MAX + 1 + 2 wraps to MIN + 2; -3 + MIN wraps to MAX - 2.
    assert_eq!(ints("wide_add"), [i64::MIN + 2, i64::MAX - 2]);
    // In row-major order MAX * 1 * 2 wraps to -2; -3 * MIN wraps to MIN.
    assert_eq!(ints("wide_mul"), [-2, i64::MIN]);
    assert_eq!(ints("wide_max"), [i64::MAX, -3]);
    assert_eq!(ints("narrow_add"), [i64::from(i32::MIN + 2), i64::from(i32::MAX - 2)]);
    assert_eq!(ints("narrow_mul"), [-2, i64::from(i32::MIN)]);
    assert_eq!(out["narrow_add"].dtype(), DType::I32);
}

#[test]
fn max_and_min_propagate_nan_and_keep_the_element_on_signed_zeros() {
    let mut cx = Graph::new();
    let d = cx.input("d", [4]);
    let idx = cx.input_typed("idx", [4], DType::I64);
    let upd = cx.input("upd", [4]);
    for r in [ScatterReduction::Max, ScatterReduction::Min, ScatterReduction::Add] {
        d.scatter_elements(0, &idx, &upd, r).output(r.name());
    }
    let inputs: Tensors = [
        ("d".into(), HostTensor::new([4], vec![f32::NAN, -0.0, 0.0, 1.0]).unwrap()),
        ("idx".into(), HostTensor::from_i64([4], vec![0, 1, 2, 3]).unwrap()),
        ("upd".into(), HostTensor::new([4], vec![5.0, 0.0, -0.0, f32::NAN]).unwrap()),
    ]
    .into();
    let out = run_all(&cx, &inputs);
    let bits = |name: &str| f32s(&out[name]).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let nan = f32::NAN.to_bits();
    for name in ["max", "min"] {
        // A NaN on either side is the canonical NaN; of -0 and +0 the element there stays.
        assert_eq!(bits(name), [nan, (-0.0f32).to_bits(), 0, nan], "{name}");
    }
    // -0 + 0 and 0 + -0 are +0 (IEEE 754).
    assert_eq!(&bits("add")[1..3], [0, 0].as_slice());
}

/// Operands read through views (a transposed data, transposed and sliced indices, strided
/// updates, computed data), a rank-3 scatter along its middle axis with fewer indices than
/// the data has on the other axes, and a copy of 153,600 elements split over two threads.
#[test]
fn views_rank_three_and_a_large_copy_agree_with_the_interpreters() {
    let mut cx = Graph::new();
    let d = cx.input("d", [3, 4]);
    let idx = cx.input_typed("idx", [4, 2], DType::I64);
    let upd = cx.input("upd", [2, 6]);
    let t = d.transpose(0, 1); // [4, 3]
    let ids_t = idx.transpose(0, 1); // [2, 4]
    let upd_strided = upd.reshape([6, 2]).transpose(0, 1).slice(1, 0, 4); // [2, 4]
    d.scatter_elements(1, &ids_t, &upd_strided, ScatterReduction::Add).output("views");
    t.scatter_elements(0, ids_t.slice(1, 0, 3), upd_strided.slice(1, 1, 4), ScatterReduction::Max)
        .output("transposed");
    (&d * 2.0)
        .scatter_elements(
            1,
            ids_t.slice(0, 1, 2),
            upd.slice(1, 0, 4).slice(0, 0, 1),
            ScatterReduction::None,
        )
        .output("computed");
    let e = cx.input("e", [2, 3, 4]);
    let deep = cx.input_typed("deep", [2, 2, 3], DType::I32);
    let ups = cx.input("ups", [2, 2, 3]);
    e.scatter_elements(1, &deep, &ups, ScatterReduction::Mul).output("rank3");
    let big = cx.input("big", [512, 300]);
    let bi = cx.input_typed("bi", [2, 3], DType::I64);
    let bu = cx.input("bu", [2, 3]);
    big.scatter_elements(0, &bi, &bu, ScatterReduction::None).output("big_out");
    let inputs: Tensors = [
        ("d".into(), HostTensor::new([3, 4], (0..12).map(|i| i as f32 * 0.5).collect()).unwrap()),
        ("idx".into(), HostTensor::from_i64([4, 2], vec![0, 3, -1, 1, 2, -4, 1, 1]).unwrap()),
        ("upd".into(), HostTensor::new([2, 6], (0..12).map(|i| 1.0 + i as f32).collect()).unwrap()),
        (
            "e".into(),
            HostTensor::new([2, 3, 4], (0..24).map(|i| i as f32 - 3.0).collect()).unwrap(),
        ),
        (
            "deep".into(),
            HostTensor::from_i32([2, 2, 3], vec![0, 2, -1, 1, 1, 0, -3, 2, 1, 0, 0, 2]).unwrap(),
        ),
        (
            "ups".into(),
            HostTensor::new([2, 2, 3], (0..12).map(|i| 0.5 + i as f32).collect()).unwrap(),
        ),
        (
            "big".into(),
            HostTensor::new([512, 300], (0..153_600).map(|i| i as f32).collect()).unwrap(),
        ),
        ("bi".into(), HostTensor::from_i64([2, 3], vec![511, 0, -1, 7, 7, 7]).unwrap()),
        ("bu".into(), HostTensor::new([2, 3], vec![-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]).unwrap()),
    ]
    .into();
    let out = run_all(&cx, &inputs);
    // `views` by hand: d [[0, .5, 1, 1.5], [2, 2.5, 3, 3.5], [4, 4.5, 5, 5.5]]; indices
    // (idx transposed) [[0, -1, 2, 1], [3, 1, -4, 1]]; updates (upd [6, 2] transposed, first
    // 4) [[1, 3, 5, 7], [2, 4, 6, 8]]. Row 0: +1 at 0, +3 at 3, +5 at 2, +7 at 1; row 1: +2
    // at 3, +4 at 1, +6 at 0, +8 at 1.
    assert_eq!(f32s(&out["views"]), [1.0, 7.5, 6.0, 4.5, 8.0, 14.5, 3.0, 5.5, 4.0, 4.5, 5.0, 5.5]);
    let big = f32s(&out["big_out"]);
    // Updates (row, column): (511, 0) = -1, (0, 1) = -2, (-1 = 511, 2) = -3, then row 7 of
    // columns 0, 1, 2 = -4, -5, -6; the rest is the data.
    assert_eq!((big[511 * 300], big[1], big[7 * 300 + 1], big[7 * 300]), (-1.0, -2.0, -5.0, -4.0));
    assert_eq!((big[511 * 300 + 2], big[7 * 300 + 2], big[5]), (-3.0, -6.0, 5.0));
}

fn bad_program(idx: Vec<i64>) -> (Graph, Tensors) {
    let mut cx = Graph::new();
    let d = cx.input("d", [2, 3]);
    let i = cx.input_typed("idx", [2, 2], DType::I64);
    let u = cx.input("u", [2, 2]);
    d.scatter_elements(1, i.transpose(0, 1), u, ScatterReduction::Add).output("y");
    let inputs: Tensors = [
        ("d".into(), HostTensor::new([2, 3], vec![0.0; 6]).unwrap()),
        ("idx".into(), HostTensor::from_i64([2, 2], idx).unwrap()),
        ("u".into(), HostTensor::new([2, 2], vec![1.0; 4]).unwrap()),
    ]
    .into();
    (cx, inputs)
}

#[test]
fn an_index_out_of_range_is_an_error_naming_the_op_the_indices_and_the_index() {
    // idx [2, 2] read transposed: row-major order visits buffer positions 0, 2, 1, 3. The
    // first bad index in that order is 3 (buffer position 2), though -4 (position 1) comes
    // first in the buffer.
    for (ids, want) in [
        (
            vec![0, -4, 3, 1],
            "scatter_elements: id 3 at position 2 of `idx` is out of range for an axis of length 3",
        ),
        (
            vec![0, -4, 2, 1],
            "scatter_elements: id -4 at position 1 of `idx` is out of range for an axis of length 3",
        ),
    ] {
        let (cx, inputs) = bad_program(ids);
        let program = cx.compile(&CompileOptions::default()).unwrap();
        let err = CpuRuntime::default()
            .prepare(&program, &Tensors::new())
            .unwrap()
            .execute(&inputs)
            .unwrap_err();
        assert!(matches!(err, RuntimeError::IndexOutOfRange { op: "scatter_elements", .. }));
        assert_eq!(err.to_string(), want);
        let reference = execute_f64(&program.llir, &Tensors::new(), &inputs).unwrap_err();
        assert_eq!(reference.to_string(), want);
        let interpreted = eval_hlir(&cx.hlir(), &leaves(&inputs)).unwrap_err();
        assert!(interpreted.to_string().contains("scatter_elements index"), "{interpreted}");
    }
    // -3 and 2 are the axis' ends: in range.
    let (cx, inputs) = bad_program(vec![-3, 2, 2, -3]);
    let out = run_all(&cx, &inputs);
    assert_eq!(f32s(&out["y"]), [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
}

#[test]
fn bad_shapes_and_types_are_compile_errors() {
    let compile = |build: &dyn Fn(&mut Graph) -> Tensor| -> CompileError {
        let mut cx = Graph::new();
        build(&mut cx).output("y");
        cx.compile(&CompileOptions::default()).unwrap_err()
    };
    let none = ScatterReduction::None;
    let err = compile(&|cx| {
        let i = cx.input_typed("i", [2, 2], DType::I64);
        cx.input("d", [2, 3]).scatter_elements(1, &i, cx.input("u", [2, 3]), none)
    });
    assert!(err.to_string().contains("the updates must have the indices' shape"), "{err}");
    let err = compile(&|cx| {
        let i = cx.input_typed("i", [3, 2], DType::I64);
        cx.input("d", [2, 3]).scatter_elements(1, &i, cx.input("u", [3, 2]), none)
    });
    assert!(err.to_string().contains("no longer axes but 1"), "{err}");
    let err = compile(&|cx| {
        let i = cx.input("i", [2, 2]);
        cx.input("d", [2, 3]).scatter_elements(1, &i, cx.input("u", [2, 2]), none)
    });
    assert!(matches!(err, CompileError::DType { operand: 1, .. }), "{err}");
    let err = compile(&|cx| {
        let i = cx.input_typed("i", [2, 2], DType::I64);
        let u = cx.input_typed("u", [2, 2], DType::I64);
        cx.input("d", [2, 3]).scatter_elements(1, &i, u, none)
    });
    assert!(matches!(err, CompileError::DType { operand: 2, expected: "f32", .. }), "{err}");
    let err = compile(&|cx| {
        let i = cx.input_typed("i", [2, 2], DType::I64);
        cx.input("d", [2, 3]).scatter_elements(2, &i, cx.input("u", [2, 2]), none)
    });
    assert!(matches!(err, CompileError::AxisOutOfRange { axis: 2, rank: 2, .. }), "{err}");
}
