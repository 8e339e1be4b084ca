//! `LSTM`, `GRU` and `RNN` imported from small models built from the protobuf messages, run on
//! the CPU runtime (fused and unfused) and compared with a plain f64 loop over ONNX's equations
//! written here: every direction, with and without bias and initial states (constant or fed),
//! layout 0 and 1, LSTM peepholes, `input_forget` and `clip`, GRU's `linear_before_reset`, the
//! listed activations with their alpha and beta, and any subset of the outputs. Then the forms
//! lumen refuses (one clear error naming the node and the attribute) and the shape of the
//! unrolled program (one projection matmul, both directions in the same ops).

use lumen_compiler::CompileOptions;
use lumen_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto, data_type,
};
use lumen_onnx::{ImportOptions, OnnxError, import};
use lumen_runtime::{CpuRuntime, HostTensor, Runtime, Tensors};
use prost::Message;

// ---------------------------------------------------------------------------------------------
// Model building

fn value(name: &str, dims: &[usize]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension { dim_value: Some(d as i64), dim_param: None })
                        .collect(),
                }),
            }),
            ..Default::default()
        }),
    }
}

fn floats(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: data_type::FLOAT,
        float_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i, r#type: 2, ..Default::default() }
}

fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f, r#type: 1, ..Default::default() }
}

fn string_attr(name: &str, s: &str) -> AttributeProto {
    AttributeProto { name: name.into(), s: s.as_bytes().to_vec(), r#type: 3, ..Default::default() }
}

fn floats_attr(name: &str, v: Vec<f32>) -> AttributeProto {
    AttributeProto { name: name.into(), floats: v, r#type: 6, ..Default::default() }
}

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        r#type: 8,
        ..Default::default()
    }
}

/// Deterministic values in `[-scale, scale)` (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self, scale: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }

    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next(scale)).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lstm,
    Gru,
    Rnn,
}

impl Kind {
    fn op(self) -> &'static str {
        match self {
            Kind::Lstm => "LSTM",
            Kind::Gru => "GRU",
            Kind::Rnn => "RNN",
        }
    }

    fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Rnn => 1,
        }
    }

    fn default_activations(self) -> Vec<Act> {
        let names: &[&'static str] = match self {
            Kind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Kind::Gru => &["Sigmoid", "Tanh"],
            Kind::Rnn => &["Tanh"],
        };
        names.iter().map(|n| Act::new(n)).collect()
    }
}

/// How the initial states are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Init {
    /// Absent.
    None,
    /// Initializers (nonzero).
    Const,
    /// Graph inputs fed at run time.
    Fed,
    /// Initializers of zeros (the importer skips the first product).
    Zeros,
}

/// An activation as the test writes it: its name and the alpha and beta it is given.
#[derive(Debug, Clone, Copy)]
struct Act {
    name: &'static str,
    alpha: Option<f32>,
    beta: Option<f32>,
}

impl Act {
    fn new(name: &'static str) -> Self {
        Act { name, alpha: None, beta: None }
    }

    fn with(name: &'static str, alpha: f32, beta: Option<f32>) -> Self {
        Act { name, alpha: Some(alpha), beta }
    }

    /// ONNX's definition, in f64, with the defaults of the operators of the same name.
    fn eval(self, x: f64) -> f64 {
        let a = |d: f64| self.alpha.map_or(d, f64::from);
        let b = |d: f64| self.beta.map_or(d, f64::from);
        match self.name.to_ascii_lowercase().as_str() {
            "relu" => x.max(0.0),
            "tanh" => x.tanh(),
            "sigmoid" => 1.0 / (1.0 + (-x).exp()),
            "affine" => a(1.0) * x + b(0.0),
            "leakyrelu" => {
                if x >= 0.0 {
                    x
                } else {
                    a(0.01) * x
                }
            }
            "thresholdedrelu" => {
                if x > a(1.0) {
                    x
                } else {
                    0.0
                }
            }
            "scaledtanh" => a(1.0) * (b(1.0) * x).tanh(),
            "hardsigmoid" => (a(0.2) * x + b(0.5)).clamp(0.0, 1.0),
            "elu" => {
                if x >= 0.0 {
                    x
                } else {
                    a(1.0) * (x.exp() - 1.0)
                }
            }
            "softsign" => x / (1.0 + x.abs()),
            "softplus" => (1.0 + x.exp()).ln(),
            other => panic!("no activation {other}"),
        }
    }
}

