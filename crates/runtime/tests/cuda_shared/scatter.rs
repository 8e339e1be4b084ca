//! ScatterElements programs the CUDA tests run: host-only through the emulated launch plans
//! (`tests/cuda.rs`) and on a GPU (the same file, scripts/gpu-check.sh), each with its inputs,
//! every output compared with the CPU runtime's bit for bit.
//!
//! [`scatter_programs`] are the ones a GPU must match bit for bit whatever order its threads
//! take: no two plain updates on one element, and several reduced updates on one element only
//! where the order cannot change the bits (max and min without a tie of -0 and +0, integer
//! sums and products, float sums and products that are exact). [`scatter_duplicates`] has the
//! order-dependent cases, which only the emulator (its threads in the CPU's order) matches.

use lumen_compiler::{CompileOptions, CompiledProgram, DType, Graph, ScatterReduction};
use lumen_runtime::{HostTensor, Tensors};

use super::selection::data_values;

/// A program with the tensors it runs on.
pub type Case = (CompiledProgram, Tensors, Tensors);

fn compiled(cx: &Graph, name: &str, fuse: bool) -> CompiledProgram {
    let options = CompileOptions { name: name.to_string(), fuse, ..Default::default() };
    cx.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The order-independent scatter programs, fused and unfused: `d [3, 5]` (with -0, a NaN
/// with a payload, an infinity) along both axes, plain (distinct targets, i64 and i32
/// indices, negative ones) and max/min with several updates per element (a NaN among them);
/// exact float sums and products of `h [2, 4]` with duplicates; i64 and i32 data with
/// duplicate sums, products, max and min; the data read transposed, the indices transposed
/// and sliced, the updates read with a stride; a rank-3 scatter along its middle axis.
pub fn scatter_programs() -> Vec<Case> {
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let d = cx.input("d", [3, 5]);
        let distinct = cx.input_typed("distinct", [3, 2], DType::I64);
        let columns = cx.input_typed("columns", [2, 5], DType::I32);
        let u = cx.input("u", [3, 5]);
        let none = ScatterReduction::None;
        d.scatter_elements(1, &distinct, u.slice(1, 0, 2), none).output("plain_axis1");
        d.scatter_elements(0, &columns, u.slice(0, 0, 2), none).output("plain_axis0");
        let many = cx.input_typed("many", [3, 4], DType::I64);
        for r in [ScatterReduction::Max, ScatterReduction::Min] {
            d.scatter_elements(-1, &many, u.slice(1, 1, 5), r).output(format!("{r}_duplicates"));
        }
        let h = cx.input("h", [2, 4]);
        let hi = cx.input_typed("hi", [2, 6], DType::I32);
        let hu = cx.input("hu", [2, 6]);
        for r in [ScatterReduction::Add, ScatterReduction::Mul] {
            h.scatter_elements(1, &hi, &hu, r).output(format!("{r}_exact"));
        }
        let w = cx.input_typed("w", [2, 3], DType::I64);
        let n = cx.input_typed("n", [3, 2], DType::I32);
        let wi = cx.input_typed("wi", [2, 4], DType::I64);
        let (wu, nu) =
            (cx.input_typed("wu", [2, 4], DType::I64), cx.input_typed("nu", [4, 2], DType::I32));
        for r in ScatterReduction::ALL.into_iter().filter(|&r| r != ScatterReduction::None) {
            w.scatter_elements(1, &wi, &wu, r).output(format!("i64_{r}"));
            // n [3, 2] read transposed: [2, 3], updates [4, 2] read transposed: [2, 4].
            n.transpose(0, 1)
                .scatter_elements(1, &wi, nu.transpose(0, 1), r)
                .output(format!("i32_{r}"));
        }
        // Views: data transposed [5, 3], indices transposed [2, 3] and sliced, updates every
        // other column.
        let ids_t = distinct.transpose(0, 1);
        let strided = u.reshape([15]).slice(0, 0, 12).reshape([2, 6]).window(1, 1, 2, 1);
        let strided = strided.reshape([2, 3]);
        d.transpose(0, 1).scatter_elements(0, &ids_t, &strided, none).output("views");
        let e = cx.input("e", [2, 3, 4]);
        let deep = cx.input_typed("deep", [2, 2, 3], DType::I64);
        let eu = cx.input("eu", [2, 2, 3]);
        e.scatter_elements(1, &deep, &eu, ScatterReduction::Max).output("rank3");
        let program = compiled(&cx, "scatter", fuse);
        let inputs: Tensors = [
            ("d".to_string(), HostTensor::new([3, 5], data_values()).expect("d")),
            (
                "distinct".to_string(),
                HostTensor::from_i64([3, 2], vec![4, -5, 2, 1, -1, 3]).expect("distinct"),
            ),
            (
                "columns".to_string(),
                HostTensor::from_i32([2, 5], vec![0, 2, -1, 1, -3, 1, 0, 0, 2, 2]).expect("c"),
            ),
            (
                "u".to_string(),
                HostTensor::new([3, 5], (0..15).map(|i| 0.25 * i as f32 - 1.5).collect())
                    .expect("u"),
            ),
            (
                "many".to_string(),
                HostTensor::from_i64([3, 4], vec![0, 0, -5, 3, 2, 2, 2, -1, 1, 4, -4, 1])
                    .expect("many"),
            ),
            (
                "h".to_string(),
                HostTensor::new([2, 4], vec![0.5, -1.0, 2.0, 0.0, 4.0, -0.5, 1.5, 3.0]).expect("h"),
            ),
            (
                "hi".to_string(),
                HostTensor::from_i32([2, 6], vec![0, 0, 1, -4, 3, 3, 2, 2, 2, 0, -1, 1])
                    .expect("hi"),
            ),
            (
                "hu".to_string(),
                HostTensor::new(
                    [2, 6],
                    vec![2.0, -0.5, 4.0, 0.25, -2.0, 8.0, 0.5, 2.0, -1.0, 0.5, 4.0, 16.0],
                )
                .expect("hu"),
            ),
            (
                "w".to_string(),
                HostTensor::from_i64([2, 3], vec![i64::MAX, -7, 3, 0, i64::MIN, 5]).expect("w"),
            ),
            (
                "n".to_string(),
                HostTensor::from_i32([3, 2], vec![i32::MAX, 0, -7, i32::MIN, 3, 5]).expect("n"),
            ),
            (
                "wi".to_string(),
                HostTensor::from_i64([2, 4], vec![0, 0, 2, -3, 1, -2, 2, 1]).expect("wi"),
            ),
            (
                "wu".to_string(),
                HostTensor::from_i64([2, 4], vec![1, 3, -2, 5, -1, 9, 4, 2]).expect("wu"),
            ),
            (
                "nu".to_string(),
                HostTensor::from_i32([4, 2], vec![1, -1, 3, 9, -2, 4, 5, 2]).expect("nu"),
            ),
            (
                "e".to_string(),
                HostTensor::new([2, 3, 4], (0..24).map(|i| i as f32 * 0.5 - 4.0).collect())
                    .expect("e"),
            ),
            (
                "deep".to_string(),
                HostTensor::from_i64([2, 2, 3], vec![0, 2, -1, 0, 1, 1, -3, 2, 1, 1, 2, 0])
                    .expect("deep"),
            ),
            (
                "eu".to_string(),
                HostTensor::new([2, 2, 3], (0..12).map(|i| 3.0 - i as f32).collect()).expect("eu"),
            ),
        ]
        .into();
        out.push((program, Tensors::new(), inputs));
    }
    out
}

/// The order-dependent scatters (emulator only): plain updates landing twice on one element
/// (the last in row-major order wins on the CPU), inexact float sums and products of several
/// updates, and max/min over a tie of -0 and +0.
pub fn scatter_duplicates() -> Case {
    let mut cx = Graph::new();
    let d = cx.input("d", [2, 3]);
    let idx = cx.input_typed("idx", [2, 4], DType::I32);
    let u = cx.input("u", [2, 4]);
    for r in ScatterReduction::ALL {
        d.scatter_elements(1, &idx, &u, r).output(format!("dup_{r}"));
    }
    let program = compiled(&cx, "scatter-duplicates", true);
    let inputs: Tensors = [
        (
            "d".to_string(),
            HostTensor::new([2, 3], vec![0.1, -0.0, 1.0, -1.0, 0.3, 0.0]).expect("d"),
        ),
        (
            "idx".to_string(),
            HostTensor::from_i32([2, 4], vec![0, 0, 1, 1, 0, 0, 2, -1]).expect("i"),
        ),
        (
            "u".to_string(),
            HostTensor::new([2, 4], vec![0.7, 1e8, 0.0, -0.0, -0.0, 0.2, 1.0 / 3.0, 3.0])
                .expect("u"),
        ),
    ]
    .into();
    (program, Tensors::new(), inputs)
}

/// A gather_elements with good indices, then a scatter (add) of `d [2, 6]` along axis 1 by
/// i64 indices `idx` stored `[3, 2]` and read transposed (so row-major order is not buffer
/// order). `negative`: the first bad index in row-major order is -7 (one past `-extent`) at
/// buffer position 3; else it is 6 at buffer position 4, while the buffer's first bad one
/// (-7 at 3) comes later in row-major order.
pub fn bad_scatter_elements(negative: bool) -> Case {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 2]);
    x.gather_elements(1, cx.input_typed("g", [2, 2], DType::I32)).output("gathered");
    let d = cx.input("d", [2, 6]);
    let idx = cx.input_typed("idx", [3, 2], DType::I64);
    let u = cx.input("u", [2, 3]);
    d.scatter_elements(1, idx.transpose(0, 1), &u, ScatterReduction::Add).output("y");
    let name = if negative { "bad-scatter-negative" } else { "bad-scatter" };
    let program = compiled(&cx, name, true);
    let ids = if negative { vec![0, 1, -6, -7, 5, 2] } else { vec![0, 1, -6, -7, 6, 2] };
    let inputs: Tensors = [
        ("x".to_string(), HostTensor::new([2, 2], vec![1.0, 2.0, 3.0, 4.0]).expect("x")),
        ("g".to_string(), HostTensor::from_i32([2, 2], vec![1, 0, -1, 1]).expect("g")),
        ("d".to_string(), HostTensor::new([2, 6], (0..12).map(|i| i as f32).collect()).expect("d")),
        ("idx".to_string(), HostTensor::from_i64([3, 2], ids).expect("idx")),
        ("u".to_string(), HostTensor::new([2, 3], vec![1.0; 6]).expect("u")),
    ]
    .into();
    (program, Tensors::new(), inputs)
}

/// What every runtime says about [`bad_scatter_elements`] (`negative` as there).
pub fn bad_scatter_elements_message(negative: bool) -> &'static str {
    if negative {
        "scatter_elements: id -7 at position 3 of `idx` is out of range for an axis of length 6"
    } else {
        "scatter_elements: id 6 at position 4 of `idx` is out of range for an axis of length 6"
    }
}
