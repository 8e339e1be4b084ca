//! Operators and forms added for the ONNX backend node suite, each on a small hand-written
//! graph run on the CPU runtime (fused and unfused) against values worked out by hand or by an
//! independent f64 formula: integer tensors keeping their type through Concat, Gather, Pow and
//! CumSum; negative Gather indices at run time; CastLike; bool graph inputs; Floor, Ceil,
//! Round, Mod, Trilu, Tile, DepthToSpace, SpaceToDepth, EyeLike, OneHot, Hardmax, Shrink,
//! Swish, ReduceProd, ReduceLogSum, the normalizations (RMS, Lp, instance, group,
//! mean-variance, LRN), Attention, the trigonometric rows, CenterCropPad, the loss operators
//! and a float graph input specialised at import.

use lumen_compiler::{CompileOptions, DType};
use lumen_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, data_type,
};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{CpuRuntime, HostTensor, Runtime, Tensors};
use prost::Message;

mod common;
use common::*;

fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f, r#type: 1, ..Default::default() }
}

fn floats(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::FLOAT,
        float_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

fn bool_in(name: &'static str, shape: &[usize], data: &[bool]) -> Input {
    let data: Vec<f32> = data.iter().map(|&b| f32::from(u8::from(b))).collect();
    Input { name, elem_type: data_type::BOOL, value: HostTensor::new(shape, data).unwrap() }
}

/// Imports the graph (default opset `opset`), runs it fused and unfused, returns the outputs.
fn run_at(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Vec<HostTensor> {
    let bytes = model_of(opset, nodes, initializers, &inputs, outputs);
    let imported = import(&bytes, &ImportOptions::default()).unwrap();
    let given: Tensors = inputs.into_iter().map(|i| (i.name.to_string(), i.value)).collect();
    let bound = imported.bind_inputs(&given).unwrap();
    run_fused_and_unfused(&imported, &bound, "ops").unwrap()
}

fn run(
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Vec<HostTensor> {
    run_at(23, nodes, initializers, inputs, outputs)
}

fn close(got: &HostTensor, shape: &[usize], want: &[f32]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.data().len(), want.len());
    for (i, (g, w)) in got.data().iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= 1e-5 * w.abs().max(1.0) || (g.is_nan() && w.is_nan());
        assert!(ok, "element {i}: {g} vs {w} ({:?})", got.data());
    }
}

fn exact(got: &HostTensor, shape: &[usize], dtype: DType, want: &[i64]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), dtype);
    assert_eq!(got.index_values().unwrap(), want);
}

#[test]
fn integer_tensors_keep_their_type_through_concat_gather_pow_and_cumsum() {
    // Concat of a computed i64 (Add) and an i64 input, then a Gather by constant indices.
    let out = run(
        vec![
            node("Add", &["a", "a"], &["s"], vec![]),
            node("Concat", &["s", "b"], &["c"], vec![int_attr("axis", 0)]),
            node("Gather", &["c", "idx"], &["g"], vec![int_attr("axis", 0)]),
            node("Pow", &["a", "two"], &["p"], vec![]),
        ],
        vec![ints("idx", &[2], &[2, 0]), ints("two", &[], &[2])],
        vec![i64_in("a", &[2], &[3, -4]), i64_in("b", &[1], &[7])],
        &["c", "g", "p"],
    );
    exact(&out[0], &[3], DType::I64, &[6, -8, 7]);
    exact(&out[1], &[2], DType::I64, &[7, 6]);
    exact(&out[2], &[2], DType::I64, &[9, 16]);
    // CumSum of a 1-D tensor, exclusive: [0, 1, 1+2, 1+2+3].
    let out = run(
        vec![node("CumSum", &["a", "axis"], &["y"], vec![int_attr("exclusive", 1)])],
        vec![ints("axis", &[], &[0])],
        vec![i64_in("a", &[4], &[1, 2, 3, 4])],
        &["y"],
    );
    exact(&out[0], &[4], DType::I64, &[0, 1, 3, 6]);
}

#[test]
fn gather_counts_negative_indices_from_the_end_at_run_time() {
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let out = run(
        vec![node("Gather", &["x", "i"], &["y"], vec![int_attr("axis", 0)])],
        vec![],
        vec![f32_in("x", &[3, 2], &x), i64_in("i", &[2], &[-1, 0])],
        &["y"],
    );
    close(&out[0], &[2, 2], &[4.0, 5.0, 0.0, 1.0]);
    // Along axis 1 of a [2, 3] table.
    let out = run(
        vec![node("Gather", &["x", "i"], &["y"], vec![int_attr("axis", 1)])],
        vec![],
        vec![f32_in("x", &[2, 3], &x), i64_in("i", &[1], &[-3])],
        &["y"],
    );
    close(&out[0], &[2, 1], &[0.0, 3.0]);
}

