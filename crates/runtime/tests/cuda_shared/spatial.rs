//! Convolution and take programs the CUDA tests run: host-only through the emulated launch
//! plans (`tests/cuda.rs`) and on a GPU (the same file, scripts/gpu-check.sh), each with its
//! weights and inputs (index tensors written by hand, every f32 leaf seeded).

use lumen_compiler::conv::{ConvEpilogue, ConvSpec};
use lumen_compiler::{
    CompileOptions, CompiledProgram, DType, Graph, HlirOp, SourceLocation, Tensor,
};
use lumen_runtime::{HostTensor, Tensors};

/// A program with the tensors it runs on.
pub type Case = (CompiledProgram, Tensors, Tensors);

/// Seeded values in about [-1, 1) for every f32 buffer of `role` (`weight` or `input`).
fn seeded(program: &CompiledProgram, weight: bool, seed: u64) -> Tensors {
    use lumen_compiler::BufferRole;
    let role = if weight { BufferRole::Weight } else { BufferRole::Input };
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
    };
    program
        .llir
        .buffers
        .iter()
        .filter(|b| b.role == role && b.dtype == DType::F32)
        .map(|b| {
            let n: usize = b.shape.iter().product();
            let data = (0..n).map(|_| next()).collect();
            (b.id.clone(), HostTensor::new(b.shape.clone(), data).expect("shape"))
        })
        .collect()
}

