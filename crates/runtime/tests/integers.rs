//! Integer tensors at run time: argmax/argmin (ties, NaN, the last of equals, a strided view),
//! casts between f32, i32 and i64 (truncation, saturation, NaN), an integer view made
//! contiguous by a typed copy, and integer outputs read back with their type, on the CPU
//! runtime against the HLIR interpreter and the LLIR reference, fused and unfused, planned
//! and NaN-poisoned.

use std::collections::BTreeMap;

use lumen_compiler::interpret::eval_hlir;
use lumen_compiler::{CompileOptions, DType, Graph};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};

#[test]
fn argmax_casts_and_integer_outputs() {
    let mut cx = Graph::new();
    let x = cx.input("x", [3, 4]);
    let ids = cx.input_typed("ids", [2, 3], DType::I64);
    x.argmax(-1, false, false).output("am");
    x.argmax(-1, true, true).output("am_last");
    x.transpose(0, 1).argmin(1, false, false).output("amin_t");
    (&x * 1e10).cast(DType::I32).output("i32");
    x.cast(DType::I64).output("i64");
    ids.cast(DType::F32).output("f");
    ids.transpose(0, 1).reshape([6]).output("ids_t");
    let xs: Vec<f32> =
        vec![1.0, 3.0, 3.0, -1.0, f32::NAN, 2.0, f32::NAN, 5.0, -2.5, -2.5, 0.0, 7.9];
    let id_vals: Vec<i64> = vec![1, -2, 3, i64::MAX, -7, 0];
    let inputs: Tensors = [
        ("x".to_string(), HostTensor::new([3, 4], xs.clone()).unwrap()),
        ("ids".to_string(), HostTensor::from_i64([2, 3], id_vals.clone()).unwrap()),
    ]
    .into();
    let leaves: BTreeMap<String, Vec<f64>> = [
        ("x".to_string(), xs.iter().map(|&v| f64::from(v)).collect()),
        ("ids".to_string(), id_vals.iter().map(|&v| v as f64).collect()),
    ]
    .into();
    let want = eval_hlir(&cx.hlir(), &leaves).unwrap();
    // By hand: row 0 ties at 1 and 2 (first: 1, last: 2); row 1's NaN wins at 0; row 2's max
    // 7.9 at 3. The transpose's rows are x's columns: [1, NaN, -2.5] (the NaN wins, 1),
    // [3, 2, -2.5] (2), [3, NaN, 0] (1), [-1, 5, 7.9] (0).
    assert_eq!(want["am"].data, [1.0, 0.0, 3.0]);
    assert_eq!(want["am_last"].data, [2.0, 0.0, 3.0]);
    assert_eq!(want["amin_t"].data, [1.0, 2.0, 1.0, 0.0]);
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
        let reference = execute_f64(&program.llir, &Tensors::new(), &inputs).unwrap();
        for memory_debug in [false, true] {
            let rt = CpuRuntime::new(CpuOptions { memory_debug, ..Default::default() });
            let out = rt.prepare(&program, &Tensors::new()).unwrap().execute(&inputs).unwrap();
            for (name, w) in &want {
                let got = &out[name];
                let values: Vec<f64> = match got.index_values() {
                    Some(v) => v.iter().map(|&v| v as f64).collect(),
                    None => got.data().iter().map(|&v| f64::from(v)).collect(),
                };
                assert_eq!(got.shape(), w.shape.as_slice(), "{name}");
                for (i, (&g, &e)) in values.iter().zip(&w.data).enumerate() {
                    assert!(g == e || (g.is_nan() && e.is_nan()), "{name}[{i}]: {g} vs {e}");
                    let r = reference[name].data[i];
                    assert!(r == e || (r.is_nan() && e.is_nan()), "{name}[{i}]: ref {r} vs {e}");
                }
            }
            assert_eq!(out["am"].dtype(), DType::I64);
            assert_eq!(out["i32"].dtype(), DType::I32);
            // Truncation toward zero, saturation, NaN to 0; an i64 keeps all 64 bits.
            assert_eq!(out["i64"].index_values().unwrap(), [1, 3, 3, -1, 0, 2, 0, 5, -2, -2, 0, 7]);
            assert_eq!(out["i32"].index_values().unwrap()[1], i64::from(i32::MAX));
            assert_eq!(out["ids_t"].index_values().unwrap(), [1, i64::MAX, -2, -7, 3, 0]);
        }
    }
}

