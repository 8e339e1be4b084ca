//! Operators that select or place elements, each on a small hand-written graph run on the CPU
//! runtime (fused and unfused) against values worked out by hand: the ones whose output's
//! shape depends on their input values, evaluated at import from given graph inputs (NonZero,
//! Unique, NonMaxSuppression, MelWeightMatrix; refused without the values), MaxPool's Indices
//! output (ties, storage orders, several planes, ceil_mode) and MaxUnpool (with and without
//! output_shape, its positions checked).

use lumen_compiler::DType;
use lumen_onnx::proto::{AttributeProto, NodeProto, TensorProto};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{HostTensor, Tensors};

mod common;
use common::*;

/// Imports the graph with every input's value given (as `lumen run` does), runs it fused and
/// unfused on the CPU; the outputs and the inputs the program was specialised to, or the first
/// error as text.
fn try_run(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Result<(Vec<HostTensor>, Vec<String>), String> {
    let bytes = model_of(opset, nodes, initializers, &inputs, outputs);
    let given: Tensors = inputs.into_iter().map(|i| (i.name.to_string(), i.value)).collect();
    let options = ImportOptions { values: given.clone(), ..Default::default() };
    let imported = import(&bytes, &options).map_err(|e| e.to_string())?;
    let bound = imported.bind_inputs(&given).map_err(|e| e.to_string())?;
    let outputs = run_fused_and_unfused(&imported, &bound, "select")?;
    Ok((outputs, imported.specialized))
}

fn run(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> (Vec<HostTensor>, Vec<String>) {
    try_run(opset, nodes, initializers, inputs, outputs).unwrap()
}

/// The import error of a graph whose inputs' values are not given.
fn import_error(opset: i64, nodes: Vec<NodeProto>, inputs: Vec<Input>) -> String {
    let bytes = model_of(opset, nodes, vec![], &inputs, &["y"]);
    import(&bytes, &ImportOptions::default()).unwrap_err().to_string()
}

fn floats(got: &HostTensor, shape: &[usize], want: &[f32]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.data(), want);
}

fn exact(got: &HostTensor, shape: &[usize], want: &[i64]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), DType::I64);
    assert_eq!(got.index_values().unwrap(), want);
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: name.into(), ints: v.to_vec(), r#type: 7, ..Default::default() }
}

#[test]
fn non_zero_lists_coordinates_row_major_from_a_given_input() {
    // [[1, 0], [1, 1]]: (0, 0), (1, 0), (1, 1) as columns.
    let (out, specialized) = run(
        13,
        vec![node("NonZero", &["x"], &["y"], vec![])],
        vec![],
        vec![f32_in("x", &[2, 2], &[1.0, 0.0, 1.0, 1.0])],
        &["y"],
    );
    exact(&out[0], &[2, 3], &[0, 1, 1, 0, 0, 1]);
    assert_eq!(specialized, ["x"]);
    // Without the value: one error naming the operator and the input.
    let e = import_error(
        13,
        vec![node("NonZero", &["x"], &["y"], vec![])],
        vec![f32_in("x", &[2, 2], &[0.0; 4])],
    );
    assert!(e.contains("NonZero") && e.contains("`x`") && e.contains("known at import"), "{e}");
}

#[test]
fn unique_sorted_unsorted_and_along_an_axis() {
    let outs = ["y", "indices", "inverse", "counts"];
    // [2, 1, 1, 3] sorted: values [1, 2, 3], first seen at [1, 0, 3], inverse [1, 0, 0, 2],
    // counts [2, 1, 1].
    let (out, _) = run(
        11,
        vec![node("Unique", &["x"], &outs, vec![])],
        vec![],
        vec![f32_in("x", &[4], &[2.0, 1.0, 1.0, 3.0])],
        &outs,
    );
    floats(&out[0], &[3], &[1.0, 2.0, 3.0]);
    exact(&out[1], &[3], &[1, 0, 3]);
    exact(&out[2], &[4], &[1, 0, 0, 2]);
    exact(&out[3], &[3], &[2, 1, 1]);
    // Rows of [[1, 0], [2, 3], [1, 0]] (axis 0) in order of first occurrence, integers.
    let (out, _) = run(
        11,
        vec![node("Unique", &["x"], &outs, vec![int_attr("axis", 0), int_attr("sorted", 0)])],
        vec![],
        vec![i64_in("x", &[3, 2], &[1, 0, 2, 3, 1, 0])],
        &outs,
    );
    exact(&out[0], &[2, 2], &[1, 0, 2, 3]);
    exact(&out[1], &[2], &[0, 1]);
    exact(&out[2], &[3], &[0, 1, 0]);
    exact(&out[3], &[2], &[2, 1]);
    // Columns (axis -1) of [[3, 1, 3], [0, 5, 0]], sorted: [1, 5] before [3, 0].
    let (out, _) = run(
        11,
        vec![node("Unique", &["x"], &outs, vec![int_attr("axis", -1)])],
        vec![],
        vec![f32_in("x", &[2, 3], &[3.0, 1.0, 3.0, 0.0, 5.0, 0.0])],
        &outs,
    );
    floats(&out[0], &[2, 2], &[1.0, 3.0, 5.0, 0.0]);
    exact(&out[1], &[2], &[1, 0]);
    exact(&out[2], &[3], &[1, 0, 1]);
    exact(&out[3], &[2], &[1, 2]);
    let e = try_run(
        11,
        vec![node("Unique", &["x"], &["y"], vec![int_attr("axis", 2)])],
        vec![],
        vec![f32_in("x", &[4], &[0.0; 4])],
        &["y"],
    )
    .unwrap_err();
    assert!(e.contains("Unique") && e.contains("axis 2 is out of range"), "{e}");
}