/// One recurrent node and its data.
#[derive(Debug, Clone)]
struct Case {
    kind: Kind,
    direction: &'static str,
    layout: i64,
    t: usize,
    b: usize,
    i: usize,
    h: usize,
    bias: bool,
    init: Init,
    peepholes: bool,
    linear_before_reset: bool,
    /// The `activations` attribute (per direction, concatenated), `None` to leave it out.
    activations: Option<Vec<Act>>,
    clip: Option<f32>,
    input_forget: bool,
    /// Which of Y, Y_h, Y_c the node names.
    outputs: [bool; 3],
    sequence_lens: Option<Vec<i64>>,
    opset: i64,
    seed: u64,
}

impl Case {
    fn new(kind: Kind, direction: &'static str) -> Self {
        Case {
            kind,
            direction,
            layout: 0,
            t: 4,
            b: 2,
            i: 3,
            h: 5,
            bias: true,
            init: Init::None,
            peepholes: false,
            linear_before_reset: false,
            activations: None,
            clip: None,
            input_forget: false,
            outputs: [true, true, kind == Kind::Lstm],
            sequence_lens: None,
            opset: 17,
            seed: 7,
        }
    }

    fn d(&self) -> usize {
        if self.direction == "bidirectional" { 2 } else { 1 }
    }

    fn x_shape(&self) -> Vec<usize> {
        if self.layout == 0 { vec![self.t, self.b, self.i] } else { vec![self.b, self.t, self.i] }
    }

    fn state_shape(&self) -> Vec<usize> {
        if self.layout == 0 {
            vec![self.d(), self.b, self.h]
        } else {
            vec![self.b, self.d(), self.h]
        }
    }

    fn y_shape(&self) -> Vec<usize> {
        if self.layout == 0 {
            vec![self.t, self.d(), self.b, self.h]
        } else {
            vec![self.b, self.t, self.d(), self.h]
        }
    }

    /// The activations per direction (the attribute's, else the defaults).
    fn acts(&self) -> Vec<Vec<Act>> {
        let per = self.kind.default_activations().len();
        let list = self.activations.clone().unwrap_or_else(|| {
            let mut v = self.kind.default_activations();
            if self.d() == 2 {
                v.extend(self.kind.default_activations());
            }
            v
        });
        list.chunks(per).map(<[Act]>::to_vec).collect()
    }
}

/// The case's weights and inputs.
struct Data {
    x: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
    bias: Vec<f32>,
    p: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
}

fn data(case: &Case) -> Data {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ case.seed);
    let (d, g, h, i) = (case.d(), case.kind.gates(), case.h, case.i);
    let states = case.d() * case.b * h;
    let zeros = case.init == Init::Zeros;
    Data {
        x: rng.vec(case.t * case.b * i, 1.5),
        w: rng.vec(d * g * h * i, 0.6),
        r: rng.vec(d * g * h * h, 0.6),
        bias: rng.vec(d * 2 * g * h, 0.5),
        p: rng.vec(d * 3 * h, 0.5),
        h0: if zeros { vec![0.0; states] } else { rng.vec(states, 0.8) },
        c0: if zeros { vec![0.0; states] } else { rng.vec(states, 0.8) },
    }
}