/// An integer constant read as floats by one node (LessOrEqual, GreaterOrEqual) stays an
/// integer for the nodes after it: Div divides as integers, Gather takes it as indices (a
/// transformers 5 mask export has this shape; the float twin once replaced the constant).
#[test]
fn integer_constants_stay_integers_after_a_float_reader() {
    for op in ["LessOrEqual", "GreaterOrEqual"] {
        let out = run(
            vec![
                node("Range", &["zero", "seven", "one"], &["idx"], vec![]),
                // Against a graph input, so the comparison is computed (reading idx as floats).
                node(op, &["idx", "limit"], &["c"], vec![]),
                node("Div", &["idx", "two"], &["q"], vec![]),
                node("Gather", &["data", "idx"], &["g"], vec![int_attr("axis", 0)]),
            ],
            vec![
                ints("zero", &[], &[0]),
                ints("seven", &[], &[7]),
                ints("one", &[], &[1]),
                ints("two", &[1], &[2]),
            ],
            vec![
                f32_in("data", &[7], &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
                f32_in("limit", &[1], &[2.0]),
            ],
            &["c", "q", "g"],
        );
        let le = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let want: Vec<f32> = if op == "LessOrEqual" {
            le.to_vec()
        } else {
            [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0].to_vec()
        };
        close(&out[0], &[7], &want);
        exact(&out[1], &[7], DType::I64, &[0, 0, 1, 1, 2, 2, 3]);
        close(&out[2], &[7], &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    }
}

#[test]
fn cast_like_bool_inputs_and_logic() {
    let out = run(
        vec![
            node("CastLike", &["x", "t"], &["c"], vec![]),
            node("And", &["p", "q"], &["and"], vec![]),
            node("Xor", &["p", "q"], &["xor"], vec![]),
            node("Not", &["p"], &["not"], vec![]),
            node("Where", &["p", "x", "y"], &["w"], vec![]),
        ],
        vec![],
        vec![
            f32_in("x", &[3], &[1.9, -2.7, 5.0]),
            f32_in("y", &[3], &[10.0, 20.0, 30.0]),
            i64_in("t", &[1], &[0]),
            bool_in("p", &[3], &[true, false, true]),
            bool_in("q", &[3], &[true, true, false]),
        ],
        &["c", "and", "xor", "not", "w"],
    );
    exact(&out[0], &[3], DType::I64, &[1, -2, 5]);
    close(&out[1], &[3], &[1.0, 0.0, 0.0]);
    close(&out[2], &[3], &[0.0, 1.0, 1.0]);
    close(&out[3], &[3], &[0.0, 1.0, 0.0]);
    close(&out[4], &[3], &[1.9, 20.0, 5.0]);
}

#[test]
fn floor_ceil_round_and_mod() {
    let x = [-1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6, 1e9];
    let ops = ["Floor", "Ceil", "Round"];
    let nodes = ops.iter().map(|op| node(op, &["x"], &[&op.to_lowercase()], vec![])).collect();
    let out = run(nodes, vec![], vec![f32_in("x", &[8], &x)], &["floor", "ceil", "round"]);
    close(&out[0], &[8], &[-2.0, -1.0, 0.0, 1.0, 2.0, 2.0, -3.0, 1e9]);
    close(&out[1], &[8], &[-1.0, 0.0, 1.0, 2.0, 3.0, 3.0, -2.0, 1e9]);
    close(&out[2], &[8], &[-2.0, 0.0, 0.0, 2.0, 2.0, 2.0, -3.0, 1e9]);
    // Mod: Python's sign (the divisor's) by default, C's (the dividend's) with fmod = 1.
    let out = run(
        vec![
            node("Mod", &["a", "b"], &["py"], vec![]),
            node("Mod", &["a", "b"], &["c"], vec![int_attr("fmod", 1)]),
            node("Mod", &["x", "y"], &["f"], vec![int_attr("fmod", 1)]),
        ],
        vec![],
        vec![
            i64_in("a", &[4], &[5, -5, 5, -5]),
            i64_in("b", &[4], &[3, 3, -3, -3]),
            f32_in("x", &[2], &[5.5, -5.5]),
            f32_in("y", &[2], &[2.0, 2.0]),
        ],
        &["py", "c", "f"],
    );
    exact(&out[0], &[4], DType::I64, &[2, 1, -1, -2]);
    exact(&out[1], &[4], DType::I64, &[2, -2, 2, -2]);
    close(&out[2], &[2], &[1.5, -1.5]);
}

#[test]
fn trilu_tile_depth_space_eye_and_one_hot() {
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let out = run(
        vec![
            node("Trilu", &["x"], &["u"], vec![]),
            node("Trilu", &["x", "k"], &["l"], vec![int_attr("upper", 0)]),
            node("EyeLike", &["x"], &["e"], vec![int_attr("k", 1)]),
        ],
        vec![ints("k", &[], &[-1])],
        vec![f32_in("x", &[3, 3], &x)],
        &["u", "l", "e"],
    );
    close(&out[0], &[3, 3], &[1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0]);
    close(&out[1], &[3, 3], &[0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 7.0, 8.0, 0.0]);
    close(&out[2], &[3, 3], &[0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    let out = run(
        vec![node("Tile", &["x", "r"], &["t"], vec![])],
        vec![ints("r", &[2], &[2, 2])],
        vec![f32_in("x", &[1, 2], &[1.0, 2.0])],
        &["t"],
    );
    close(&out[0], &[2, 4], &[1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    // DepthToSpace (DCR and CRD) of 8 channels into 2 channels of 2x2 blocks, and back.
    let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let out = run(
        vec![
            node("DepthToSpace", &["x"], &["dcr"], vec![int_attr("blocksize", 2)]),
            node(
                "DepthToSpace",
                &["x"],
                &["crd"],
                vec![int_attr("blocksize", 2), string_attr("mode", "CRD")],
            ),
            node("SpaceToDepth", &["dcr"], &["back"], vec![int_attr("blocksize", 2)]),
            node(
                "SpaceToDepth",
                &["crd"],
                &["back_crd"],
                vec![int_attr("blocksize", 2), string_attr("mode", "CRD")],
            ),
        ],
        vec![],
        vec![f32_in("x", &[1, 8, 1, 1], &x)],
        &["dcr", "crd", "back", "back_crd"],
    );
    // DCR: channel (i * 2 + j) * 2 + c lands at (c, i, j); CRD: c * 4 + i * 2 + j.
    close(&out[0], &[1, 2, 2, 2], &[0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0]);
    close(&out[1], &[1, 2, 2, 2], &x);
    close(&out[2], &[1, 8, 1, 1], &x);
    close(&out[3], &[1, 8, 1, 1], &x);
    let out = run(
        vec![node("OneHot", &["i", "depth", "values"], &["y"], vec![])],
        vec![ints("depth", &[], &[3]), floats("values", &[2], &[-1.0, 5.0])],
        vec![i64_in("i", &[3], &[0, 2, -1])],
        &["y"],
    );
    close(&out[0], &[3, 3], &[5.0, -1.0, -1.0, -1.0, -1.0, 5.0, -1.0, -1.0, 5.0]);
}

#[test]
fn hardmax_shrink_swish_and_reductions() {
    let x = [1.0, 3.0, 3.0, -2.0, 0.0, 5.0];
    let out = run(
        vec![
            node("Hardmax", &["x"], &["h"], vec![]),
            node("Shrink", &["x"], &["s"], vec![float_attr("lambd", 1.5), float_attr("bias", 0.5)]),
            node("Swish", &["x"], &["w"], vec![float_attr("alpha", 2.0)]),
            node("ReduceProd", &["x", "ax"], &["p"], vec![int_attr("keepdims", 0)]),
            node("ReduceLogSum", &["x", "ax"], &["l"], vec![]),
        ],
        vec![ints("ax", &[1], &[1])],
        vec![f32_in("x", &[2, 3], &x)],
        &["h", "s", "w", "p", "l"],
    );
    close(&out[0], &[2, 3], &[0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    close(&out[1], &[2, 3], &[0.0, 2.5, 2.5, -1.5, 0.0, 4.5]);
    let swish: Vec<f32> = x.iter().map(|&v: &f32| v / (1.0 + (-2.0 * v).exp())).collect();
    close(&out[2], &[2, 3], &swish);
    close(&out[3], &[2], &[9.0, 0.0]);
    close(&out[4], &[2, 1], &[7f32.ln(), 3f32.ln()]);
    // A negative product: the sign from the count of negative factors.
    let out = run(
        vec![node("ReduceProd", &["x"], &["p"], vec![int_attr("keepdims", 0)])],
        vec![],
        vec![f32_in("x", &[3], &[-2.0, 3.0, 0.5])],
        &["p"],
    );
    close(&out[0], &[], &[-3.0]);
}

#[test]
fn normalizations() {
    // x [1, 4, 2]: 4 channels of 2 positions.
    let x = [1.0f32, 3.0, -2.0, 2.0, 0.5, 4.5, 0.0, 8.0];
    let scale = [1.0f32, 2.0, 0.5, -1.0];
    let bias = [0.0f32, 1.0, -1.0, 0.5];
    let out = run(
        vec![
            node(
                "InstanceNormalization",
                &["x", "scale", "bias"],
                &["inst"],
                vec![float_attr("epsilon", 0.0)],
            ),
            node(
                "GroupNormalization",
                &["x", "scale", "bias"],
                &["group"],
                vec![int_attr("num_groups", 2), float_attr("epsilon", 0.0)],
            ),
            node("RMSNormalization", &["x", "g"], &["rms"], vec![float_attr("epsilon", 0.0)]),
            node("LpNormalization", &["x"], &["l1"], vec![int_attr("p", 1), int_attr("axis", 1)]),
            node(
                "LRN",
                &["x"],
                &["lrn"],
                vec![
                    int_attr("size", 3),
                    float_attr("alpha", 0.3),
                    float_attr("beta", 0.5),
                    float_attr("bias", 2.0),
                ],
            ),
        ],
        vec![
            floats("scale", &[4], &scale),
            floats("bias", &[4], &bias),
            floats("g", &[2], &[1.0, 2.0]),
        ],
        vec![f32_in("x", &[1, 4, 2], &x)],
        &["inst", "group", "rms", "l1", "lrn"],
    );
    // Instance: each channel's two values become -1 and +1 (mean between, std half the gap).
    let mut inst = Vec::new();
    for c in 0..4 {
        let (a, b) = (x[2 * c], x[2 * c + 1]);
        let s = |v: f32| if v < (a + b) / 2.0 { -1.0 } else { 1.0 };
        inst.extend([s(a) * scale[c] + bias[c], s(b) * scale[c] + bias[c]]);
    }
    close(&out[0], &[1, 4, 2], &inst);
    // Group: channels {0, 1} and {2, 3}, four values each.
    let mut group = Vec::new();
    for g in 0..2 {
        let v = &x[4 * g..4 * g + 4];
        let mean = v.iter().sum::<f32>() / 4.0;
        let var = v.iter().map(|a| (a - mean) * (a - mean)).sum::<f32>() / 4.0;
        for (k, a) in v.iter().enumerate() {
            let c = 2 * g + k / 2;
            group.push((a - mean) / var.sqrt() * scale[c] + bias[c]);
        }
    }
    close(&out[1], &[1, 4, 2], &group);
    // RMS over the last axis (pairs).
    let rms: Vec<f32> = (0..8)
        .map(|e| {
            let (a, b) = (x[e / 2 * 2], x[e / 2 * 2 + 1]);
            x[e] / ((a * a + b * b) / 2.0).sqrt() * [1.0, 2.0][e % 2]
        })
        .collect();
    close(&out[2], &[1, 4, 2], &rms);
    // L1 along the channels, per position.
    let l1: Vec<f32> =
        (0..8).map(|e| x[e] / (0..4).map(|c| x[2 * c + e % 2].abs()).sum::<f32>()).collect();
    close(&out[3], &[1, 4, 2], &l1);
    // LRN: channels c-1..=c+1, zeros past the ends.
    let lrn: Vec<f32> = (0..8)
        .map(|e| {
            let (c, p) = ((e / 2) as i64, e % 2);
            let sq: f32 = (c - 1..=c + 1)
                .filter(|&k| (0..4).contains(&k))
                .map(|k| x[2 * k as usize + p] * x[2 * k as usize + p])
                .sum();
            x[e] / (2.0 + 0.3 / 3.0 * sq).powf(0.5)
        })
        .collect();
    close(&out[4], &[1, 4, 2], &lrn);
}

/// Attention by an f64 loop over ONNX's definition: one batch, 4-D inputs.
#[allow(clippy::too_many_arguments)]
fn attention_f64(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    heads: usize,
    kv_heads: usize,
    sq: usize,
    skv: usize,
    d: usize,
    allowed: impl Fn(usize, usize) -> bool,
) -> Vec<f32> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut y = vec![0.0f32; heads * sq * d];
    for h in 0..heads {
        let kh = h / (heads / kv_heads);
        for i in 0..sq {
            let logits: Vec<f64> = (0..skv)
                .map(|j| {
                    if !allowed(i, j) {
                        return f64::NEG_INFINITY;
                    }
                    (0..d)
                        .map(|t| {
                            f64::from(q[(h * sq + i) * d + t])
                                * f64::from(k[(kh * skv + j) * d + t])
                        })
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
            let s: f64 = e.iter().sum();
            for t in 0..d {
                let acc: f64 =
                    (0..skv).map(|j| e[j] / s * f64::from(v[(kh * skv + j) * d + t])).sum();
                y[(h * sq + i) * d + t] = acc as f32;
            }
        }
    }
    y
}

#[test]
fn attention_causal_grouped_and_masked() {
    let (heads, kv_heads, sq, skv, d) = (4, 2, 3, 3, 2);
    let wave = |n: usize, f: f32| -> Vec<f32> { (0..n).map(|i| ((i as f32) * f).sin()).collect() };
    let (q, k, v) =
        (wave(heads * sq * d, 0.7), wave(kv_heads * skv * d, 1.3), wave(kv_heads * skv * d, 0.4));
    let out = run(
        vec![node("Attention", &["q", "k", "v"], &["y"], vec![int_attr("is_causal", 1)])],
        vec![],
        vec![
            f32_in("q", &[1, heads, sq, d], &q),
            f32_in("k", &[1, kv_heads, skv, d], &k),
            f32_in("v", &[1, kv_heads, skv, d], &v),
        ],
        &["y"],
    );
    let want = attention_f64(&q, &k, &v, heads, kv_heads, sq, skv, d, |i, j| j <= i);
    close(&out[0], &[1, heads, sq, d], &want);
    // A bool mask [sq, skv], 3-D inputs with heads as attributes, and the present key.
    let mask = [true, false, true, false, true, true, true, true, false];
    let out = run(
        vec![node(
            "Attention",
            &["q3", "k3", "v3", "m"],
            &["y", "pk"],
            vec![int_attr("q_num_heads", 2), int_attr("kv_num_heads", 2)],
        )],
        vec![],
        vec![
            f32_in("q3", &[1, sq, 2 * d], &q[..sq * 2 * d]),
            f32_in("k3", &[1, skv, 2 * d], &k),
            f32_in("v3", &[1, skv, 2 * d], &v),
            bool_in("m", &[sq, skv], &mask),
        ],
        &["y", "pk"],
    );
    // [1, s, heads * d] -> [1, heads, s, d] for the reference, and back.
    let split = |t: &[f32], s: usize| -> Vec<f32> {
        (0..2 * s * d).map(|e| t[(e / d % s) * 2 * d + e / (s * d) * d + e % d]).collect()
    };
    let (q4, k4, v4) = (split(&q[..sq * 2 * d], sq), split(&k, skv), split(&v, skv));
    let y4 = attention_f64(&q4, &k4, &v4, 2, 2, sq, skv, d, |i, j| mask[i * skv + j]);
    let y: Vec<f32> =
        (0..sq * 2 * d).map(|e| y4[(e % (2 * d)) / d * sq * d + e / (2 * d) * d + e % d]).collect();
    close(&out[0], &[1, sq, 2 * d], &y);
    close(&out[1], &[1, 2, skv, d], &k4);
}

#[test]
fn a_model_of_the_ml_domain_alone_imports() {
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![NodeProto {
                domain: "ai.onnx.ml".into(),
                ..node("Binarizer", &["x"], &["y"], vec![float_attr("threshold", 0.5)])
            }],
            name: "g".into(),
            input: vec![value("x", data_type::FLOAT, &[2])],
            output: vec![value("y", data_type::FLOAT, &[2])],
            ..Default::default()
        }),
        opset_import: vec![OperatorSetIdProto { domain: "ai.onnx.ml".into(), version: 1 }],
        ..Default::default()
    };
    match import(&m.encode_to_vec(), &ImportOptions::default()) {
        Ok(imported) => assert_eq!(imported.opset, 0),
        // Binarizer itself may be an operator lumen lacks; the refusal must name it, not
        // the missing default-domain opset.
        Err(e) => assert!(e.to_string().contains("Binarizer"), "{e}"),
    }
    // A default-domain node in such a model is refused, naming it.
    let mut m = m;
    if let Some(g) = m.graph.as_mut() {
        g.node = vec![node("Relu", &["x"], &["y"], vec![])];
    }
    let e = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Relu") && e.contains("no opset of the default"), "{e}");
}

#[test]
fn lp_normalization_leaves_a_zero_vector_zero() {
    let out = run(
        vec![node("LpNormalization", &["x"], &["y"], vec![int_attr("axis", 0)])],
        vec![],
        vec![f32_in("x", &[2, 2], &[3.0, 0.0, 4.0, 0.0])],
        &["y"],
    );
    close(&out[0], &[2, 2], &[0.6, 0.0, 0.8, 0.0]);
}

#[test]
fn trigonometric_and_hyperbolic_rows_match_f64() {
    let x = [-0.9f32, -0.25, 0.0, 0.5, 0.75];
    let big = [1.0f32, 1.5, 2.0, 3.0, 10.0];
    type F = fn(f64) -> f64;
    let rows: [(&str, F, &[f32]); 11] = [
        ("Sin", f64::sin, &x),
        ("Cos", f64::cos, &x),
        ("Tan", f64::tan, &x),
        ("Asin", f64::asin, &x),
        ("Acos", f64::acos, &x),
        ("Atan", f64::atan, &big),
        ("Sinh", f64::sinh, &big),
        ("Cosh", f64::cosh, &x),
        ("Asinh", f64::asinh, &big),
        ("Acosh", f64::acosh, &big),
        ("Atanh", f64::atanh, &x),
    ];
    for (op, f, values) in rows {
        let out = run(
            vec![node(op, &["x"], &["y"], vec![])],
            vec![],
            vec![f32_in("x", &[5], values)],
            &["y"],
        );
        let want: Vec<f32> = values.iter().map(|&v| f(f64::from(v)) as f32).collect();
        close(&out[0], &[5], &want);
    }
}

#[test]
fn center_crop_pad_crops_and_pads_centred() {
    // [2, 5] -> [4, 3]: axis 0 padded 1 before and 1 after, axis 1 cropped from 1.
    let x: Vec<f32> = (0..10).map(|v| v as f32).collect();
    let out = run_at(
        18,
        vec![node("CenterCropPad", &["x", "shape"], &["y"], vec![])],
        vec![ints("shape", &[2], &[4, 3])],
        vec![f32_in("x", &[2, 5], &x)],
        &["y"],
    );
    let want = [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 6.0, 7.0, 8.0, 0.0, 0.0, 0.0];
    close(&out[0], &[4, 3], &want);
}

#[test]
fn loss_operators_pick_weight_ignore_and_reduce() {
    let logp = [-1.0f32, -2.0, -3.0, -0.5, -1.5, -2.5];
    let nll = |target: &[i64], ignore: Option<i64>, reduction: &str, weighted: bool| {
        let mut attrs = vec![string_attr("reduction", reduction)];
        if let Some(i) = ignore {
            attrs.push(int_attr("ignore_index", i));
        }
        let inputs: &[&str] = if weighted { &["x", "t", "w"] } else { &["x", "t"] };
        let out = run(
            vec![node("NegativeLogLikelihoodLoss", inputs, &["y"], attrs)],
            vec![floats("w", &[3], &[0.2, 0.3, 0.5])],
            vec![f32_in("x", &[2, 3], &logp), i64_in("t", &[2], target)],
            &["y"],
        );
        out.into_iter().next().unwrap()
    };
    // Targets 2 and 1 weighted 0.5 and 0.3: 3 * 0.5, 1.5 * 0.3; the mean divides by 0.8.
    close(&nll(&[2, 1], None, "none", true), &[2], &[1.5, 0.45]);
    close(&nll(&[2, 1], None, "sum", true), &[], &[1.95]);
    close(&nll(&[2, 1], None, "mean", true), &[], &[1.95 / 0.8]);
    // The ignored target counts neither in the sum nor in the mean's weights.
    close(&nll(&[2, 1], Some(1), "none", true), &[2], &[1.5, 0.0]);
    close(&nll(&[2, 1], Some(1), "mean", true), &[], &[3.0]);
    // An ignore_index outside the classes; no weights: the mean over the one kept.
    close(&nll(&[2, -1], Some(-1), "mean", false), &[], &[3.0]);
    // Softmax cross-entropy of scores [0, ln 3]: probabilities 1/4 and 3/4.
    let out = run(
        vec![node("SoftmaxCrossEntropyLoss", &["s", "t"], &["y", "lp"], vec![])],
        vec![],
        vec![f32_in("s", &[1, 2], &[0.0, 3f32.ln()]), i64_in("t", &[1], &[0])],
        &["y", "lp"],
    );
    close(&out[0], &[], &[4f32.ln()]);
    close(&out[1], &[1, 2], &[0.25f32.ln(), 0.75f32.ln()]);
}

#[test]
fn a_float_input_a_node_needs_at_import_is_specialised_when_given() {
    // Resize's scales fed as a graph input: refused without their value, read (and the program
    // specialised to them) when given.
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![node(
                "Resize",
                &["x", "", "scales"],
                &["y"],
                vec![string_attr("mode", "nearest")],
            )],
            name: "g".into(),
            input: vec![
                value("x", data_type::FLOAT, &[1, 1, 1, 2]),
                value("scales", data_type::FLOAT, &[4]),
            ],
            output: vec![value("y", data_type::FLOAT, &[1, 1, 1, 4])],
            ..Default::default()
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 18 }],
        ..Default::default()
    };
    let bytes = m.encode_to_vec();
    let e = import(&bytes, &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("must be known at import time"), "{e}");
    let scales = HostTensor::new([4], vec![1.0, 1.0, 1.0, 2.0]).unwrap();
    let mut values = Tensors::new();
    values.insert("scales".into(), scales.clone());
    let imported = import(&bytes, &ImportOptions { values, ..Default::default() }).unwrap();
    assert_eq!(imported.specialized, ["scales"]);
    let mut given = Tensors::new();
    given.insert("x".into(), HostTensor::new([1, 1, 1, 2], vec![1.0, 2.0]).unwrap());
    given.insert("scales".into(), scales);
    let bound = imported.bind_inputs(&given).unwrap();
    let program = imported.graph.compile(&CompileOptions::default()).unwrap();
    let mut prepared = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
    let out = prepared.execute(&bound).unwrap();
    close(&out[&imported.outputs[0].1], &[1, 1, 1, 4], &[1.0, 1.0, 2.0, 2.0]);
}

#[test]
fn pad_with_a_value_computed_at_run_time() {
    // constant_value a graph input: the padded places take it at run time (no specialisation).
    let out = run_at(
        18,
        vec![node("Pad", &["x", "pads", "v"], &["y"], vec![])],
        vec![ints("pads", &[2], &[1, 2])],
        vec![f32_in("x", &[2], &[1.0, 2.0]), f32_in("v", &[], &[f32::NEG_INFINITY])],
        &["y"],
    );
    let ninf = f32::NEG_INFINITY;
    assert_eq!(out[0].data(), [ninf, 1.0, 2.0, ninf, ninf]);
}

#[test]
fn a_needed_value_computed_from_a_given_input_is_evaluated_at_import() {
    // Range's limit is Cast(size) + one, size a graph input; `one` was read by a computed node
    // first (the Mul) and stays a constant for the Range.
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![
                node("Mul", &["data", "one"], &["scaled"], vec![]),
                node("Cast", &["size"], &["size_f"], vec![int_attr("to", 1)]),
                node("Add", &["size_f", "one"], &["limit"], vec![]),
                node("Range", &["zero", "limit", "one"], &["r"], vec![]),
            ],
            name: "g".into(),
            initializer: vec![floats("one", &[], &[1.0]), floats("zero", &[], &[0.0])],
            input: vec![
                value("data", data_type::FLOAT, &[2]),
                value("size", data_type::INT64, &[]),
            ],
            output: vec![
                value("scaled", data_type::FLOAT, &[2]),
                value("r", data_type::FLOAT, &[4]),
            ],
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 17 }],
        ..Default::default()
    };
    let bytes = m.encode_to_vec();
    let e = import(&bytes, &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Range") && e.contains("known at import time"), "{e}");
    let size = HostTensor::from_i64(Vec::<usize>::new(), vec![3]).unwrap();
    let mut values = Tensors::new();
    values.insert("size".into(), size.clone());
    let imported = import(&bytes, &ImportOptions { values, ..Default::default() }).unwrap();
    assert_eq!(imported.specialized, ["size"]);
    let mut given = Tensors::new();
    given.insert("data".into(), HostTensor::new([2], vec![2.0, -3.0]).unwrap());
    given.insert("size".into(), size);
    let bound = imported.bind_inputs(&given).unwrap();
    let program = imported.graph.compile(&CompileOptions::default()).unwrap();
    let mut prepared = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
    let out = prepared.execute(&bound).unwrap();
    close(&out[&imported.outputs[0].1], &[2], &[2.0, -3.0]);
    close(&out[&imported.outputs[1].1], &[4], &[0.0, 1.0, 2.0, 3.0]);
}

#[test]
fn linear_attention_and_causal_conv_with_state_by_hand() {
    // One head of size 1, two steps, scale 1: the linear rule sums k v into the state; the
    // delta rule first corrects v to beta (v - k S).
    let la = |rule: &str, with_beta: bool| {
        let mut inputs = vec!["q", "k", "v"];
        if with_beta {
            inputs.extend(["", "", "beta"]);
        }
        let attrs = vec![
            int_attr("q_num_heads", 1),
            int_attr("kv_num_heads", 1),
            float_attr("scale", 1.0),
            string_attr("update_rule", rule),
        ];
        let mut given = vec![
            f32_in("q", &[1, 2, 1], &[1.0, 2.0]),
            f32_in("k", &[1, 2, 1], &[3.0, 4.0]),
            f32_in("v", &[1, 2, 1], &[5.0, 6.0]),
        ];
        if with_beta {
            given.push(f32_in("beta", &[1, 2, 1], &[0.5, 0.5]));
        }
        run_at(
            27,
            vec![node("LinearAttention", &inputs, &["y", "s"], attrs)],
            vec![],
            given,
            &["y", "s"],
        )
    };
    let out = la("linear", false);
    close(&out[0], &[1, 2, 1], &[15.0, 78.0]);
    close(&out[1], &[1, 1, 1, 1], &[39.0]);
    let out = la("delta", true);
    close(&out[0], &[1, 2, 1], &[7.5, -81.0]);
    close(&out[1], &[1, 1, 1, 1], &[-40.5]);
    // Kernel [1, 2] over [past 5 | 1, 2, 3], bias 0.5; the state is the last position.
    let out = run_at(
        27,
        vec![node("CausalConvWithState", &["x", "w", "b", "past"], &["y", "state"], vec![])],
        vec![floats("w", &[1, 1, 2], &[1.0, 2.0]), floats("b", &[1], &[0.5])],
        vec![f32_in("x", &[1, 1, 3], &[1.0, 2.0, 3.0]), f32_in("past", &[1, 1, 1], &[5.0])],
        &["y", "state"],
    );
    close(&out[0], &[1, 1, 3], &[7.5, 5.5, 8.5]);
    close(&out[1], &[1, 1, 1], &[3.0]);
}

#[test]
fn affine_grid_of_the_identity_is_the_pixel_centres() {
    let theta = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    for (corners, c) in [(0, 0.5f32), (1, 1.0)] {
        let out = run_at(
            20,
            vec![node(
                "AffineGrid",
                &["theta", "size"],
                &["g"],
                vec![int_attr("align_corners", corners)],
            )],
            vec![ints("size", &[4], &[1, 1, 2, 2])],
            vec![f32_in("theta", &[1, 2, 3], &theta)],
            &["g"],
        );
        // (x, y) per position, x along the last axis.
        close(&out[0], &[1, 2, 2, 2], &[-c, -c, c, -c, -c, c, c, c]);
    }
}

#[test]
fn grid_sample_reads_between_pixels_and_outside() {
    let sample = |mode: &str, padding: &str, at: [f32; 2]| {
        let attrs = vec![string_attr("mode", mode), string_attr("padding_mode", padding)];
        let out = run_at(
            20,
            vec![node("GridSample", &["x", "grid"], &["y"], attrs)],
            vec![],
            vec![
                f32_in("x", &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
                f32_in("grid", &[1, 1, 1, 2], &at),
            ],
            &["y"],
        );
        out[0].data()[0]
    };
    // The centre: the mean of the four pixels; nearest rounds 0.5 to the even 0.
    assert_eq!(sample("linear", "zeros", [0.0, 0.0]), 2.5);
    assert_eq!(sample("nearest", "zeros", [0.0, 0.0]), 1.0);
    // Far outside: zeros, the clamped corner, the reflected corner.
    assert_eq!(sample("linear", "zeros", [2.0, 2.0]), 0.0);
    assert_eq!(sample("linear", "border", [2.0, 2.0]), 4.0);
    assert_eq!(sample("nearest", "reflection", [-2.0, -2.0]), 4.0);
}

#[test]
fn cumprod_det_reverse_sequence_and_binarizer_by_hand() {
    for (exclusive, reverse, want) in [
        (0, 0, [1.0, 2.0, 6.0, 24.0]),
        (1, 0, [1.0, 1.0, 2.0, 6.0]),
        (0, 1, [24.0, 24.0, 12.0, 4.0]),
        (1, 1, [24.0, 12.0, 4.0, 1.0]),
    ] {
        let attrs = vec![int_attr("exclusive", exclusive), int_attr("reverse", reverse)];
        let out = run_at(
            26,
            vec![node("CumProd", &["x", "axis"], &["y"], attrs)],
            vec![ints("axis", &[], &[0])],
            vec![f32_in("x", &[4], &[1.0, 2.0, 3.0, 4.0])],
            &["y"],
        );
        close(&out[0], &[4], &want);
    }
    let m =
        [2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0];
    let out = run(
        vec![node("Det", &["x"], &["d"], vec![])],
        vec![],
        vec![f32_in("x", &[2, 3, 3], &m)],
        &["d"],
    );
    // 2 (12 - 1) - 1 (4 - 0) = 18; the second: 1 (50 - 48) - 2 (40 - 42) + 3 (32 - 35) = -3.
    close(&out[0], &[2], &[18.0, -3.0]);
    // Time 4 x batch 2, lengths 2 and 3: each row's first steps reversed.
    let x: Vec<f32> = (0..8).map(|i| ((i / 2) * 10 + i % 2) as f32).collect();
    let out = run(
        vec![node("ReverseSequence", &["x", "lens"], &["y"], vec![])],
        vec![ints("lens", &[2], &[2, 3])],
        vec![f32_in("x", &[4, 2], &x)],
        &["y"],
    );
    close(&out[0], &[4, 2], &[10.0, 21.0, 0.0, 11.0, 20.0, 1.0, 30.0, 31.0]);
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![NodeProto {
                domain: "ai.onnx.ml".into(),
                ..node("Binarizer", &["x"], &["y"], vec![float_attr("threshold", 0.5)])
            }],
            name: "g".into(),
            input: vec![value("x", data_type::FLOAT, &[3])],
            output: vec![value("y", data_type::FLOAT, &[3])],
            ..Default::default()
        }),
        opset_import: vec![
            OperatorSetIdProto { domain: "ai.onnx.ml".into(), version: 1 },
            OperatorSetIdProto { domain: String::new(), version: 17 },
        ],
        ..Default::default()
    };
    let imported = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap();
    let mut given = Tensors::new();
    given.insert("x".into(), HostTensor::new([3], vec![0.2, 0.5, 0.9]).unwrap());
    let bound = imported.bind_inputs(&given).unwrap();
    let program = imported.graph.compile(&CompileOptions::default()).unwrap();
    let mut prepared = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
    let out = prepared.execute(&bound).unwrap();
    close(&out[&imported.outputs[0].1], &[3], &[0.0, 0.0, 1.0]);
}

