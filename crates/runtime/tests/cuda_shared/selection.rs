//! Top-k and gather_elements programs the CUDA tests run: host-only through the emulated
//! launch plans (`tests/cuda.rs`) and on a GPU (the same file, scripts/gpu-check.sh), each
//! with its inputs. The values are chosen at the edges of the top-k order (ties, ±0, NaNs
//! with payloads and a negative sign, several NaNs in one row, infinities) and of the indices
//! (negative ones from the axis' end, i32 and i64, read transposed and with a stride), and
//! every output is compared with the CPU runtime's bit for bit.

use lumen_compiler::{CompileOptions, CompiledProgram, DType, Graph};
use lumen_runtime::{HostTensor, Tensors};

/// A program with the tensors it runs on.
pub type Case = (CompiledProgram, Tensors, Tensors);

/// Shape of the top-k programs' main input.
const X_SHAPE: [usize; 3] = [3, 4, 6];

fn compiled(cx: &Graph, name: &str, fuse: bool) -> CompiledProgram {
    let options = CompileOptions { name: name.to_string(), fuse, ..Default::default() };
    cx.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `x [3, 4, 6]` of the top-k programs: small integers (many ties, 0 as -0 or +0 by
/// position), then by hand: a row of equal values (0, 1, :), a row of ±0 (0, 2, :), a NaN
/// first (1, 0, 0), in the middle (1, 1, 3) and last (1, 2, 5) of its row, three NaNs with
/// different payloads, one negative, in one row (2, 0, {1, 2, 4}), infinities of both signs
/// beside ties (2, 1, :), a row that is all NaN (2, 3, :).
pub fn x_values() -> Vec<f32> {
    let mut x: Vec<f32> = (0..72)
        .map(|i: i32| {
            let v = ((i * 5 + 2) % 7 - 3) as f32;
            if v == 0.0 && i % 2 == 1 { -0.0 } else { v }
        })
        .collect();
    let at = |a: usize, b: usize, c: usize| (a * 4 + b) * 6 + c;
    for c in 0..6 {
        x[at(0, 1, c)] = 1.5;
        x[at(0, 2, c)] = if c % 3 == 0 { 0.0 } else { -0.0 };
        x[at(2, 3, c)] = f32::from_bits(0x7fc0_0000 | c as u32);
    }
    x[at(1, 0, 0)] = f32::NAN;
    x[at(1, 1, 3)] = f32::NAN;
    x[at(1, 2, 5)] = f32::NAN;
    x[at(2, 0, 1)] = f32::from_bits(0x7fc0_1234);
    x[at(2, 0, 2)] = f32::from_bits(0xffc0_0001);
    x[at(2, 0, 4)] = f32::NAN;
    x[at(2, 1, 0)] = f32::INFINITY;
    x[at(2, 1, 1)] = f32::NEG_INFINITY;
    x[at(2, 1, 2)] = f32::INFINITY;
    x[at(2, 1, 3)] = 2.0;
    x[at(2, 1, 4)] = f32::NEG_INFINITY;
    x[at(2, 1, 5)] = 2.0;
    x
}

/// `r [5, 40]`: values from {-1, -0, 0, 1, NaN, -inf, inf} by a fixed hash (long runs of
/// ties and many NaNs in each row), for selections over a longer axis.
pub fn long_rows() -> Vec<f32> {
    let pick = [-1.0, -0.0, 0.0, 1.0, f32::NAN, f32::NEG_INFINITY, f32::INFINITY, 1.0, -1.0];
    (0..200u64)
        .map(|i| pick[((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % pick.len() as u64) as usize])
        .collect()
}

/// The top-k programs, fused and unfused: largest and smallest along every axis of `x [3, 4,
/// 6]` (the outer ones strided) with k = 1, a middle k and k = the axis' length; a transposed
/// and a sliced view; a rank-1 input; a longer axis `r [5, 40]` with k = 1, 17 and 40 along
/// both axes; an empty k; each with its values (`gather_elements` of the positions, the ONNX
/// TopK's second output) and positions of a computed operand.
pub fn topk_programs() -> Vec<Case> {
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let x = cx.input("x", X_SHAPE);
        for axis in 0..3isize {
            let extent = X_SHAPE[axis as usize];
            for k in [1, 2, extent] {
                for largest in [true, false] {
                    let tag = if largest { "max" } else { "min" };
                    let at = x.top_k(axis, k, largest);
                    x.gather_elements(axis, &at).output(format!("{tag}{axis}_k{k}_values"));
                    at.output(format!("{tag}{axis}_k{k}"));
                }
            }
        }
        let t = x.transpose(0, 2);
        let at = t.top_k(1, 3, true);
        t.gather_elements(1, &at).output("transposed_values");
        at.output("transposed");
        x.slice(2, 1, 5).slice(1, 1, 3).top_k(0, 2, false).output("sliced");
        x.slice(2, 2, 3).top_k(2, 1, true).output("extent1");
        (&x * -1.0).top_k(-1, 4, true).output("computed");
        x.top_k(1, 0, true).output("k0");
        let v = cx.input("v", [7]);
        let at = v.top_k(0, 7, false);
        v.gather_elements(0, &at).output("v_values");
        at.output("v_sorted");
        let r = cx.input("r", [5, 40]);
        for k in [1, 17, 40] {
            r.top_k(1, k, true).output(format!("r_max_k{k}"));
            r.top_k(1, k, false).output(format!("r_min_k{k}"));
        }
        r.top_k(0, 5, false).output("r_min_axis0");
        r.transpose(0, 1).top_k(0, 23, true).output("r_t_max");
        // The compiler labels it `topk-fused` or `topk-unfused`.
        let program = compiled(&cx, "topk", fuse);
        let vs = vec![3.0, -0.0, f32::NAN, 0.0, -7.5, 3.0, f32::NEG_INFINITY];
        let inputs: Tensors = [
            ("x".to_string(), HostTensor::new(X_SHAPE, x_values()).expect("x")),
            ("v".to_string(), HostTensor::new([7], vs).expect("v")),
            ("r".to_string(), HostTensor::new([5, 40], long_rows()).expect("r")),
        ]
        .into();
        out.push((program, Tensors::new(), inputs));
    }
    out
}

/// `d [3, 5]`, the gather_elements programs' data: distinct values, with -0, a NaN with a
/// payload and an infinity among them (copied bit for bit).
pub fn data_values() -> Vec<f32> {
    let mut d: Vec<f32> = (0..15).map(|i| i as f32 * 0.5 - 3.0).collect();
    d[6] = -0.0;
    d[7] = f32::from_bits(0x7fc0_4321);
    d[11] = f32::INFINITY;
    d
}

/// The gather_elements programs, fused and unfused: along both axes of `d [3, 5]` with i64
/// and i32 indices, negative ones from the axis' end (down to `-extent`) and indices smaller
/// than the data on the other axis; the data read transposed and sliced, the indices read
/// transposed and with a stride; a rank-3 gather along its middle axis; a gather of computed
/// data; a rank-1 gather by i32 indices.
pub fn gather_elements_programs() -> Vec<Case> {
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let d = cx.input("d", [3, 5]);
        let wide = cx.input_typed("wide", [2, 4], DType::I64);
        let narrow = cx.input_typed("narrow", [3, 5], DType::I32);
        d.gather_elements(1, &wide).output("axis1_i64");
        d.gather_elements(0, &narrow).output("axis0_i32");
        d.gather_elements(-1, narrow.slice(1, 0, 2)).output("axis1_i32_sliced");
        d.transpose(0, 1).gather_elements(1, narrow.transpose(0, 1)).output("transposed");
        d.slice(1, 1, 4).gather_elements(0, narrow.slice(1, 2, 5).slice(0, 0, 2)).output("sliced");
        // Every other column of `wide`, read with a stride of 2.
        let strided = wide.reshape([4, 2]).transpose(0, 1).slice(0, 1, 2);
        d.gather_elements(1, &strided).output("strided_indices");
        let e = cx.input("e", [2, 3, 4]);
        let deep = cx.input_typed("deep", [2, 2, 4], DType::I64);
        e.gather_elements(1, &deep).output("rank3");
        // Computed data without NaNs: a map's NaN keeps its payload on the CPU, not on a GPU
        // (which makes it 0x7fffffff), and this compares gathers, not maps.
        (&e * 2.0).gather_elements(1, &deep).output("computed");
        let line = cx.input("line", [6]);
        line.gather_elements(0, cx.input_typed("picks", [4], DType::I32)).output("rank1_i32");
        // The compiler labels it `gather-elements-fused` or `...-unfused`.
        let program = compiled(&cx, "gather-elements", fuse);
        let es: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 1.0).collect();
        let inputs: Tensors = [
            ("d".to_string(), HostTensor::new([3, 5], data_values()).expect("d")),
            (
                "wide".to_string(),
                HostTensor::from_i64([2, 4], vec![4, -1, 0, -5, 2, 2, -3, 1]).expect("wide"),
            ),
            (
                "narrow".to_string(),
                HostTensor::from_i32(
                    [3, 5],
                    vec![0, -1, 2, -3, 1, 2, 2, -2, 0, 1, -1, 0, 1, 2, -3],
                )
                .expect("narrow"),
            ),
            ("e".to_string(), HostTensor::new([2, 3, 4], es).expect("e")),
            (
                "line".to_string(),
                HostTensor::new([6], vec![0.5, -0.0, f32::NEG_INFINITY, 2.0, 7.0, -1.0])
                    .expect("line"),
            ),
            ("picks".to_string(), HostTensor::from_i32([4], vec![5, -6, 0, -1]).expect("picks")),
            (
                "deep".to_string(),
                HostTensor::from_i64(
                    [2, 2, 4],
                    vec![0, 1, 2, -1, -3, 0, 2, 1, 1, 1, -2, 0, 2, 2, 2, -1],
                )
                .expect("deep"),
            ),
        ]
        .into();
        out.push((program, Tensors::new(), inputs));
    }
    out
}