#[test]
fn non_max_suppression_keeps_the_best_boxes_by_iou_and_score() {
    // Three corner boxes [y1, x1, y2, x2] scored 0.9, 0.8, 0.7: box 1 overlaps box 0 with IoU
    // 0.9 / 1.1 = 0.82 > 0.5 and is dropped; box 2 is apart.
    let boxes = [0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, 2.0, 1.0, 3.0];
    let inputs = |threshold: f32| {
        vec![
            f32_in("boxes", &[1, 3, 4], &boxes),
            f32_in("scores", &[1, 1, 3], &[0.9, 0.8, 0.7]),
            i64_in("limit", &[1], &[3]),
            f32_in("iou", &[1], &[0.5]),
            f32_in("min_score", &[1], &[threshold]),
        ]
    };
    let nms = || {
        node("NonMaxSuppression", &["boxes", "scores", "limit", "iou", "min_score"], &["y"], vec![])
    };
    let (out, specialized) = run(11, vec![nms()], vec![], inputs(0.0), &["y"]);
    exact(&out[0], &[2, 3], &[0, 0, 0, 0, 0, 2]);
    assert_eq!(specialized.len(), 5);
    // Scores must be over 0.75: box 0 alone.
    let (out, _) = run(11, vec![nms()], vec![], inputs(0.75), &["y"]);
    exact(&out[0], &[1, 3], &[0, 0, 0]);
    // Centre boxes [x, y, w, h]: (0.5, 0.5) and (0.5, 0.6) with unit sides overlap 0.9 as well;
    // two classes, the second scoring box 1 higher; at most one box per class.
    let centres = [0.5, 0.5, 1.0, 1.0, 0.5, 0.6, 1.0, 1.0];
    let (out, _) = run(
        11,
        vec![node(
            "NonMaxSuppression",
            &["boxes", "scores", "limit"],
            &["y"],
            vec![int_attr("center_point_box", 1)],
        )],
        vec![],
        vec![
            f32_in("boxes", &[1, 2, 4], &centres),
            f32_in("scores", &[1, 2, 2], &[0.9, 0.8, 0.1, 0.2]),
            i64_in("limit", &[1], &[1]),
        ],
        &["y"],
    );
    exact(&out[0], &[2, 3], &[0, 0, 0, 0, 1, 1]);
}

#[test]
fn non_max_suppression_of_no_box_or_no_class_is_empty() {
    // No box ([1, 0, 4], scores [1, 1, 0]) and no class (scores [1, 0, 3]): no row selected, an
    // empty [0, 3] int64 result, as onnxruntime 1.32 gives (scripts/ort_regression_values.py,
    // nms_no_boxes_or_classes); these were refused as if boxes and scores were absent.
    for (boxes, scores) in [([1, 0, 4], [1, 1, 0]), ([1, 3, 4], [1, 0, 3])] {
        let count = |s: [usize; 3]| s.iter().product::<usize>();
        let (out, _) = run(
            11,
            vec![node("NonMaxSuppression", &["b", "s", "m", "t"], &["y"], vec![])],
            vec![ints("m", &[1], &[10])],
            vec![
                f32_in("b", &boxes, &vec![0.0; count(boxes)]),
                f32_in("s", &scores, &vec![0.0; count(scores)]),
                f32_in("t", &[1], &[0.5]),
            ],
            &["y"],
        );
        exact(&out[0], &[0, 3], &[]);
    }
}

