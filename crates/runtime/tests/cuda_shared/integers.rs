//! Cast and arg programs the CUDA tests run: host-only through the emulated launch plans
//! (`tests/cuda.rs`) and on a GPU (the same file, scripts/gpu-check.sh), each with its inputs.
//! The values are chosen by hand at the edges of every conversion (NaN with payloads,
//! infinities, saturation at both ends of i32 and i64, truncation of negatives, -0, i64 values
//! that use both 32-bit words, an i64 whose f32 depends on rounding through f64 first) and of
//! every search (ties, ±0, NaN first, in the middle and last, two NaNs, infinities), and every
//! output is compared with the CPU runtime's bit for bit.

use lumen_compiler::{CompileOptions, CompiledProgram, DType, Graph, Tensor};
use lumen_runtime::{HostTensor, Tensors};

/// A program with the tensors it runs on.
pub type Case = (CompiledProgram, Tensors, Tensors);

/// Rows and columns of the cast programs' inputs.
const CAST_SHAPE: [usize; 2] = [4, 6];

/// f32 inputs of the casts (4 x 6): NaNs (two payloads, one negative), infinities, ±0,
/// fractions of both signs (truncated toward zero), subnormals, the largest f32 below 2^31,
/// ±2^31 and the next f32 below -2^31 (i32 saturation), ±2^63 and ±1e19 (i64 saturation),
/// ±1e10, 2^24 + 1 (not an f32: the literal rounds), 3.999999.
pub fn f32_edges() -> Vec<f32> {
    vec![
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_0001),
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.7,
        -0.7,
        2.5,
        -2.5,
        1e-45,
        -1e-45,
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_904.0,
        1e10,
        -1e10,
        9_223_372_036_854_775_808.0,
        -9_223_372_036_854_775_808.0,
        1e19,
        -1e19,
        16_777_217.0,
        -3.999_999,
    ]
}

/// i32 inputs of the casts (4 x 6): both ends, ±1, 0, values f32 rounds to nearest (ties to
/// even: 2^24 + 1 and 2^24 + 3 go opposite ways), large negatives.
pub fn i32_edges() -> Vec<i32> {
    vec![
        i32::MIN,
        i32::MAX,
        -1,
        0,
        1,
        16_777_217,
        -16_777_217,
        16_777_219,
        123_456_789,
        -123_456_789,
        2_147_483_600,
        -2_147_483_600,
        33_554_435,
        -7,
        100,
        65_536,
        -65_537,
        i32::MIN + 1,
        i32::MAX - 1,
        2,
        -2,
        1_000_000_007,
        -1_000_000_007,
        42,
    ]
}

/// i64 inputs of the casts (4 x 6): both ends, values whose high word is set or whose low
/// word has its top bit set (the words combine unsigned), just past both ends of i32
/// (saturated by a cast to i32), 2^53 + 1 (f64 rounds it), and ±(2^62 + 2^38 + 1), whose f32
/// through the nearest f64 (2^62, a tie to even) is not its nearest f32 (2^62 + 2^39): the
/// CPU's rule, which the device must follow.
pub fn i64_edges() -> Vec<i64> {
    let double_rounded = (1i64 << 62) + (1 << 38) + 1;
    vec![
        i64::MIN,
        i64::MAX,
        -1,
        0,
        1,
        1 << 32,
        -(1 << 32),
        (1 << 32) + 5,
        4_294_967_295,
        -4_294_967_303,
        0x1_8000_0000,
        2_147_483_648,
        -2_147_483_649,
        2_147_483_647,
        -2_147_483_648,
        (1 << 53) + 1,
        double_rounded,
        -double_rounded,
        (1 << 40) + 3,
        16_777_217,
        -16_777_217,
        1_234_567_890_123,
        -987_654_321_098,
        i64::MIN + 1,
    ]
}