#[test]
fn col2im_sums_overlapping_blocks() {
    // 1-D: block 2 at stride 1 over an image of 4: offsets 0 and 1 overlap in the middle.
    let out = run_at(
        18,
        vec![node("Col2Im", &["x", "image", "block"], &["y"], vec![])],
        vec![ints("image", &[1], &[4]), ints("block", &[1], &[2])],
        vec![f32_in("x", &[1, 2, 3], &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0])],
        &["y"],
    );
    close(&out[0], &[1, 1, 4], &[1.0, 12.0, 23.0, 30.0]);
}

#[test]
fn scan_is_unrolled_over_the_sequence() {
    // A running sum: state + x_t, each step's state also a scan output; then in reverse.
    let body = GraphProto {
        node: vec![
            node("Add", &["s_in", "x_t"], &["s_out"], vec![]),
            node("Identity", &["s_out"], &["y_t"], vec![]),
        ],
        name: "body".into(),
        input: vec![value("s_in", data_type::FLOAT, &[1]), value("x_t", data_type::FLOAT, &[1])],
        output: vec![value("s_out", data_type::FLOAT, &[1]), value("y_t", data_type::FLOAT, &[1])],
        ..Default::default()
    };
    for (reverse, want) in [(0, [1.0, 3.0, 6.0]), (1, [3.0, 5.0, 6.0])] {
        let attrs = vec![
            AttributeProto {
                name: "body".into(),
                g: Some(body.clone()),
                r#type: 5,
                ..Default::default()
            },
            int_attr("num_scan_inputs", 1),
            AttributeProto {
                name: "scan_input_directions".into(),
                ints: vec![reverse],
                r#type: 7,
                ..Default::default()
            },
        ];
        let out = run_at(
            17,
            vec![node("Scan", &["init", "xs"], &["last", "ys"], attrs)],
            vec![floats("init", &[1], &[0.0])],
            vec![f32_in("xs", &[3, 1], &[1.0, 2.0, 3.0])],
            &["last", "ys"],
        );
        close(&out[0], &[1], &[6.0]);
        close(&out[1], &[3, 1], &want);
    }
}