/// TopK's order (largest or smallest first, equal values by position, NaN as the largest) and
/// GatherElements (negative indices from the end, an index out of range named), against the
/// interpreter.
#[test]
fn top_k_and_gather_elements() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 5]);
    let idx = cx.input_typed("idx", [2, 2], DType::I64);
    let top = x.top_k(-1, 3, true);
    top.output("top_i");
    x.gather_elements(-1, &top).output("top_v");
    x.top_k(0, 2, false).output("low_i");
    x.gather_elements(1, &idx).output("picked");
    let xs = vec![3.0, 1.0, 3.0, f32::NAN, -1.0, 0.5, 0.5, 2.0, -4.0, 2.0];
    let ids = vec![-1, 0, 4, 2];
    let inputs: Tensors = [
        ("x".to_string(), HostTensor::new([2, 5], xs.clone()).unwrap()),
        ("idx".to_string(), HostTensor::from_i64([2, 2], ids.clone()).unwrap()),
    ]
    .into();
    let leaves: BTreeMap<String, Vec<f64>> = [
        ("x".to_string(), xs.iter().map(|&v| f64::from(v)).collect()),
        ("idx".to_string(), ids.iter().map(|&v| v as f64).collect()),
    ]
    .into();
    let want = eval_hlir(&cx.hlir(), &leaves).unwrap();
    // Row 0: NaN (3) first, then the two 3s by position (0, 2); row 1: the 2s (7, 9) then 0.5 (5).
    assert_eq!(want["top_i"].data, [3.0, 0.0, 2.0, 2.0, 4.0, 0.0]);
    // Column-wise smallest two of [[3, 1, 3, NaN, -1], [0.5, 0.5, 2, -4, 2]] (NaN last), as
    // [k, 5]: the smallest's rows, then the second smallest's.
    assert_eq!(want["low_i"].data, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(want["picked"].data, [-1.0, 3.0, 2.0, 2.0]);
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
        let reference = execute_f64(&program.llir, &Tensors::new(), &inputs).unwrap();
        let out = CpuRuntime::default()
            .prepare(&program, &Tensors::new())
            .unwrap()
            .execute(&inputs)
            .unwrap();
        for (name, w) in &want {
            let got: Vec<f64> = match out[name].index_values() {
                Some(v) => v.iter().map(|&v| v as f64).collect(),
                None => out[name].data().iter().map(|&v| f64::from(v)).collect(),
            };
            let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
            assert!(
                got.iter().zip(&w.data).all(|(&a, &b)| same(a, b)),
                "{name}: {got:?} vs {:?}",
                w.data
            );
            assert!(
                reference[name].data.iter().zip(&w.data).all(|(&a, &b)| same(a, b)),
                "{name} reference"
            );
        }
    }
    // An index past the axis is a runtime error naming the indices.
    let bad: Tensors = [
        ("x".to_string(), HostTensor::new([2, 5], xs).unwrap()),
        ("idx".to_string(), HostTensor::from_i64([2, 2], vec![0, 5, 1, 1]).unwrap()),
    ]
    .into();
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let err = CpuRuntime::default()
        .prepare(&program, &Tensors::new())
        .unwrap()
        .execute(&bad)
        .unwrap_err();
    assert!(err.to_string().contains("idx"), "{err}");
}