fn compiled(cx: &Graph, name: &str, fuse: bool) -> CompiledProgram {
    let options = CompileOptions { name: name.to_string(), fuse, ..Default::default() };
    cx.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The cast programs, fused and unfused: every (from, to) pair of f32, i32 and i64 read
/// contiguous, transposed and sliced (an offset and the larger tensor's strides); casts of
/// computed values and after them (a map reading a cast's output), chains of casts, and an
/// integer view made contiguous (a typed copy).
pub fn cast_programs() -> Vec<Case> {
    let types = [DType::F32, DType::I32, DType::I64];
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let leaves: Vec<(&str, Tensor)> = types
            .iter()
            .map(|&d| {
                let name = d.name();
                let t = if d == DType::F32 {
                    cx.input(name, CAST_SHAPE)
                } else {
                    cx.input_typed(name, CAST_SHAPE, d)
                };
                (name, t)
            })
            .collect();
        for (name, x) in &leaves {
            for to in types {
                x.cast(to).output(format!("{name}_{to}"));
                x.transpose(0, 1).cast(to).output(format!("{name}_t_{to}"));
                x.slice(1, 1, 5).slice(0, 1, 3).cast(to).output(format!("{name}_s_{to}"));
            }
        }
        let (f, i, l) = (&leaves[0].1, &leaves[1].1, &leaves[2].1);
        // Computed values cast, and casts computed with.
        (f * 1e10).cast(DType::I32).output("f_times_1e10_i32");
        (f * -3.0).transpose(0, 1).cast(DType::I64).output("f_times_minus_3_t_i64");
        (i.cast(DType::F32) + 0.5).output("i_f32_plus_half");
        (l.cast(DType::F32) * 2.0).transpose(0, 1).output("l_f32_twice_t");
        // Chains: the i64 of an f32, narrowed, widened again; an i64 through i32 transposed.
        f.cast(DType::I64).cast(DType::I32).cast(DType::F32).output("f_i64_i32_f32");
        l.cast(DType::I32).transpose(0, 1).cast(DType::I64).output("l_i32_t_i64");
        // Typed copies of integer views.
        l.transpose(0, 1).reshape([24]).output("l_t_flat");
        i.slice(0, 2, 4).transpose(0, 1).reshape([12]).output("i_s_t_flat");
        // The compiler labels it `casts-fused` or `casts-unfused`.
        let program = compiled(&cx, "casts", fuse);
        let inputs: Tensors = [
            ("f32".to_string(), HostTensor::new(CAST_SHAPE, f32_edges()).expect("f32")),
            ("i32".to_string(), HostTensor::from_i32(CAST_SHAPE, i32_edges()).expect("i32")),
            ("i64".to_string(), HostTensor::from_i64(CAST_SHAPE, i64_edges()).expect("i64")),
        ]
        .into();
        out.push((program, Tensors::new(), inputs));
    }
    out
}

/// Shape of the arg programs' main input.
const ARG_SHAPE: [usize; 3] = [3, 4, 5];

/// The arg programs' `x [3, 4, 5]`: small integers (many ties), then by hand: a NaN first in
/// its row (0, 0, :), in the middle (1, 2, 3) and last (2, 0, 4); two NaNs (0, 3, 0 and 1); a
/// row of equal values (2, 1, :); a row of ±0 (2, 3, :); infinities (1, 0, :).
pub fn arg_values() -> Vec<f32> {
    let mut x: Vec<f32> = (0..60).map(|i| ((i * 7 + 3) % 5) as f32 - 2.0).collect();
    let at = |a: usize, b: usize, c: usize| (a * 4 + b) * 5 + c;
    x[at(0, 0, 0)] = f32::NAN;
    x[at(1, 2, 3)] = f32::NAN;
    x[at(2, 0, 4)] = f32::from_bits(0xffc0_0000);
    x[at(0, 3, 0)] = f32::NAN;
    x[at(0, 3, 1)] = f32::NAN;
    for c in 0..5 {
        x[at(2, 1, c)] = 1.0;
        x[at(2, 3, c)] = if c % 2 == 0 { -0.0 } else { 0.0 };
    }
    x[at(1, 0, 0)] = f32::INFINITY;
    x[at(1, 0, 1)] = f32::NEG_INFINITY;
    x[at(1, 0, 2)] = f32::INFINITY;
    x[at(1, 0, 4)] = f32::NEG_INFINITY;
    x
}

/// The arg programs, fused and unfused: argmax and argmin, first and last of equals, along
/// every axis of `x [3, 4, 5]` (the outer ones strided), kept dims, a transposed and a sliced
/// view, a length-1 axis, a computed operand (a map before the search), and the indices used:
/// cast to f32, as take indices and as gather ids.
pub fn arg_programs() -> Vec<Case> {
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        let x = cx.input("x", ARG_SHAPE);
        for axis in 0..3isize {
            for last in [false, true] {
                let tag = if last { "_last" } else { "" };
                x.argmax(axis, false, last).output(format!("argmax{axis}{tag}"));
                x.argmin(axis, false, last).output(format!("argmin{axis}{tag}"));
            }
        }
        x.argmax(-1, true, false).output("argmax_keepdim");
        x.transpose(0, 2).argmax(1, false, true).output("argmax_transposed");
        x.slice(2, 1, 4).slice(1, 1, 3).argmin(0, false, false).output("argmin_sliced");
        x.slice(2, 2, 3).argmax(2, false, false).output("argmax_extent1");
        (&x * -2.0).argmax(1, false, false).output("argmax_computed");
        x.argmin(-1, false, true).cast(DType::F32).output("argmin_f32");
        // Indices a search computed, used: take along the rows of a weight, gather of a table.
        let y = cx.input("y", [4, 5]);
        let w = cx.weight("w", [5, 3]);
        w.take(0, y.argmax(-1, false, false), -1.0).output("take_by_argmax");
        w.gather(y.argmin(-1, false, true)).output("gather_by_argmin");
        // The compiler labels it `args-fused` or `args-unfused`.
        let program = compiled(&cx, "args", fuse);
        let ys: Vec<f32> = (0..20).map(|i| ((i * 3) % 7) as f32 * 0.5 - 1.0).collect();
        let ws: Vec<f32> = (0..15).map(|i| i as f32 * 0.25 - 2.0).collect();
        let inputs: Tensors = [
            ("x".to_string(), HostTensor::new(ARG_SHAPE, arg_values()).expect("x")),
            ("y".to_string(), HostTensor::new([4, 5], ys).expect("y")),
        ]
        .into();
        let weights: Tensors = [("w".to_string(), HostTensor::new([5, 3], ws).expect("w"))].into();
        out.push((program, weights, inputs));
    }
    out
}