#[test]
fn loop_with_a_known_trip_count_is_unrolled() {
    // Three doublings of x; each step's value is also a scan output.
    let body = GraphProto {
        node: vec![
            node("Identity", &["cond_in"], &["cond_out"], vec![]),
            node("Mul", &["x_in", "two"], &["x_out"], vec![]),
            node("Identity", &["x_out"], &["y_t"], vec![]),
        ],
        name: "body".into(),
        input: vec![
            value("i", data_type::INT64, &[]),
            value("cond_in", data_type::BOOL, &[]),
            value("x_in", data_type::FLOAT, &[1]),
        ],
        output: vec![
            value("cond_out", data_type::BOOL, &[]),
            value("x_out", data_type::FLOAT, &[1]),
            value("y_t", data_type::FLOAT, &[1]),
        ],
        ..Default::default()
    };
    let attrs = vec![AttributeProto {
        name: "body".into(),
        g: Some(body),
        r#type: 5,
        ..Default::default()
    }];
    let out = run_at(
        17,
        vec![node("Loop", &["m", "", "x"], &["last", "ys"], attrs)],
        vec![ints("m", &[], &[3]), floats("two", &[], &[2.0])],
        vec![f32_in("x", &[1], &[1.0])],
        &["last", "ys"],
    );
    close(&out[0], &[1], &[8.0]);
    close(&out[1], &[3, 1], &[2.0, 4.0, 8.0]);
}