#[test]
fn mel_weight_matrix_as_onnx_reference_computes_it() {
    // 2 mel bins over 0..4 Hz of an 8-point DFT at 8 Hz: the bin edges fall on FFT bins
    // 0, 1, 2, 3, so each filter is a single 1 at its centre ([5, 2]).
    let inputs = |bins: i64, dft: i64, rate: i64, low: f32, high: f32| {
        vec![
            i64_in("bins", &[], &[bins]),
            i64_in("dft", &[], &[dft]),
            i64_in("rate", &[], &[rate]),
            f32_in("low", &[], &[low]),
            f32_in("high", &[], &[high]),
        ]
    };
    let mel = || node("MelWeightMatrix", &["bins", "dft", "rate", "low", "high"], &["y"], vec![]);
    let (out, _) = run(17, vec![mel()], vec![], inputs(2, 8, 8, 0.0, 4.0), &["y"]);
    floats(&out[0], &[5, 2], &[0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    // 3 bins over 1..7 Hz of a 16-point DFT at 16 Hz: edges 2, 3, 4, 6 (ONNX's reference),
    // the last filter falling over two bins (1 at bin 4, 0.5 at bin 5).
    let (out, _) = run(17, vec![mel()], vec![], inputs(3, 16, 16, 1.0, 7.0), &["y"]);
    let mut want = [0.0f32; 27];
    want[2 * 3] = 1.0;
    want[3 * 3 + 1] = 1.0;
    want[4 * 3 + 2] = 1.0;
    want[5 * 3 + 2] = 0.5;
    floats(&out[0], &[9, 3], &want);
    let e = try_run(17, vec![mel()], vec![], inputs(0, 8, 8, 0.0, 4.0), &["y"]).unwrap_err();
    assert!(e.contains("MelWeightMatrix") && e.contains("num_mel_bins 0"), "{e}");
    // output_datatype INT32: the truncated weights as int32 (was int64), onnxruntime 1.32's
    // values (scripts/ort_regression_values.py, mel_int32).
    let int32 = node(
        "MelWeightMatrix",
        &["bins", "dft", "rate", "low", "high"],
        &["y"],
        vec![int_attr("output_datatype", i64::from(lumen_onnx::proto::data_type::INT32))],
    );
    let (out, _) = run(17, vec![int32], vec![], inputs(3, 8, 16, 0.0, 8.0), &["y"]);
    assert_eq!((out[0].shape(), out[0].dtype()), (&[5, 3][..], DType::I32));
    assert_eq!(out[0].index_values().unwrap(), [1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn max_pool_indices_ties_storage_orders_planes_and_ceil_mode() {
    // [[1, 5, 3], [4, 2, 6], [7, 0, 9]], 2x2 windows, stride 1: maxima 5, 6, 7, 9 at flat
    // positions 1, 5, 6, 8 (row-major) or h + 3 w = 3, 7, 2, 8 (column-major).
    let x = [1.0, 5.0, 3.0, 4.0, 2.0, 6.0, 7.0, 0.0, 9.0];
    for (order, want) in [(0, [1, 5, 6, 8]), (1, [3, 7, 2, 8])] {
        let (out, _) = run(
            12,
            vec![node(
                "MaxPool",
                &["x"],
                &["y", "i"],
                vec![ints_attr("kernel_shape", &[2, 2]), int_attr("storage_order", order)],
            )],
            vec![],
            vec![f32_in("x", &[1, 1, 3, 3], &x)],
            &["y", "i"],
        );
        floats(&out[0], &[1, 1, 2, 2], &[5.0, 6.0, 7.0, 9.0]);
        exact(&out[1], &[1, 1, 2, 2], &want);
    }
    // Two planes: [[3, 3], [3, 1]] ties (the first wins: 0), [[0, 2], [1, -1]] has 2 at 1 of
    // the second plane (4 + 1).
    let (out, _) = run(
        12,
        vec![node("MaxPool", &["x"], &["y", "i"], vec![ints_attr("kernel_shape", &[2, 2])])],
        vec![],
        vec![f32_in("x", &[1, 2, 2, 2], &[3.0, 3.0, 3.0, 1.0, 0.0, 2.0, 1.0, -1.0])],
        &["y", "i"],
    );
    floats(&out[0], &[1, 2, 1, 1], &[3.0, 2.0]);
    exact(&out[1], &[1, 2, 1, 1], &[0, 5]);
    // ceil_mode over [1, 3, 2] with a window of 2, stride 2: [1, 3] -> 3 at 1, then [2] alone.
    // With a pad of 1 before, windows [pad, 1], [3, 2]: 1 at 0 and 3 at 1.
    for (pads, want_y, want_i) in
        [([0, 0, 0, 0], [3.0, 2.0], [1, 2]), ([0, 1, 0, 0], [1.0, 3.0], [0, 1])]
    {
        let (out, _) = run(
            12,
            vec![node(
                "MaxPool",
                &["x"],
                &["y", "i"],
                vec![
                    ints_attr("kernel_shape", &[1, 2]),
                    ints_attr("strides", &[1, 2]),
                    ints_attr("pads", &pads),
                    int_attr("ceil_mode", 1),
                ],
            )],
            vec![],
            vec![f32_in("x", &[1, 1, 1, 3], &[1.0, 3.0, 2.0])],
            &["y", "i"],
        );
        floats(&out[0], &[1, 1, 1, 2], &want_y);
        exact(&out[1], &[1, 1, 1, 2], &want_i);
    }
}

#[test]
fn max_unpool_places_values_and_refuses_ambiguous_output_shapes() {
    // [1, 2, 3, 4] at 5, 7, 13, 15 of a 4x4 plane (2x2 kernel, stride 2).
    let inputs = || {
        vec![
            f32_in("x", &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
            i64_in("i", &[1, 1, 2, 2], &[5, 7, 13, 15]),
        ]
    };
    let attrs = || vec![ints_attr("kernel_shape", &[2, 2]), ints_attr("strides", &[2, 2])];
    let (out, _) =
        run(11, vec![node("MaxUnpool", &["x", "i"], &["y"], attrs())], vec![], inputs(), &["y"]);
    let mut want = [0.0f32; 16];
    for (p, v) in [(5, 1.0), (7, 2.0), (13, 3.0), (15, 4.0)] {
        want[p] = v;
    }
    floats(&out[0], &[1, 1, 4, 4], &want);
    // output_shape equal to the unpooled shape: the same result, specialised to it.
    let unpool = || node("MaxUnpool", &["x", "i", "shape"], &["y"], attrs());
    let mut same = inputs();
    same.push(i64_in("shape", &[4], &[1, 1, 4, 4]));
    let (out, specialized) = run(11, vec![unpool()], vec![], same, &["y"]);
    floats(&out[0], &[1, 1, 4, 4], &want);
    assert_eq!(specialized, ["shape"]);
    // output_shape [1, 1, 5, 5] with hand-fed positions (ONNX's backend case
    // test_maxunpool_export_with_output_shape): ONNX Runtime reads them in 5x5, ONNX's
    // reference in 4x4; refused, naming both layouts.
    let mut larger = inputs();
    larger.push(i64_in("shape", &[4], &[1, 1, 5, 5]));
    let e = try_run(11, vec![unpool()], vec![], larger, &["y"]).unwrap_err();
    assert_eq!(
        e,
        "unsupported operator MaxUnpool (node `maxunpool`, opset 11): output_shape [1, 1, 5, 5] \
         differs from the unpooled shape [1, 1, 4, 4] and I is not a MaxPool's Indices: ONNX \
         Runtime and PyTorch read its positions in [1, 1, 5, 5], ONNX's reference in [1, 1, 4, \
         4] (then pads), and lumen does not guess which layout these positions use"
    );
    let mut smaller = inputs();
    smaller.push(i64_in("shape", &[4], &[1, 1, 3, 3]));
    let e = try_run(11, vec![unpool()], vec![], smaller, &["y"]).unwrap_err();
    assert!(e.contains("MaxUnpool") && e.contains("output_shape [1, 1, 3, 3]"), "{e}");
}

#[test]
fn max_unpool_puts_values_back_where_max_pool_found_them() {
    // MaxPool 2x2 stride 2 of a [1, 2, 3, 5] map, whose last row and column no window covers,
    // then MaxUnpool to output_shape [1, 2, 3, 5]: each maximum back at its place in the 3x5
    // plane (the unpooled shape is 2x4, where these positions would land elsewhere or outside).
    // Expected values from onnxruntime 1.32 (scripts/ort_regression_values.py,
    // max_unpool_output_shape).
    let x: Vec<f32> = (0..30).map(|k| (k * 7 % 30 - 10) as f32).collect();
    let attrs = || vec![ints_attr("kernel_shape", &[2, 2]), ints_attr("strides", &[2, 2])];
    let (out, _) = run(
        11,
        vec![
            node("MaxPool", &["x"], &["p", "i"], attrs()),
            node("MaxUnpool", &["p", "i", "shape"], &["y"], attrs()),
        ],
        vec![ints("shape", &[4], &[1, 2, 3, 5])],
        vec![f32_in("x", &[1, 2, 3, 5], &x)],
        &["i", "y"],
    );
    exact(&out[0], &[1, 2, 1, 2], &[6, 8, 21, 17]);
    let mut want = [0.0f32; 30];
    for (p, v) in [(6, 2.0), (8, 16.0), (17, 19.0), (21, 17.0)] {
        want[p] = v;
    }
    floats(&out[1], &[1, 2, 3, 5], &want);
}

#[test]
fn max_unpool_positions_outside_the_output_are_errors_naming_the_node() {
    let attrs = || vec![ints_attr("kernel_shape", &[2, 2]), ints_attr("strides", &[2, 2])];
    let unpool = || vec![node("MaxUnpool", &["x", "i"], &["y"], attrs())];
    let x = || f32_in("x", &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // Known at import: refused then, naming the input, the position and the bound.
    let e =
        try_run(11, unpool(), vec![ints("i", &[1, 1, 2, 2], &[0, -1, 2, 3])], vec![x()], &["y"])
            .unwrap_err();
    assert_eq!(
        e,
        "node `maxunpool` (MaxUnpool): input 1 (`i`, I) holds -1 at position 1, outside the \
         output's 16 positions (0..16 in [1, 1, 4, 4])"
    );
    // Given at run time: -1 (which ONNX Runtime refuses too; a scatter would count it from the
    // end) and 16 are run-time errors of the buffer named after the node.
    for (bad, id) in [(-1, 16), (16, 16), (40, 40)] {
        let given = vec![x(), i64_in("i", &[1, 1, 2, 2], &[0, bad, 2, 3])];
        let e = try_run(11, unpool(), vec![], given, &["y"]).unwrap_err();
        assert_eq!(
            e,
            format!(
                "scatter_elements: id {id} at position 1 of `maxunpool.positions` is out of \
                 range for an axis of length 16"
            )
        );
    }
    let bytes = model_of(11, unpool(), vec![], &[x(), i64_in("i", &[1, 1, 2, 2], &[0; 4])], &["y"]);
    let imported = import(&bytes, &ImportOptions::default()).unwrap();
    let b = imported.index_buffer("maxunpool.positions").expect("the positions' buffer");
    assert_eq!((b.node.as_str(), b.op.as_str()), ("maxunpool", "MaxUnpool"));
    // A float I is named by its type's name.
    let given = vec![x(), f32_in("i", &[1, 1, 2, 2], &[0.0; 4])];
    let e = try_run(11, unpool(), vec![], given, &["y"]).unwrap_err();
    assert_eq!(
        e,
        "node `maxunpool` (MaxUnpool): input 1 (`i`, I) is f32 of shape [1, 1, 2, 2]; it must \
         be int64 (or int32) positions of X's shape [1, 1, 2, 2]"
    );
}

/// Gather's computed positions (negative ones counted from the end) are named after the node,
/// and GatherElements' and ScatterElements' positions given as a graph input are traced to the
/// node reading them: a run-time index error can name the ONNX node, not `t4`.
#[test]
fn index_buffers_of_gathers_and_scatters_name_their_node() {
    let x = || f32_in("x", &[4, 3], &[0.0; 12]);
    let gather = vec![node("Gather", &["x", "i"], &["y"], vec![])];
    let bytes = model_of(13, gather, vec![], &[x(), i64_in("i", &[2], &[0, 1])], &["y"]);
    let imported = import(&bytes, &ImportOptions::default()).unwrap();
    let b = imported.index_buffer("gather.ids").expect("Gather's positions");
    assert_eq!((b.node.as_str(), b.op.as_str()), ("gather", "Gather"));
    let e = try_run(
        13,
        vec![node("Gather", &["x", "i"], &["y"], vec![])],
        vec![],
        { vec![x(), i64_in("i", &[2], &[0, 4])] },
        &["y"],
    )
    .unwrap_err();
    assert!(e.contains("of `gather.ids` is out of range"), "{e}");
    for op in ["GatherElements", "ScatterElements"] {
        let ins: &[&str] = if op == "GatherElements" { &["x", "i"] } else { &["x", "i", "u"] };
        let nodes = vec![NodeProto { name: "n1".into(), ..node(op, ins, &["y"], vec![]) }];
        let mut given = vec![x(), i64_in("i", &[1, 3], &[0, 1, 2])];
        if op == "ScatterElements" {
            given.push(f32_in("u", &[1, 3], &[1.0; 3]));
        }
        let imported = import(&model_of(13, nodes, vec![], &given, &["y"]), &Default::default());
        let imported = imported.unwrap();
        let b = imported.index_buffer("i").expect("the positions' graph input");
        assert_eq!((b.node.as_str(), b.op.as_str()), ("n1", op));
    }
}