/// Every cast and arg program.
pub fn integer_programs() -> Vec<Case> {
    let mut cases = cast_programs();
    cases.extend(arg_programs());
    cases.extend(bit_programs());
    cases
}

/// Shift amounts of the bit programs (`[6]`, broadcast over the rows): in range, 0, the
/// width's last bit, and outside `0..width` on both sides.
pub fn shift_amounts() -> Vec<i64> {
    vec![1, 0, 31, 32, -1, 63]
}

/// The integer bit ops ([`lumen_compiler::IntOp`]) on i32 and i64 (4 x 6, the cast edges):
/// and, or, xor of a tensor with its transpose's view (read through strides), not, and both
/// shifts by a broadcast row of amounts ([`shift_amounts`]), fused and unfused. Labels
/// `bits-fused` and `bits-unfused`.
pub fn bit_programs() -> Vec<Case> {
    use lumen_compiler::IntOp;
    let mut out = Vec::new();
    for fuse in [false, true] {
        let mut cx = Graph::new();
        for (name, dtype) in [("i32", DType::I32), ("i64", DType::I64)] {
            let x = cx.input_typed(name, [4, 6], dtype);
            let s = cx.input_typed(&format!("{name}_s"), [6], dtype);
            let t = x.reshape([6, 4]).transpose(0, 1);
            for op in [IntOp::BitAnd, IntOp::BitOr, IntOp::BitXor] {
                x.int_op(op, &[&t]).output(&format!("{name}_{op}"));
            }
            x.int_op(IntOp::BitNot, &[]).output(&format!("{name}_bit_not"));
            x.int_op(IntOp::ShiftLeft, &[&s]).output(&format!("{name}_shift_left"));
            x.int_op(IntOp::ShiftRight, &[&s]).output(&format!("{name}_shift_right"));
        }
        let program = compiled(&cx, "bits", fuse);
        let shifts = shift_amounts();
        let inputs: Tensors = [
            ("i32".to_string(), HostTensor::from_i32([4, 6], i32_edges()).expect("i32")),
            ("i64".to_string(), HostTensor::from_i64([4, 6], i64_edges()).expect("i64")),
            (
                "i32_s".to_string(),
                HostTensor::from_i32([6], shifts.iter().map(|&v| v as i32).collect())
                    .expect("i32_s"),
            ),
            ("i64_s".to_string(), HostTensor::from_i64([6], shifts).expect("i64_s")),
        ]
        .into();
        out.push((program, Tensors::new(), inputs));
    }
    out
}

/// An output as its type, shape and slab words: what "bit for bit" compares (an integer
/// tensor's `data()` is empty).
pub fn typed_words(t: &HostTensor) -> (DType, Vec<usize>, Vec<u32>) {
    (t.dtype(), t.shape().to_vec(), t.words().iter().map(|w| w.to_bits()).collect())
}

/// Asserts that `got` has exactly `want`'s outputs, each of the same type, shape and bits
/// (NaN payloads included); returns how many elements were compared.
pub fn assert_bit_identical(what: &str, got: &Tensors, want: &Tensors) -> usize {
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{what}");
    let mut elements = 0;
    for (name, w) in want {
        let (gd, gs, gw) = typed_words(&got[name]);
        let (wd, ws, ww) = typed_words(w);
        assert_eq!((gd, &gs), (wd, &ws), "{what} {name}: dtype and shape");
        let words = if wd == DType::I64 { 2 } else { 1 };
        for (e, (g, x)) in gw.chunks(words).zip(ww.chunks(words)).enumerate() {
            assert_eq!(g, x, "{what} {name}[{e}] ({wd}): {g:08x?} vs cpu {x:08x?}");
        }
        elements += ww.len() / words;
    }
    elements
}