/// The ONNX model of `case`, and the values of its graph inputs.
fn model(case: &Case, v: &Data) -> (ModelProto, Tensors) {
    let (d, g, h) = (case.d(), case.kind.gates(), case.h);
    let mut inits = vec![floats("W", &[d, g * h, case.i], &v.w), floats("R", &[d, g * h, h], &v.r)];
    let mut graph_inputs = vec![value("X", &case.x_shape())];
    let mut fed: Tensors =
        [("X".to_string(), HostTensor::new(case.x_shape(), v.x.clone()).unwrap())].into();
    let mut ins: Vec<String> = vec!["X".into(), "W".into(), "R".into()];
    let mut optional = |name: &str, present: bool| ins.push(if present { name } else { "" }.into());
    optional("B", case.bias);
    if case.bias {
        inits.push(floats("B", &[d, 2 * g * h], &v.bias));
    }
    optional("sequence_lens", case.sequence_lens.is_some());
    if let Some(lens) = &case.sequence_lens {
        inits.push(TensorProto {
            dims: vec![lens.len() as i64],
            data_type: data_type::INT32,
            int32_data: lens.iter().map(|&l| l as i32).collect(),
            name: "sequence_lens".into(),
            ..Default::default()
        });
    }
    let lstm = case.kind == Kind::Lstm;
    let states: &[(&str, &Vec<f32>)] =
        if lstm { &[("initial_h", &v.h0), ("initial_c", &v.c0)] } else { &[("initial_h", &v.h0)] };
    for (name, values) in states {
        optional(name, case.init != Init::None);
        match case.init {
            Init::None => {}
            Init::Const | Init::Zeros => inits.push(floats(name, &case.state_shape(), values)),
            Init::Fed => {
                graph_inputs.push(value(name, &case.state_shape()));
                let t = HostTensor::new(case.state_shape(), values.to_vec()).unwrap();
                fed.insert(name.to_string(), t);
            }
        }
    }
    if lstm {
        optional("P", case.peepholes);
        if case.peepholes {
            inits.push(floats("P", &[d, 3 * h], &v.p));
        }
    }
    // Trailing absent inputs may be dropped.
    while ins.last().is_some_and(|s| s.is_empty()) {
        ins.pop();
    }
    let mut attrs =
        vec![int_attr("hidden_size", h as i64), string_attr("direction", case.direction)];
    if case.layout != 0 {
        attrs.push(int_attr("layout", case.layout));
    }
    if case.kind == Kind::Gru && case.linear_before_reset {
        attrs.push(int_attr("linear_before_reset", 1));
    }
    if let Some(c) = case.clip {
        attrs.push(float_attr("clip", c));
    }
    if case.input_forget {
        attrs.push(int_attr("input_forget", 1));
    }
    if let Some(acts) = &case.activations {
        let names: Vec<&str> = acts.iter().map(|a| a.name).collect();
        attrs.push(strings_attr("activations", &names));
        let alphas: Vec<f32> = acts.iter().filter_map(|a| a.alpha).collect();
        let betas: Vec<f32> = acts.iter().filter_map(|a| a.beta).collect();
        if !alphas.is_empty() {
            attrs.push(floats_attr("activation_alpha", alphas));
        }
        if !betas.is_empty() {
            attrs.push(floats_attr("activation_beta", betas));
        }
    }
    let names = ["Y", "Y_h", "Y_c"];
    let count = if lstm { 3 } else { 2 };
    let mut outs: Vec<String> = (0..count)
        .map(|k| if case.outputs[k] { names[k].to_string() } else { String::new() })
        .collect();
    while outs.last().is_some_and(|s| s.is_empty()) {
        outs.pop();
    }
    let shapes = [case.y_shape(), case.state_shape(), case.state_shape()];
    let graph_outputs =
        (0..count).filter(|&k| case.outputs[k]).map(|k| value(names[k], &shapes[k])).collect();
    let node = NodeProto {
        input: ins,
        output: outs,
        name: "rec".into(),
        op_type: case.kind.op().into(),
        attribute: attrs,
        ..Default::default()
    };
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: vec![node],
            name: "g".into(),
            initializer: inits,
            input: graph_inputs,
            output: graph_outputs,
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: case.opset }],
        ..Default::default()
    };
    (m, fed)
}

// ---------------------------------------------------------------------------------------------
// The reference: ONNX's equations, a plain loop in f64