#[test]
fn antialiased_linear_downsampling_widens_the_kernel() {
    // Half the length: a 4-tap triangle (0.125, 0.375, 0.375, 0.125) around 0.5 and 2.5, the
    // edges clamped.
    let attrs = vec![string_attr("mode", "linear"), int_attr("antialias", 1)];
    let out = run_at(
        18,
        vec![node("Resize", &["x", "", "scales"], &["y"], attrs)],
        vec![floats("scales", &[4], &[1.0, 1.0, 1.0, 0.5])],
        vec![f32_in("x", &[1, 1, 1, 4], &[1.0, 2.0, 3.0, 4.0])],
        &["y"],
    );
    close(&out[0], &[1, 1, 1, 2], &[1.625, 3.375]);
}

#[test]
fn what_a_fresh_user_broke_in_the_new_operators() {
    // A pooling kernel larger than the padded input is one error naming the attribute.
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![node(
                "LpPool",
                &["x"],
                &["y"],
                vec![AttributeProto {
                    name: "kernel_shape".into(),
                    ints: vec![9, 9],
                    r#type: 7,
                    ..Default::default()
                }],
            )],
            name: "g".into(),
            input: vec![value("x", data_type::FLOAT, &[1, 1, 7, 8])],
            output: vec![value("y", data_type::FLOAT, &[])],
            ..Default::default()
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 18 }],
        ..Default::default()
    };
    let e = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("kernel_shape") && e.contains("larger than the padded input"), "{e}");
    // Det of 0x0 matrices is the empty product.
    let out = run(
        vec![node("Det", &["x"], &["d"], vec![])],
        vec![],
        vec![f32_in("x", &[2, 0, 0], &[])],
        &["d"],
    );
    close(&out[0], &[2], &[1.0, 1.0]);
}