/// The integer bit ops ([`lumen_compiler::IntOp`]) on i32 (past 2^24, where f32 rounds) and
/// i64 (below 2^53, where the f64 interpreters are exact), one operand broadcast and one read
/// through a transposed view: the CPU runtime (fused, unfused, NaN-poisoned) against the HLIR
/// interpreter, the LLIR reference and values by hand.
#[test]
fn bit_ops_against_the_interpreters() {
    use lumen_compiler::IntOp;
    let mut cx = Graph::new();
    let a = cx.input_typed("a", [2, 3], DType::I32);
    let s = cx.input_typed("s", [3], DType::I32);
    let w = cx.input_typed("w", [3, 2], DType::I64);
    a.int_op(IntOp::ShiftLeft, &[&s]).output("shl");
    a.int_op(IntOp::ShiftRight, &[&s]).output("shr");
    a.int_op(IntOp::BitXor, &[&a.int_op(IntOp::BitNot, &[])]).output("xor_not");
    let wt = w.transpose(0, 1);
    let w2 = cx.input_typed("w2", [2, 3], DType::I64);
    wt.int_op(IntOp::BitAnd, &[&w2]).output("and_t");
    wt.int_op(IntOp::BitOr, &[&w2]).output("or_t");
    let av = [16_777_217, -8, i32::MIN, 1 << 30, -1, 123_456_789];
    let sv = [1, 33, -1];
    let wv: [i64; 6] = [(1 << 52) + 1, -1, 0xff00, 7, -(1 << 40), 12];
    let w2v: [i64; 6] = [-1, 0x0ff0, 3, 5, 1 << 52, -16];
    let inputs: Tensors = [
        ("a".to_string(), HostTensor::from_i32([2, 3], av.to_vec()).unwrap()),
        ("s".to_string(), HostTensor::from_i32([3], sv.to_vec()).unwrap()),
        ("w".to_string(), HostTensor::from_i64([3, 2], wv.to_vec()).unwrap()),
        ("w2".to_string(), HostTensor::from_i64([2, 3], w2v.to_vec()).unwrap()),
    ]
    .into();
    let f = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let leaves: BTreeMap<String, Vec<f64>> = [
        ("a".to_string(), f(&av.map(i64::from))),
        ("s".to_string(), f(&sv.map(i64::from))),
        ("w".to_string(), f(&wv)),
        ("w2".to_string(), f(&w2v)),
    ]
    .into();
    let want = eval_hlir(&cx.hlir(), &leaves).unwrap();
    let min = f64::from(i32::MIN);
    // By hand: 2^24 + 1 doubled exactly; -8 shifted by 33 (outside 0..32) is 0 left, -1 right;
    // a negative shift the same; bits past the sign dropped.
    assert_eq!(want["shl"].data, [33_554_434.0, 0.0, 0.0, min, 0.0, 0.0]);
    assert_eq!(want["shr"].data, [8_388_608.0, -1.0, -1.0, f64::from(1 << 29), -1.0, 0.0]);
    assert_eq!(want["xor_not"].data, [-1.0; 6]);
    // w transposed: [[2^52 + 1, 0xff00, -2^40], [-1, 7, 12]].
    assert_eq!(want["and_t"].data, f(&[(1 << 52) + 1, 0x0f00, 0, 5, 0, 0]));
    assert_eq!(want["or_t"].data, f(&[-1, 0xfff0, -(1 << 40) | 3, -1, 7 | (1 << 52), -4]));
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
        let reference = execute_f64(&program.llir, &Tensors::new(), &inputs).unwrap();
        for memory_debug in [false, true] {
            let rt = CpuRuntime::new(CpuOptions { memory_debug, ..Default::default() });
            let out = rt.prepare(&program, &Tensors::new()).unwrap().execute(&inputs).unwrap();
            for (name, w) in &want {
                let got: Vec<f64> =
                    out[name].index_values().unwrap().iter().map(|&v| v as f64).collect();
                assert_eq!(got, w.data, "{name}");
                assert_eq!(reference[name].data, w.data, "{name}: reference");
            }
            assert_eq!(out["shl"].dtype(), DType::I32);
            assert_eq!(out["or_t"].dtype(), DType::I64);
        }
    }
}