/// `[Y, Y_h, Y_c]` in the case's layout (Y_c empty unless an LSTM).
fn reference(case: &Case, v: &Data) -> [Vec<f64>; 3] {
    let (t_len, b_len, i_len, h_len, d_len) = (case.t, case.b, case.i, case.h, case.d());
    let g = case.kind.gates();
    let acts = case.acts();
    let x_at = |t: usize, b: usize, k: usize| {
        let at = if case.layout == 0 { (t * b_len + b) * i_len } else { (b * t_len + t) * i_len };
        f64::from(v.x[at + k])
    };
    let state_at = |s: &[f32], d: usize, b: usize, j: usize| {
        let at = if case.layout == 0 { (d * b_len + b) * h_len } else { (b * d_len + d) * h_len };
        if case.init == Init::None { 0.0 } else { f64::from(s[at + j]) }
    };
    let clip = |x: f64| match case.clip {
        Some(c) => x.clamp(-f64::from(c), f64::from(c)),
        None => x,
    };
    let y_index = |t: usize, d: usize, b: usize, j: usize| {
        if case.layout == 0 {
            ((t * d_len + d) * b_len + b) * h_len + j
        } else {
            ((b * t_len + t) * d_len + d) * h_len + j
        }
    };
    let state_index = |d: usize, b: usize, j: usize| {
        if case.layout == 0 { (d * b_len + b) * h_len + j } else { (b * d_len + d) * h_len + j }
    };
    let mut y = vec![0.0; t_len * d_len * b_len * h_len];
    let mut y_h = vec![0.0; d_len * b_len * h_len];
    let mut y_c = if case.kind == Kind::Lstm { vec![0.0; d_len * b_len * h_len] } else { vec![] };
    for d in 0..d_len {
        let reverse = case.direction == "reverse" || d == 1;
        let w = |row: usize, k: usize| f64::from(v.w[((d * g * h_len) + row) * i_len + k]);
        let r = |row: usize, k: usize| f64::from(v.r[((d * g * h_len) + row) * h_len + k]);
        let wb =
            |row: usize| if case.bias { f64::from(v.bias[d * 2 * g * h_len + row]) } else { 0.0 };
        let rb = |row: usize| {
            if case.bias { f64::from(v.bias[d * 2 * g * h_len + g * h_len + row]) } else { 0.0 }
        };
        let p = |gate: usize, j: usize| {
            if case.peepholes { f64::from(v.p[d * 3 * h_len + gate * h_len + j]) } else { 0.0 }
        };
        let (f, gg, hh) = (acts[d][0], acts[d].get(1).copied(), acts[d].get(2).copied());
        for b in 0..b_len {
            let mut hp: Vec<f64> = (0..h_len).map(|j| state_at(&v.h0, d, b, j)).collect();
            let mut cp: Vec<f64> = (0..h_len).map(|j| state_at(&v.c0, d, b, j)).collect();
            for step in 0..t_len {
                let t = if reverse { t_len - 1 - step } else { step };
                // X W^T and H R^T of gate `gate`, unit j.
                let xw = |gate: usize, j: usize| {
                    (0..i_len).map(|k| x_at(t, b, k) * w(gate * h_len + j, k)).sum::<f64>()
                };
                let hr = |hv: &[f64], gate: usize, j: usize| {
                    (0..h_len).map(|k| hv[k] * r(gate * h_len + j, k)).sum::<f64>()
                };
                let (mut hn, mut cn) = (vec![0.0; h_len], vec![0.0; h_len]);
                match case.kind {
                    Kind::Lstm => {
                        let (gg, hh) = (gg.unwrap(), hh.unwrap());
                        for j in 0..h_len {
                            let pre = |gate: usize| {
                                xw(gate, j)
                                    + hr(&hp, gate, j)
                                    + wb(gate * h_len + j)
                                    + rb(gate * h_len + j)
                            };
                            let it = f.eval(clip(pre(0) + p(0, j) * cp[j]));
                            let ft = if case.input_forget {
                                1.0 - it
                            } else {
                                f.eval(clip(pre(2) + p(2, j) * cp[j]))
                            };
                            let ct = gg.eval(clip(pre(3)));
                            cn[j] = ft * cp[j] + it * ct;
                            let ot = f.eval(clip(pre(1) + p(1, j) * cn[j]));
                            hn[j] = ot * hh.eval(cn[j]);
                        }
                    }
                    Kind::Gru => {
                        let gg = gg.unwrap();
                        let z: Vec<f64> = (0..h_len)
                            .map(|j| f.eval(clip(xw(0, j) + hr(&hp, 0, j) + wb(j) + rb(j))))
                            .collect();
                        let rg: Vec<f64> = (0..h_len)
                            .map(|j| {
                                let row = h_len + j;
                                f.eval(clip(xw(1, j) + hr(&hp, 1, j) + wb(row) + rb(row)))
                            })
                            .collect();
                        let reset: Vec<f64> = (0..h_len).map(|k| rg[k] * hp[k]).collect();
                        for j in 0..h_len {
                            let row = 2 * h_len + j;
                            let pre = if case.linear_before_reset {
                                xw(2, j) + rg[j] * (hr(&hp, 2, j) + rb(row)) + wb(row)
                            } else {
                                xw(2, j) + hr(&reset, 2, j) + rb(row) + wb(row)
                            };
                            let cand = gg.eval(clip(pre));
                            hn[j] = (1.0 - z[j]) * cand + z[j] * hp[j];
                        }
                    }
                    Kind::Rnn => {
                        for (j, out) in hn.iter_mut().enumerate() {
                            *out = f.eval(clip(xw(0, j) + hr(&hp, 0, j) + wb(j) + rb(j)));
                        }
                    }
                }
                for j in 0..h_len {
                    y[y_index(t, d, b, j)] = hn[j];
                }
                hp = hn;
                cp = cn;
            }
            for j in 0..h_len {
                y_h[state_index(d, b, j)] = hp[j];
                if case.kind == Kind::Lstm {
                    y_c[state_index(d, b, j)] = cp[j];
                }
            }
        }
    }
    [y, y_h, y_c]
}