#[test]
fn batch_norm_training_mode_dropout_of_ratio_zero_and_empty_boolean_reductions() {
    // x [2, 2, 1]: channel 0 holds 1 and 3 (mean 2, variance 1), channel 1 holds 2 and 2
    // (mean 2, variance 0). Scale [1, 2], bias [0, 1], running mean [0, 10] and variance
    // [1, 1] with momentum 0.5: y = +-1/sqrt(1 + 1e-5) and 1; running mean [1, 6], variance
    // [1, 0.5].
    let out = run_at(
        15,
        vec![node(
            "BatchNormalization",
            &["x", "s", "b", "m", "v"],
            &["y", "rm", "rv"],
            vec![int_attr("training_mode", 1), float_attr("momentum", 0.5)],
        )],
        vec![],
        vec![
            f32_in("x", &[2, 2, 1], &[1.0, 2.0, 3.0, 2.0]),
            f32_in("s", &[2], &[1.0, 2.0]),
            f32_in("b", &[2], &[0.0, 1.0]),
            f32_in("m", &[2], &[0.0, 10.0]),
            f32_in("v", &[2], &[1.0, 1.0]),
        ],
        &["y", "rm", "rv"],
    );
    let one = 1.0 / (1.0f32 + 1e-5).sqrt();
    close(&out[0], &[2, 2, 1], &[-one, 1.0, one, 1.0]);
    close(&out[1], &[2], &[1.0, 6.0]);
    close(&out[2], &[2], &[1.0, 0.5]);
    // Dropout in training mode with a ratio of 0 drops nothing: x, and a mask all true.
    let bool_const = |name: &str, v: i32| TensorProto {
        dims: vec![],
        data_type: data_type::BOOL,
        int32_data: vec![v],
        name: name.into(),
        ..Default::default()
    };
    let out = run_at(
        22,
        vec![node("Dropout", &["x", "r", "t"], &["y", "mask"], vec![])],
        vec![floats("r", &[], &[0.0]), bool_const("t", 1)],
        vec![f32_in("x", &[3], &[1.0, -2.0, 3.0])],
        &["y", "mask"],
    );
    close(&out[0], &[3], &[1.0, -2.0, 3.0]);
    close(&out[1], &[3], &[1.0, 1.0, 1.0]);
    // Any other ratio is random: refused, naming training mode.
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![node("Dropout", &["x", "r", "t"], &["y"], vec![])],
            name: "g".into(),
            initializer: vec![floats("r", &[], &[0.5]), bool_const("t", 1)],
            input: vec![value("x", data_type::FLOAT, &[3])],
            output: vec![value("y", data_type::FLOAT, &[3])],
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 22 }],
        ..Default::default()
    };
    let e = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Dropout") && e.contains("training mode"), "{e}");
    // ReduceMax of booleans over an empty axis is false (any), ReduceMin true (all).
    for (op, want) in [("ReduceMax", 0.0), ("ReduceMin", 1.0)] {
        let out = run_at(
            20,
            vec![node(op, &["x", "axes"], &["y"], vec![])],
            vec![ints("axes", &[1], &[1])],
            vec![bool_in("x", &[2, 0, 3], &[])],
            &["y"],
        );
        close(&out[0], &[2, 1, 3], &[want; 6]);
    }
}