fn compiled(cx: &Graph, name: &str, fuse: bool) -> CompiledProgram {
    let options = CompileOptions { name: name.to_string(), fuse, ..Default::default() };
    cx.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn spec(
    strides: &[usize],
    dilations: &[usize],
    pads: &[(usize, usize)],
    groups: usize,
) -> ConvSpec {
    ConvSpec {
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads: pads.to_vec(),
        groups,
    }
}

/// Convolutions through the DSL, fused (the bias, a residual add and the activation become
/// the conv's epilogue) and unfused: dense, grouped, depthwise, strided, dilated, padded
/// (asymmetric too), 1-D, 2-D and 3-D, an input that is a channel slice of a larger tensor, a
/// weight read through a permuted view, a residual read transposed; then a transposed
/// convolution and the pooling composites.
pub fn conv_programs() -> Vec<Case> {
    type Build = fn(&mut Graph);
    let builds: [(&str, Build); 10] = [
        ("conv2d-dense-bias-relu", |cx| {
            let x = cx.input("x", [2, 3, 7, 6]);
            let w = cx.weight("w", [4, 3, 3, 3]);
            let b = cx.weight("b", [4]);
            x.conv(&w, Some(&b), &spec(&[1, 1], &[1, 1], &[(1, 1), (1, 1)], 1)).relu().output("y");
        }),
        ("conv2d-grouped-strided-silu", |cx| {
            let x = cx.input("x", [1, 4, 6, 7]);
            let w = cx.weight("w", [6, 2, 3, 3]);
            let b = cx.weight("b", [6]);
            x.conv(&w, Some(&b), &spec(&[2, 2], &[1, 1], &[(1, 0), (0, 1)], 2)).silu().output("y");
        }),
        ("conv2d-depthwise-dilated-relu6", |cx| {
            let x = cx.input("x", [2, 4, 5, 5]);
            let w = cx.weight("w", [8, 1, 3, 3]);
            x.conv(&w, None, &spec(&[1, 1], &[2, 2], &[(2, 2), (2, 2)], 4)).relu6().output("y");
        }),
        ("conv1d-strided-dilated-residual", |cx| {
            let x = cx.input("x", [2, 3, 11]);
            let w = cx.weight("w", [5, 3, 3]);
            let b = cx.weight("b", [5]);
            let y = x.conv(&w, Some(&b), &spec(&[2], &[2], &[(2, 1)], 1));
            let r = cx.input("r", [2, 5, 5]);
            (y + r).hardswish().output("y");
        }),
        ("conv3d-padded", |cx| {
            let x = cx.input("x", [1, 2, 4, 5, 3]);
            let w = cx.weight("w", [3, 2, 2, 3, 2]);
            let b = cx.weight("b", [3]);
            x.conv(&w, Some(&b), &spec(&[1, 2, 1], &[1, 1, 2], &[(1, 0), (1, 1), (1, 1)], 1))
                .sigmoid()
                .output("y");
        }),
        ("conv2d-channel-sliced-input", |cx| {
            // Channels 1..4 of a 5-channel tensor: an offset and the larger tensor's strides.
            let x = cx.input("x", [2, 5, 6, 6]).slice(1, 1, 4);
            let w = cx.weight("w", [4, 3, 3, 3]);
            x.conv(&w, None, &spec(&[1, 1], &[1, 1], &[(1, 1), (1, 1)], 1)).output("y");
        }),
        ("conv2d-permuted-weight", |cx| {
            // w [OC, C, kh, kw] read from a [C, OC, kh, kw] weight: no unit stride on oc.
            let x = cx.input("x", [1, 3, 5, 5]);
            let w = cx.weight("wt", [3, 4, 2, 3]).permute(&[1, 0, 2, 3]);
            x.conv(&w, None, &spec(&[1, 2], &[1, 1], &[(0, 1), (1, 0)], 1)).output("y");
        }),
        ("conv2d-transposed-residual", |cx| {
            let x = cx.input("x", [1, 2, 4, 6]);
            let w = cx.weight("w", [3, 2, 3, 3]);
            let b = cx.weight("b", [3]);
            let y = x.conv(&w, Some(&b), &spec(&[1, 1], &[1, 1], &[(1, 1), (1, 1)], 1));
            let r = cx.input("r", [1, 3, 6, 4]).permute(&[0, 1, 3, 2]);
            (y + r).relu().output("y");
        }),
        ("conv-transpose", |cx| {
            let x = cx.input("x", [1, 2, 4, 4]);
            let w = cx.weight("w", [2, 3, 3, 3]);
            let s = lumen_compiler::ConvTransposeSpec {
                strides: vec![2, 2],
                dilations: vec![1, 1],
                pads: vec![(1, 1); 2],
                output_padding: vec![1, 1],
                groups: 1,
            };
            x.conv_transpose(&w, None, &s).output("y");
        }),
        ("pooling", |cx| {
            let x = cx.input("x", [2, 3, 7, 6]);
            x.max_pool(&[3, 3], &[2, 2], &[1, 1], &[(1, 1), (1, 1)], false).output("max");
            x.avg_pool(&[3, 2], &[2, 2], &[1, 1], &[(1, 1), (0, 1)], true, false).output("avg");
        }),
    ];
    let mut out = Vec::new();
    for (name, build) in builds {
        for fuse in [true, false] {
            let mut cx = Graph::new();
            build(&mut cx);
            // The compiler labels it `{name}-fused` or `{name}-unfused`.
            let program = compiled(&cx, name, fuse);
            let (weights, inputs) = (seeded(&program, true, 3), seeded(&program, false, 4));
            out.push((program, weights, inputs));
        }
    }
    out
}

/// One convolution per epilogue the CUDA kernels have (bias, residual, each activation),
/// built as a fused HLIR conv node: a grouped 2-D convolution with stride, dilation and
/// asymmetric padding.
pub fn conv_epilogue_programs(epilogues: &[ConvEpilogue]) -> Vec<Case> {
    let loc = SourceLocation::caller();
    let (x_shape, w_shape) = (vec![2, 4, 6, 5], vec![6, 2, 3, 2]);
    let s = spec(&[2, 1], &[1, 2], &[(1, 2), (0, 1)], 2);
    let out_shape = vec![2, 6, 4, 4];
    epilogues
        .iter()
        .map(|&epilogue| {
            let mut h = lumen_compiler::Hlir::default();
            let leaf = |h: &mut lumen_compiler::Hlir, name: &str, shape: &[usize], weight: bool| {
                let (name, shape, dtype) = (name.to_string(), shape.to_vec(), DType::F32);
                let op = if weight {
                    HlirOp::Weight { name, shape, dtype }
                } else {
                    HlirOp::Input { name, shape, dtype }
                };
                h.add_op(op, &[], loc)
            };
            let mut ops =
                vec![leaf(&mut h, "x", &x_shape, false), leaf(&mut h, "w", &w_shape, true)];
            if epilogue.bias {
                ops.push(leaf(&mut h, "b", &[6], true));
            }
            if epilogue.residual {
                ops.push(leaf(&mut h, "r", &out_shape, false));
            }
            let y = h.add_op(HlirOp::Conv { spec: s.clone(), epilogue }, &ops, loc);
            h.add_op(HlirOp::Output { name: "y".into() }, &[y], loc);
            let name = format!("conv-epilogue-{}", epilogue.to_string().replace('+', "_"));
            let options = CompileOptions { name: name.clone(), fuse: false, ..Default::default() };
            let program = lumen_compiler::compile_hlir(&h, &name, &options)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let (weights, inputs) = (seeded(&program, true, 5), seeded(&program, false, 6));
            (program, weights, inputs)
        })
        .collect()
}

fn i64_leaf(cx: &mut Graph, name: &str, n: usize, weight: bool) -> Tensor {
    if weight {
        cx.weight_typed(name, [n], DType::I64)
    } else {
        cx.input_typed(name, [n], DType::I64)
    }
}

/// Takes: a negative index filled, i64 indices (a weight) and i32 indices (an input), x read
/// transposed, the last axis, an index view with a stride (a column of a 2-D index tensor),
/// and a take after a gather (two error records).
pub fn take_programs() -> Vec<Case> {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 5, 3]);
    let idx = i64_leaf(&mut cx, "idx", 6, true);
    x.take(1, &idx, -2.5).output("y");
    x.transpose(0, 2).take(1, &idx, 0.0).output("z");
    let narrow = cx.input_typed("n32", [4], DType::I32);
    x.take(-1, &narrow, 7.0).output("last");
    x.take(0, narrow.slice(0, 2, 4), f32::NAN).output("first");
    let program = compiled(&cx, "take-i64-i32", true);
    let mut weights = seeded(&program, true, 7);
    weights.insert("idx".into(), HostTensor::from_i64([6], vec![4, -1, 0, 0, 2, -1]).expect("idx"));
    let mut inputs = seeded(&program, false, 8);
    inputs.insert("n32".into(), HostTensor::from_i32([4], vec![2, -3, 0, 1]).expect("n32"));
    let mut out = vec![(program, weights, inputs)];

    // Indices read with a stride: every other element of an i32 input.
    let mut cx = Graph::new();
    let x = cx.input("x", [3, 4]);
    let ids = cx.input_typed("ids", [3, 2], DType::I32);
    let column = ids.transpose(0, 1).slice(0, 1, 2).reshape([3]);
    x.take(1, &column, -1.0).output("y");
    let table = cx.weight("table", [5, 2]);
    table.gather(cx.input_typed("g", [2], DType::I64)).output("rows");
    let program = compiled(&cx, "take-strided-indices", true);
    let weights = seeded(&program, true, 9);
    let mut inputs = seeded(&program, false, 10);
    inputs
        .insert("ids".into(), HostTensor::from_i32([3, 2], vec![9, 3, 9, -1, 9, 0]).expect("ids"));
    inputs.insert("g".into(), HostTensor::from_i64([2], vec![4, 0]).expect("g"));
    out.push((program, weights, inputs));
    out
}

/// A gather with good ids then a take with index 4 of an axis of 4 (at element 1 of its i64
/// indices `ids`): the error names the take's indices. With `empty`, x has no columns, so the
/// take writes nothing and must still report the index.
pub fn bad_take(empty: bool) -> Case {
    let mut cx = Graph::new();
    let cols = if empty { 0 } else { 2 };
    let x = cx.input("x", [4, cols]);
    let table = cx.weight("table", [3, 2]);
    table.gather(cx.input_typed("g", [2], DType::I32)).output("rows");
    let ids = i64_leaf(&mut cx, "ids", 3, false);
    x.take(0, &ids, 0.0).output("y");
    let program = compiled(&cx, if empty { "bad-take-empty" } else { "bad-take" }, true);
    let weights = seeded(&program, true, 11);
    let mut inputs = seeded(&program, false, 12);
    inputs.insert("g".into(), HostTensor::from_i32([2], vec![2, 0]).expect("g"));
    inputs.insert("ids".into(), HostTensor::from_i64([3], vec![1, 4, 9]).expect("ids"));
    (program, weights, inputs)
}

/// What every runtime says about [`bad_take`].
pub const BAD_TAKE: &str =
    "gather: id 4 at position 1 of `ids` is out of range for a table of 4 rows";