// ---------------------------------------------------------------------------------------------
// Running

/// Imports, compiles fused and unfused, runs on the CPU, and compares every requested output
/// with the reference within 2e-5 x max(1, |ref|).
fn check(case: &Case) {
    let v = data(case);
    let (m, fed) = model(case, &v);
    let imported = import(&m.encode_to_vec(), &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let want = reference(case, &v);
    let inputs = imported.bind_inputs(&fed).unwrap();
    let names = ["Y", "Y_h", "Y_c"];
    let shapes = [case.y_shape(), case.state_shape(), case.state_shape()];
    for fuse in [false, true] {
        let options = CompileOptions { fuse, name: "rec".into(), ..Default::default() };
        let program = imported.graph.compile(&options).unwrap_or_else(|e| panic!("{case:?}: {e}"));
        let mut prepared = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
        let out = prepared.execute(&inputs).unwrap();
        for (onnx, lumen) in &imported.outputs {
            let k = names.iter().position(|n| n == onnx).unwrap();
            assert!(case.outputs[k], "{onnx} was not asked for");
            let got = &out[lumen];
            assert_eq!(got.shape(), shapes[k].as_slice(), "{onnx} of {case:?}");
            for (e, (&g, &w)) in got.data().iter().zip(&want[k]).enumerate() {
                let err = (f64::from(g) - w).abs();
                assert!(
                    err <= 2e-5 * w.abs().max(1.0),
                    "{onnx}[{e}] = {g}, reference {w} (fuse {fuse}) in {case:?}"
                );
            }
        }
        let asked = case.outputs.iter().take(names.len()).filter(|&&o| o).count();
        let asked = if case.kind == Kind::Lstm { asked } else { asked.min(2) };
        assert_eq!(imported.outputs.len(), asked, "{case:?}");
    }
}

const DIRECTIONS: [&str; 3] = ["forward", "reverse", "bidirectional"];

#[test]
fn lstm_every_direction_bias_state_peephole_and_layout() {
    let mut seed = 0;
    for direction in DIRECTIONS {
        for layout in [0, 1] {
            for (bias, init, peepholes) in [
                (true, Init::None, false),
                (false, Init::Const, true),
                (true, Init::Fed, true),
                (true, Init::Zeros, false),
                (false, Init::None, true),
            ] {
                seed += 1;
                let case = Case {
                    layout,
                    bias,
                    init,
                    peepholes,
                    seed,
                    ..Case::new(Kind::Lstm, direction)
                };
                check(&case);
            }
        }
    }
}

#[test]
fn gru_every_direction_bias_state_layout_and_linear_before_reset() {
    let mut seed = 100;
    for direction in DIRECTIONS {
        for layout in [0, 1] {
            for linear_before_reset in [false, true] {
                for (bias, init) in [
                    (true, Init::None),
                    (false, Init::Const),
                    (true, Init::Fed),
                    (true, Init::Zeros),
                ] {
                    seed += 1;
                    let case = Case {
                        layout,
                        bias,
                        init,
                        linear_before_reset,
                        seed,
                        ..Case::new(Kind::Gru, direction)
                    };
                    check(&case);
                }
            }
        }
    }
}

#[test]
fn rnn_every_direction_bias_state_and_layout() {
    let mut seed = 200;
    for direction in DIRECTIONS {
        for layout in [0, 1] {
            for (bias, init) in [(true, Init::None), (false, Init::Const), (true, Init::Fed)] {
                seed += 1;
                let case = Case { layout, bias, init, seed, ..Case::new(Kind::Rnn, direction) };
                check(&case);
            }
        }
    }
}

/// Opset 7 (before `layout`) reads the same; a sequence of one step and a batch of one.
#[test]
fn opset_7_and_single_steps() {
    for kind in [Kind::Lstm, Kind::Gru, Kind::Rnn] {
        check(&Case { opset: 7, init: Init::Const, ..Case::new(kind, "bidirectional") });
        check(&Case { t: 1, b: 1, init: Init::Const, ..Case::new(kind, "reverse") });
    }
}

/// Every activation ONNX lists, with its alpha and beta, as an RNN's f (and the defaults of
/// LeakyRelu and HardSigmoid when none is given), each with and without clip.
#[test]
fn rnn_with_every_activation() {
    let acts = [
        Act::new("Relu"),
        Act::new("Tanh"),
        Act::new("Sigmoid"),
        Act::with("Affine", 0.7, Some(-0.2)),
        Act::with("LeakyRelu", 0.3, None),
        Act::with("ThresholdedRelu", 0.25, None),
        Act::with("ScaledTanh", 1.5, Some(0.6)),
        Act::with("HardSigmoid", 0.4, Some(0.45)),
        Act::with("Elu", 0.8, None),
        Act::new("Softsign"),
        Act::new("Softplus"),
        Act::new("LeakyRelu"),
        Act::new("HardSigmoid"),
        Act::new("relu"),
    ];
    for (k, act) in acts.into_iter().enumerate() {
        for clip in [None, Some(0.9)] {
            let case = Case {
                activations: Some(vec![act]),
                clip,
                init: Init::Const,
                seed: 300 + k as u64,
                ..Case::new(Kind::Rnn, "forward")
            };
            check(&case);
        }
    }
}

/// Other activations for LSTM and GRU (alphas and betas consumed in order by the activations
/// that take them), clip, input_forget with peepholes; a bidirectional layer whose directions
/// use different activations.
#[test]
fn lstm_and_gru_with_other_activations_clip_and_input_forget() {
    let lstm_acts = vec![
        Act::with("HardSigmoid", 0.3, Some(0.55)),
        Act::with("ScaledTanh", 0.9, Some(1.1)),
        Act::new("Softsign"),
    ];
    check(&Case {
        activations: Some(lstm_acts.clone()),
        clip: Some(1.2),
        init: Init::Const,
        peepholes: true,
        ..Case::new(Kind::Lstm, "forward")
    });
    check(&Case {
        input_forget: true,
        peepholes: true,
        init: Init::Fed,
        clip: Some(2.0),
        ..Case::new(Kind::Lstm, "reverse")
    });
    // Different activations per direction.
    let mut both = vec![Act::new("Sigmoid"), Act::new("Tanh"), Act::new("Tanh")];
    both.extend(lstm_acts);
    check(&Case {
        activations: Some(both),
        init: Init::Const,
        peepholes: true,
        layout: 1,
        ..Case::new(Kind::Lstm, "bidirectional")
    });
    for linear_before_reset in [false, true] {
        check(&Case {
            activations: Some(vec![
                Act::new("Sigmoid"),
                Act::with("Elu", 0.5, None),
                Act::with("HardSigmoid", 0.25, Some(0.5)),
                Act::new("Softplus"),
            ]),
            clip: Some(1.5),
            init: Init::Const,
            linear_before_reset,
            ..Case::new(Kind::Gru, "bidirectional")
        });
    }
}

/// `sequence_lens` equal to the full length for every batch element is accepted; any subset
/// of the outputs can be asked for.
#[test]
fn full_sequence_lens_and_output_subsets() {
    for kind in [Kind::Lstm, Kind::Gru, Kind::Rnn] {
        let full = Case { sequence_lens: Some(vec![4, 4]), ..Case::new(kind, "bidirectional") };
        check(&full);
        let lstm = kind == Kind::Lstm;
        for outputs in [[false, true, false], [true, false, false], [false, false, lstm]] {
            if outputs.iter().any(|&o| o) {
                check(&Case {
                    outputs,
                    layout: 1,
                    init: Init::Const,
                    ..Case::new(kind, "reverse")
                });
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Refusals

fn import_error(case: &Case, edit: impl FnOnce(&mut ModelProto)) -> String {
    let v = data(case);
    let (mut m, _) = model(case, &v);
    edit(&mut m);
    match import(&m.encode_to_vec(), &ImportOptions::default()) {
        Ok(_) => panic!("{case:?} imported"),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("`rec`"), "the error names the node: {text}");
            if let OnnxError::Unsupported { op, .. } | OnnxError::Malformed { op, .. } = &e {
                assert_eq!(op, case.kind.op(), "{text}");
            }
            text
        }
    }
}

fn set_attr(m: &mut ModelProto, a: AttributeProto) {
    let node = &mut m.graph.as_mut().unwrap().node[0];
    node.attribute.retain(|old| old.name != a.name);
    node.attribute.push(a);
}

#[test]
fn refused_forms_name_the_node_and_the_attribute() {
    // sequence_lens shorter than the sequence for one batch element.
    let case = Case { sequence_lens: Some(vec![4, 3]), ..Case::new(Kind::Lstm, "forward") };
    let e = import_error(&case, |_| {});
    assert!(e.contains("unsupported") && e.contains("sequence_lens = [4, 3]"), "{e}");
    // sequence_lens computed by the program (a graph input).
    let case = Case { sequence_lens: Some(vec![4, 4]), ..Case::new(Kind::Gru, "forward") };
    let e = import_error(&case, |m| {
        let g = m.graph.as_mut().unwrap();
        g.initializer.retain(|t| t.name != "sequence_lens");
        let mut lens = value("sequence_lens", &[2]);
        if let Some(t) = lens.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
            t.elem_type = data_type::INT32;
        }
        g.input.push(lens);
    });
    assert!(e.contains("unsupported") && e.contains("sequence_lens"), "{e}");
    // An activation ONNX does not list.
    let case = Case {
        activations: Some(vec![Act::new("Gelu"), Act::new("Tanh")]),
        ..Case::new(Kind::Gru, "forward")
    };
    let e = import_error(&case, |_| {});
    assert!(e.contains("unsupported") && e.contains("activations: \"Gelu\""), "{e}");
    // One direction's activations for two directions (onnxruntime refuses it too).
    let case = Case {
        activations: Some(vec![Act::new("Sigmoid"), Act::new("Tanh"), Act::new("Tanh")]),
        ..Case::new(Kind::Lstm, "bidirectional")
    };
    let e = import_error(&case, |_| {});
    assert!(e.contains("activations = [") && e.contains("expected 6 (3 per direction)"), "{e}");
    // An unknown direction, layout or clip.
    let case = Case::new(Kind::Rnn, "forward");
    let e = import_error(&case, |m| set_attr(m, string_attr("direction", "sideways")));
    assert!(e.contains("direction = \"sideways\""), "{e}");
    let e = import_error(&case, |m| set_attr(m, int_attr("layout", 2)));
    assert!(e.contains("layout = 2"), "{e}");
    let e = import_error(&case, |m| set_attr(m, float_attr("clip", -1.0)));
    assert!(e.contains("clip = -1"), "{e}");
    // hidden_size that contradicts R.
    let e = import_error(&case, |m| set_attr(m, int_attr("hidden_size", 9)));
    assert!(e.contains("hidden_size = 9"), "{e}");
    // Weights computed by the program.
    let e = import_error(&case, |m| {
        let g = m.graph.as_mut().unwrap();
        g.initializer.retain(|t| t.name != "W");
        g.input.push(value("W", &[1, 5, 3]));
    });
    assert!(e.contains("unsupported") && e.contains("input W"), "{e}");
    // A bias of the wrong shape.
    let e = import_error(&case, |m| {
        let g = m.graph.as_mut().unwrap();
        let b = g.initializer.iter_mut().find(|t| t.name == "B").unwrap();
        b.dims = vec![1, 5];
        b.float_data.truncate(5);
    });
    assert!(e.contains("B has shape [1, 5], expected [1, 10]"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// The unrolled program

fn fused_llir(case: &Case) -> String {
    let v = data(case);
    let (m, _) = model(case, &v);
    let imported = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap();
    let program = imported.graph.compile(&CompileOptions::default()).unwrap();
    lumen_compiler::dump::llir_text(&program)
}

fn nodes(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("node ")).count()
}

/// The input projection of all steps is one matmul; each later step adds one recurrent
/// product (two for a GRU without `linear_before_reset`: the reset gate multiplies the state
/// before the product), the first step, from a zero state, none; a bidirectional layer runs
/// both directions in the same ops, so it costs one take more than a forward one, whatever the
/// length; no step copies a view.
#[test]
fn unrolled_program_has_one_projection_and_shared_directions() {
    let matmuls = |text: &str| text.lines().filter(|l| l.contains(" lt_matmul ")).count();
    for t in [3, 6] {
        let gru = |direction, linear_before_reset| {
            fused_llir(&Case {
                t,
                linear_before_reset,
                outputs: [false, true, false],
                ..Case::new(Kind::Gru, direction)
            })
        };
        let forward = gru("forward", true);
        assert_eq!(matmuls(&forward), t, "{forward}");
        assert_eq!(matmuls(&gru("forward", false)), 1 + 2 * (t - 1));
        let both = gru("bidirectional", true);
        assert_eq!(matmuls(&both), t, "{both}");
        assert_eq!(nodes(&both), nodes(&forward) + 1, "{forward}\n{both}");
        assert!(!both.contains(" contiguous "), "a step copies a view:\n{both}");
        // Per GRU step after the first: the product, its add, sigmoid(z, r), 3 for the
        // candidate, 3 for the update; the first step: 6; and the upload, the projection and
        // the readback.
        assert_eq!(nodes(&forward), 3 + 6 + 9 * (t - 1), "{forward}");
        let lstm = fused_llir(&Case {
            t,
            outputs: [false, true, false],
            ..Case::new(Kind::Lstm, "forward")
        });
        // Per LSTM step after the first: the product, its add, sigmoid(i, o, f), tanh, 3 for
        // the cell, 2 for the output; the first step: 5.
        assert_eq!(nodes(&lstm), 3 + 5 + 9 * (t - 1), "{lstm}");
    }
}