#[test]
fn tfidf_vectorizer_counts_ngrams_with_skips_and_weights() {
    // Pool: unigrams 4 and 5 (columns 0, 1), the bigram (4, 5) (column 2); skips up to 1.
    // Row [4, 5, 5, 9, 4]: 4 twice, 5 twice, (4, 5) adjacent at 0 and one apart at 0 -> 2.
    // Row [1, 1, 1, 1, 1]: nothing.
    let list = |name: &str, ints: &[i64]| AttributeProto {
        name: name.into(),
        ints: ints.to_vec(),
        r#type: 7,
        ..Default::default()
    };
    let tfidf = |mode: &str, weights: bool| {
        let mut attrs = vec![
            string_attr("mode", mode),
            int_attr("min_gram_length", 1),
            int_attr("max_gram_length", 2),
            int_attr("max_skip_count", 1),
            list("ngram_counts", &[0, 2]),
            list("ngram_indexes", &[0, 1, 2]),
            list("pool_int64s", &[4, 5, 4, 5]),
        ];
        if weights {
            attrs.push(AttributeProto {
                name: "weights".into(),
                floats: vec![0.5, 1.0, 2.0],
                r#type: 6,
                ..Default::default()
            });
        }
        node("TfIdfVectorizer", &["x"], &["y"], attrs)
    };
    let x = [4, 5, 5, 9, 4, 1, 1, 1, 1, 1];
    for (mode, weights, want) in [
        ("TF", false, [2.0, 2.0, 2.0]),
        ("TFIDF", true, [1.0, 2.0, 4.0]),
        ("IDF", true, [0.5, 1.0, 2.0]),
        ("IDF", false, [1.0, 1.0, 1.0]),
    ] {
        let out =
            run_at(9, vec![tfidf(mode, weights)], vec![], vec![i64_in("x", &[2, 5], &x)], &["y"]);
        let mut all = want.to_vec();
        all.extend([0.0; 3]);
        close(&out[0], &[2, 3], &all);
    }
    // A 1-D input gives a 1-D output; without skips the bigram one apart is not counted.
    let mut no_skip = tfidf("TF", false);
    no_skip.attribute[3] = int_attr("max_skip_count", 0);
    let out = run_at(9, vec![no_skip], vec![], vec![i32_in("x", &[5], &[4, 5, 5, 9, 4])], &["y"]);
    close(&out[0], &[3], &[2.0, 2.0, 1.0]);
}

#[test]
fn deform_conv_reads_between_pixels_with_mask_bias_and_groups() {
    let ints_attr = |name: &str, v: &[i64]| AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: 7,
        ..Default::default()
    };
    // X [[1, 2], [3, 4]], a 1x1 kernel of 2, bias 10. Offsets (dh, dw) per output position:
    // (0.5, 0) reads (0.5, 0) = 2; (0, -0.5) reads (0, 0.5) = 1.5; (1, 0) reads (2, 0), outside
    // = 0; (-0.5, -0.5) reads (0.5, 0.5) = 2.5. Mask [1, 2, 1, 0.5]: 2 * [2, 3, 0, 1.25] + 10.
    let out = run_at(
        19,
        vec![node(
            "DeformConv",
            &["x", "w", "offset", "b", "mask"],
            &["y"],
            vec![ints_attr("kernel_shape", &[1, 1])],
        )],
        vec![],
        vec![
            f32_in("x", &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
            f32_in("w", &[1, 1, 1, 1], &[2.0]),
            f32_in("offset", &[1, 2, 2, 2], &[0.5, 0.0, 1.0, -0.5, 0.0, -0.5, 0.0, -0.5]),
            f32_in("b", &[1], &[10.0]),
            f32_in("mask", &[1, 1, 2, 2], &[1.0, 2.0, 1.0, 0.5]),
        ],
        &["y"],
    );
    close(&out[0], &[1, 1, 2, 2], &[14.0, 16.0, 10.0, 12.5]);
    // Two groups and two offset groups over [1, 2, 3] and [10, 20, 30], kernels [1, 1] and
    // [1, -1] of width 2: the first group unshifted (3, 5), the second shifted one to the
    // right (20 - 30 = -10, then 30 - 0 outside = 30).
    let mut offset = vec![0.0; 16];
    for i in [10, 11, 14, 15] {
        offset[i] = 1.0;
    }
    let out = run_at(
        19,
        vec![node(
            "DeformConv",
            &["x", "w", "offset"],
            &["y"],
            vec![int_attr("group", 2), int_attr("offset_group", 2)],
        )],
        vec![],
        vec![
            f32_in("x", &[1, 2, 1, 3], &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0]),
            f32_in("w", &[2, 1, 1, 2], &[1.0, 1.0, 1.0, -1.0]),
            f32_in("offset", &[1, 8, 1, 2], &offset),
        ],
        &["y"],
    );
    close(&out[0], &[1, 2, 1, 2], &[3.0, 5.0, -10.0, 30.0]);
}