/// Every top-k and gather_elements program.
pub fn selection_programs() -> Vec<Case> {
    let mut cases = topk_programs();
    cases.extend(gather_elements_programs());
    cases
}

/// A take with good indices, then a gather_elements of `d [2, 6]` along axis 1 by i64
/// indices `idx` stored `[3, 2]` and read transposed (so row-major order is not buffer
/// order). `negative`: the first bad index in row-major order is -7 (one past `-extent`) at
/// buffer position 3; else it is 9 at buffer position 4, while the buffer's first bad one
/// (-7 at 3) comes later in row-major order.
pub fn bad_gather_elements(negative: bool) -> Case {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 2]);
    x.take(0, cx.input_typed("t", [2], DType::I32), 0.0).output("taken");
    let d = cx.input("d", [2, 6]);
    let idx = cx.input_typed("idx", [3, 2], DType::I64);
    d.gather_elements(1, idx.transpose(0, 1)).output("y");
    let name = if negative { "bad-gather-elements-negative" } else { "bad-gather-elements" };
    let program = compiled(&cx, name, true);
    let ids = if negative { vec![0, 1, -6, -7, 5, 2] } else { vec![0, 1, -6, -7, 9, 2] };
    let inputs: Tensors = [
        ("x".to_string(), HostTensor::new([4, 2], (0..8).map(|i| i as f32).collect()).expect("x")),
        ("t".to_string(), HostTensor::from_i32([2], vec![3, 0]).expect("t")),
        ("d".to_string(), HostTensor::new([2, 6], (0..12).map(|i| i as f32).collect()).expect("d")),
        ("idx".to_string(), HostTensor::from_i64([3, 2], ids).expect("idx")),
    ]
    .into();
    (program, Tensors::new(), inputs)
}

/// What every runtime says about [`bad_gather_elements`] (`negative` as there).
pub fn bad_gather_elements_message(negative: bool) -> &'static str {
    if negative {
        "gather: id -7 at position 3 of `idx` is out of range for a table of 6 rows"
    } else {
        "gather: id 9 at position 4 of `idx` is out of range for a table of 6 rows"
    }
}