#[test]
fn scan_of_opset_8_runs_per_batch_item() {
    // Opset 8: states [B, ...], scan inputs [B, T, ...], no sequence_lens. Running sums from 0
    // over [1, 2, 3] and from 10 over [4, 5, 6]; then with the scan input reversed.
    let body = GraphProto {
        node: vec![
            node("Add", &["s_in", "x_t"], &["s_out"], vec![]),
            node("Identity", &["s_out"], &["y_t"], vec![]),
        ],
        name: "body".into(),
        input: vec![value("s_in", data_type::FLOAT, &[1]), value("x_t", data_type::FLOAT, &[1])],
        output: vec![value("s_out", data_type::FLOAT, &[1]), value("y_t", data_type::FLOAT, &[1])],
        ..Default::default()
    };
    for (reverse, want) in
        [(0, [1.0, 3.0, 6.0, 14.0, 19.0, 25.0]), (1, [3.0, 5.0, 6.0, 16.0, 21.0, 25.0])]
    {
        let attrs = vec![
            AttributeProto {
                name: "body".into(),
                g: Some(body.clone()),
                r#type: 5,
                ..Default::default()
            },
            int_attr("num_scan_inputs", 1),
            AttributeProto {
                name: "directions".into(),
                ints: vec![reverse],
                r#type: 7,
                ..Default::default()
            },
        ];
        let out = run_at(
            8,
            vec![node("Scan", &["", "init", "xs"], &["last", "ys"], attrs)],
            vec![],
            vec![
                f32_in("init", &[2, 1], &[0.0, 10.0]),
                f32_in("xs", &[2, 3, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            ],
            &["last", "ys"],
        );
        close(&out[0], &[2, 1], &[6.0, 25.0]);
        close(&out[1], &[2, 3, 1], &want);
    }
}

/// The import error of a graph, as text.
fn import_error(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: &[Input],
) -> String {
    let bytes = model_of(opset, nodes, initializers, inputs, &["y"]);
    import(&bytes, &ImportOptions::default()).unwrap_err().to_string()
}

#[test]
fn invalid_models_onnx_runtime_refuses_at_load_are_refused_naming_node_op_and_type() {
    // Not of a float or integer input (ONNX's Not takes bool only); they ran as `x == 0`.
    let not = || vec![node("Not", &["b"], &["y"], vec![])];
    let e = import_error(13, not(), vec![], &[f32_in("b", &[2], &[1.0, 0.0])]);
    assert_eq!(
        e,
        "node `not` (Not): input 0 (`b`) is float; Not takes a bool tensor (ONNX Runtime refuses \
         the model)"
    );
    let e = import_error(13, not(), vec![], &[i64_in("b", &[2], &[1, 0])]);
    assert!(e.starts_with("node `not` (Not): input 0 (`b`) is int64;"), "{e}");
    // Folded too: a float constant.
    let e = import_error(13, not(), vec![floats("b", &[1], &[1.0])], &[]);
    assert!(e.starts_with("node `not` (Not): input 0 (`b`) is float;"), "{e}");
    // A bool input, and a folded comparison, still run.
    let out = run_at(13, not(), vec![], vec![bool_in("b", &[2], &[true, false])], &["y"]);
    assert_eq!(out[0].data(), [0.0, 1.0]);
    let nodes = vec![
        node("Equal", &["p", "q"], &["b"], vec![]),
        node("Not", &["b"], &["n"], vec![]),
        node("Cast", &["n"], &["y"], vec![int_attr("to", i64::from(data_type::FLOAT))]),
    ];
    let out =
        run_at(13, nodes, vec![ints("p", &[2], &[1, 2]), ints("q", &[2], &[1, 3])], vec![], &["y"]);
    assert_eq!(out[0].data(), [0.0, 1.0]);
    // TfIdfVectorizer of float tokens.
    let tfidf = node(
        "TfIdfVectorizer",
        &["x"],
        &["y"],
        vec![
            string_attr("mode", "TF"),
            int_attr("min_gram_length", 1),
            int_attr("max_gram_length", 1),
            int_attr("max_skip_count", 0),
            AttributeProto {
                name: "ngram_counts".into(),
                ints: vec![0],
                r#type: 7,
                ..Default::default()
            },
            AttributeProto {
                name: "ngram_indexes".into(),
                ints: vec![0],
                r#type: 7,
                ..Default::default()
            },
            AttributeProto {
                name: "pool_int64s".into(),
                ints: vec![1],
                r#type: 7,
                ..Default::default()
            },
        ],
    );
    let e = import_error(9, vec![tfidf], vec![], &[f32_in("x", &[2], &[1.0, 2.0])]);
    assert_eq!(
        e,
        "node `tfidfvectorizer` (TfIdfVectorizer): input 0 (`x`) is float; TfIdfVectorizer takes \
         int32 or int64 tokens (ONNX Runtime refuses the model)"
    );
    // BitwiseXor before opset 18, where it does not exist.
    let xor = || vec![node("BitwiseXor", &["a", "b"], &["y"], vec![])];
    let ab = || [i64_in("a", &[1], &[6]), i64_in("b", &[1], &[3])];
    assert_eq!(
        import_error(17, xor(), vec![], &ab()),
        "node `bitwisexor` (BitwiseXor): BitwiseXor exists from opset 18 on; the model's opset \
         is 17 (ONNX Runtime refuses the model)"
    );
    let out = run_at(18, xor(), vec![], ab().into(), &["y"]);
    assert_eq!(out[0].index_values().unwrap(), [5]);
    // BatchNormalization's training_mode is 0 or 1.
    let bn = node(
        "BatchNormalization",
        &["x", "s", "b", "m", "v"],
        &["y"],
        vec![int_attr("training_mode", 2)],
    );
    let stats = ["s", "b", "m", "v"].map(|name| floats(name, &[1], &[1.0]));
    let e = import_error(15, vec![bn], stats.into(), &[f32_in("x", &[1, 1, 2], &[1.0, 2.0])]);
    assert_eq!(
        e,
        "node `batchnormalization` (BatchNormalization): attribute training_mode = 2 (it is 0 or 1)"
    );
}
