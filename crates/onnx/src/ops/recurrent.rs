//! Recurrent layers: `LSTM`, `GRU` and `RNN` (forward, reverse or bidirectional; `layout` 0
//! and 1; optional bias, initial states, peepholes, clip, `input_forget`,
//! `linear_before_reset` and the activations ONNX lists), unrolled over the sequence, whose
//! length is static at import.
//!
//! The import is shaped for few launches per time step:
//! - the input projection `X W^T + Wb (+ Rb)` of every time step and direction is one matmul
//!   (its bias a BIAS epilogue) before the loop; every bias that is added outside a product
//!   (all of `Rb` but a GRU's `Rbh` under `linear_before_reset`) is folded into it, and that
//!   `Rbh` becomes a projection slot of its own (zero weights, bias `Rbh`), so a step adds it
//!   with the other slots in one op;
//! - a bidirectional layer runs both directions in the same ops: states are `[D, B, 1, H]`,
//!   the recurrent product a batched matmul `[D, B, H] x [D, H, G H]`, and the projection is
//!   reordered once (one `take`) so that step `s` reads the forward direction's time `s` and
//!   the reverse direction's time `T - 1 - s` as one `[D, B, G, H]` slice;
//! - the gates of a step are slices of its fused pre-activations, and the gates sharing an
//!   activation are activated by one op (LSTM's i, o, f; GRU's z, r);
//! - a zero or absent initial state skips the first step's recurrent product.
//!
//! The weights `W`, `R`, `B` and `P` must be known at import (initializers or constants): the
//! projection and recurrent matrices are rebuilt from them, transposed and laid out as above.
//! `sequence_lens` may only say that every sequence has the full length.
//!
//! `Scan` (opset 9 on) is unrolled the same way: its body imported once per step of the static
//! sequence, under names of its own; so is `Loop`, when its trip count and condition are known
//! at import.

use std::rc::Rc;

use lumen_compiler::Tensor;

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{
    Handler, Importer, Value, attr, attr_i, attr_ints, attr_s, node_name, read_tensor,
};
use crate::proto::NodeProto;

/// The recurrent operators, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] =
    &[("GRU", gru), ("LSTM", lstm), ("RNN", rnn), ("Scan", scan), ("Loop", loop_)];

/// Which recurrent cell a node computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    /// Gates i, o, f, c; activations f, g, h.
    Lstm,
    /// Gates z, r, h; activations f, g; the reset gate applied after the recurrent product
    /// (`linear_before_reset`) or before it.
    Gru {
        /// The `linear_before_reset` attribute is not 0.
        linear_before_reset: bool,
    },
    /// One gate; activation f.
    Rnn,
}

impl Cell {
    /// Gates in `W`, `R` and each half of `B`.
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru { .. } => 3,
            Cell::Rnn => 1,
        }
    }

    /// Activations per direction, and their defaults.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Cell::Gru { .. } => &["Sigmoid", "Tanh"],
            Cell::Rnn => &["Tanh"],
        }
    }

    /// The projection's slots per direction, in order: each a gate's weights and biases (see
    /// [`Slot`]). A GRU under `linear_before_reset` gets a slot holding only `Rbh` before its
    /// h gate, so a step adds the recurrent bias with the z and r pre-activations.
    fn slots(self) -> Vec<Slot> {
        let plain = |g: usize| Slot { w: Some(g), wb: Some(g), rb: Some(g) };
        match self {
            Cell::Gru { linear_before_reset: true } => vec![
                plain(0),
                plain(1),
                Slot { w: None, wb: None, rb: Some(2) },
                Slot { w: Some(2), wb: Some(2), rb: None },
            ],
            _ => (0..self.gates()).map(plain).collect(),
        }
    }
}

/// One slot of the input projection: the gate whose `W` rows it multiplies by (none: zeros),
/// and the gates whose `Wb` and `Rb` it adds.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The gate of `W`.
    w: Option<usize>,
    /// The gate of `Wb`.
    wb: Option<usize>,
    /// The gate of `Rb`.
    rb: Option<usize>,
}

/// An activation function of the recurrent operators, with its `alpha` and `beta`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Activation {
    /// `max(0, x)`.
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `alpha x + beta`.
    Affine(f32, f32),
    /// `x < 0 ? alpha x : x`.
    LeakyRelu(f32),
    /// `x > alpha ? x : 0`.
    ThresholdedRelu(f32),
    /// `alpha tanh(beta x)`.
    ScaledTanh(f32, f32),
    /// `min(max(alpha x + beta, 0), 1)`.
    HardSigmoid(f32, f32),
    /// `x < 0 ? alpha (e^x - 1) : x`.
    Elu(f32),
    /// `x / (1 + |x|)`.
    Softsign,
    /// `log(1 + e^x)`.
    Softplus,
}

impl Activation {
    /// The activation named `name` (any case), taking its `alpha` and `beta` from the lists
    /// in order when it has them (onnxruntime's rule: an activation without one consumes
    /// none), else the defaults of the ONNX operator of the same name. `None` for an unknown
    /// name.
    fn parse(
        name: &str,
        alphas: &mut impl Iterator<Item = f32>,
        betas: &mut impl Iterator<Item = f32>,
    ) -> Option<Self> {
        let mut alpha = |default: f32| alphas.next().unwrap_or(default);
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => Activation::Relu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "affine" => {
                let a = alpha(1.0);
                Activation::Affine(a, betas.next().unwrap_or(0.0))
            }
            "leakyrelu" => Activation::LeakyRelu(alpha(0.01)),
            "thresholdedrelu" => Activation::ThresholdedRelu(alpha(1.0)),
            "scaledtanh" => {
                let a = alpha(1.0);
                Activation::ScaledTanh(a, betas.next().unwrap_or(1.0))
            }
            "hardsigmoid" => {
                let a = alpha(0.2);
                Activation::HardSigmoid(a, betas.next().unwrap_or(0.5))
            }
            "elu" => Activation::Elu(alpha(1.0)),
            "softsign" => Activation::Softsign,
            "softplus" => Activation::Softplus,
            _ => return None,
        })
    }

    /// The activation of `x`, as DSL calls.
    fn apply(self, x: &Tensor) -> Tensor {
        let abs = |x: &Tensor| x.maximum(-x);
        match self {
            Activation::Relu => x.relu(),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Affine(a, b) => x * a + b,
            Activation::LeakyRelu(a) => x.less_than(0.0).select(x * a, x),
            Activation::ThresholdedRelu(a) => x.graph().constant(a).less_than(x).select(x, 0.0),
            Activation::ScaledTanh(a, b) => (x * b).tanh() * a,
            Activation::HardSigmoid(a, b) => {
                let y = (x * a + b).maximum(0.0);
                x.graph().constant(1.0).less_than(&y).select(1.0, &y)
            }
            Activation::Elu(a) => x.less_than(0.0).select((x.exp() - 1.0) * a, x),
            Activation::Softsign => x / (abs(x) + 1.0),
            // max(x, 0) + log(1 + e^-|x|): never overflows.
            Activation::Softplus => x.relu() + ((-abs(x)).exp() + 1.0).log(),
        }
    }
}

/// The attributes and shapes of one recurrent node, read and checked.
struct Spec {
    /// The cell.
    cell: Cell,
    /// Per direction, whether it walks the sequence backwards: `[false]` forward, `[true]`
    /// reverse, `[false, true]` bidirectional.
    reversed: Vec<bool>,
    /// 0: `X [T, B, I]`; 1: `X [B, T, I]` (and the states and outputs batch-first too).
    layout: i64,
    /// Sequence length.
    t: usize,
    /// Batch.
    b: usize,
    /// Input width.
    i: usize,
    /// Hidden width.
    h: usize,
    /// Per direction, the cell's activations (f, g, h for an LSTM).
    activations: Vec<Vec<Activation>>,
    /// The `clip` threshold, if any.
    clip: Option<f32>,
    /// LSTM's `input_forget`: the forget gate is `1 - i`.
    input_forget: bool,
}

impl Spec {
    /// Directions.
    fn d(&self) -> usize {
        self.reversed.len()
    }

    /// The time step direction `d` reads at step `s`.
    fn time(&self, d: usize, s: usize) -> usize {
        if self.reversed[d] { self.t - 1 - s } else { s }
    }
}

/// `LSTM`.
fn lstm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    recurrent(im, n, Cell::Lstm)
}

/// `GRU`.
fn gru(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let linear_before_reset = attr_i(n, "linear_before_reset", 0) != 0;
    recurrent(im, n, Cell::Gru { linear_before_reset })
}

/// `RNN`.
fn rnn(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    recurrent(im, n, Cell::Rnn)
}

/// Input `i` when it is known at import time, `None` when absent; an error naming `what`
/// when it is computed.
fn known(
    im: &Importer,
    n: &NodeProto,
    i: usize,
    what: &str,
) -> Result<Option<Rc<Const>>, OnnxError> {
    match im.input(n, i) {
        None => Ok(None),
        Some(Value::Const(c)) => Ok(Some(c)),
        Some(Value::Tensor(_)) => im.needed_input(n, i).map(Some).ok_or_else(|| {
            im.unsupported(
                n,
                format!(
                    "input {what} is computed by the program: lumen imports recurrent weights \
                     known at import time (initializers, constants, or a graph input whose value \
                     is given, as `lumen run --inputs` does)"
                ),
            )
        }),
    }
}

/// An error unless `c` has shape `want` (`what` names the input).
fn check_shape(
    im: &Importer,
    n: &NodeProto,
    what: &str,
    got: &[usize],
    want: &[usize],
) -> Result<(), OnnxError> {
    if got == want {
        Ok(())
    } else {
        Err(im.malformed(n, format!("{what} has shape {got:?}, expected {want:?}")))
    }
}

/// Reads the node's attributes and shapes (`x` is input `X`) into a [`Spec`].
fn spec(im: &mut Importer, n: &NodeProto, cell: Cell, x: &Tensor) -> Result<Spec, OnnxError> {
    let direction = attr_s(n, "direction").unwrap_or_else(|| "forward".to_string());
    let reversed = match direction.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => {
            return Err(im.unsupported(
                n,
                format!("direction = {other:?} (expected forward, reverse or bidirectional)"),
            ));
        }
    };
    let d = reversed.len();
    let layout = attr_i(n, "layout", 0);
    if layout != 0 && layout != 1 {
        return Err(im.unsupported(n, format!("layout = {layout} (expected 0 or 1)")));
    }
    let xs = x.shape().unwrap_or_default();
    let [a0, a1, i] = xs[..] else {
        return Err(im.malformed(n, format!("X has shape {xs:?}, expected 3 axes")));
    };
    let (t, b) = if layout == 0 { (a0, a1) } else { (a1, a0) };
    if t == 0 || b == 0 {
        return Err(im.unsupported(n, format!("X of shape {xs:?}: an empty sequence or batch")));
    }
    // The hidden width: R is [D, G H, H].
    let r_shape = im.input(n, 2).map(|v| im.shape_of(&v)).unwrap_or_default();
    let h = match r_shape[..] {
        [_, _, h] if h > 0 => h,
        _ => return Err(im.malformed(n, format!("R has shape {r_shape:?}, expected [D, G H, H]"))),
    };
    if let Some(a) = attr(n, "hidden_size")
        && a.i != h as i64
    {
        return Err(im.malformed(n, format!("hidden_size = {} but R is {r_shape:?}", a.i)));
    }
    // sequence_lens: only the full length for every batch element.
    if n.input.get(4).is_some_and(|s| !s.is_empty()) {
        let lens = im.ints(n, 4).map_err(|_| {
            im.unsupported(
                n,
                "sequence_lens is computed by the program: lumen unrolls every sequence over \
                 the full length, so sequence_lens must be a constant equal to it",
            )
        })?;
        let lens = lens.unwrap_or_default();
        if lens.len() != b || lens.iter().any(|&l| l != t as i64) {
            return Err(im.unsupported(
                n,
                format!(
                    "sequence_lens = {lens:?}: lumen unrolls every sequence over the full \
                     length, so every entry must be {t} (one per batch element, {b})"
                ),
            ));
        }
    }
    // Activations: the cell's for each direction in turn (as onnxruntime, no fewer).
    let per_dir = cell.default_activations().len();
    let names: Vec<String> = match attr(n, "activations") {
        Some(a) if !a.strings.is_empty() => {
            a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
        }
        _ => {
            let defaults = cell.default_activations().iter().map(|s| s.to_string());
            defaults.cycle().take(per_dir * d).collect()
        }
    };
    if names.len() != per_dir * d {
        return Err(im.malformed(
            n,
            format!("activations = {names:?}: expected {} ({per_dir} per direction)", per_dir * d),
        ));
    }
    let floats = |name: &str| attr(n, name).map(|a| a.floats.clone()).unwrap_or_default();
    let (alphas, betas) = (floats("activation_alpha"), floats("activation_beta"));
    let (mut alphas, mut betas) = (alphas.into_iter(), betas.into_iter());
    let mut parsed = Vec::with_capacity(names.len());
    for name in &names {
        let a = Activation::parse(name, &mut alphas, &mut betas).ok_or_else(|| {
            im.unsupported(
                n,
                format!(
                    "activations: {name:?} (lumen imports Relu, Tanh, Sigmoid, Affine, \
                     LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign and \
                     Softplus)"
                ),
            )
        })?;
        parsed.push(a);
    }
    let activations: Vec<Vec<Activation>> = parsed.chunks(per_dir).map(<[_]>::to_vec).collect();
    let clip = attr(n, "clip").map(|a| a.f);
    if let Some(c) = clip
        && (c.is_nan() || c <= 0.0)
    {
        return Err(im.malformed(n, format!("clip = {c}: the threshold must be positive")));
    }
    let input_forget = cell == Cell::Lstm && attr_i(n, "input_forget", 0) != 0;
    Ok(Spec { cell, reversed, layout, t, b, i, h, activations, clip, input_forget })
}

/// The input projection's weight `[I, D G' H]` (transposed, one block of slots per
/// direction, [`Cell::slots`]) and bias `[D G' H]` (`None` when all zero), from `W [D, G H, I]`
/// and `B [D, 2 G H]`.
fn projection(sp: &Spec, w: &[f32], bias: Option<&[f32]>) -> (Const, Option<Const>) {
    let (d, i, h, g) = (sp.d(), sp.i, sp.h, sp.cell.gates());
    let slots = sp.cell.slots();
    let cols = d * slots.len() * h;
    let mut wt = vec![0.0f32; i * cols];
    let mut bt = vec![0.0f32; cols];
    for dir in 0..d {
        for (k, slot) in slots.iter().enumerate() {
            for j in 0..h {
                let col = (dir * slots.len() + k) * h + j;
                if let Some(gate) = slot.w {
                    let row = (dir * g + gate) * h + j;
                    for x in 0..i {
                        wt[x * cols + col] = w[row * i + x];
                    }
                }
                if let Some(b) = bias {
                    let at =
                        |half: usize, gate: usize| b[dir * 2 * g * h + half * g * h + gate * h + j];
                    let wb = slot.wb.map_or(0.0, |gate| at(0, gate));
                    let rb = slot.rb.map_or(0.0, |gate| at(1, gate));
                    bt[col] = wb + rb;
                }
            }
        }
    }
    let bias = bt.iter().any(|&v| v != 0.0).then(|| Const::f32(vec![cols], bt));
    (Const::f32(vec![i, cols], wt), bias)
}

/// The recurrent matrix of gates `gates` of `R [D, G H, H]`, transposed: `[D, H, |gates| H]`,
/// so a step's product is `h [D, B, H] x` it.
fn recurrent_matrix(sp: &Spec, r: &[f32], gates: std::ops::Range<usize>) -> Const {
    let (d, h, g) = (sp.d(), sp.h, sp.cell.gates());
    let width = gates.len() * h;
    let mut out = vec![0.0f32; d * h * width];
    for dir in 0..d {
        for (k, gate) in gates.clone().enumerate() {
            for row in 0..h {
                let src = (dir * g + gate) * h + row;
                for col in 0..h {
                    out[(dir * h + col) * width + k * h + row] = r[src * h + col];
                }
            }
        }
    }
    Const::f32(vec![d, h, width], out)
}

/// The state `[D, B, 1, H]` given as input `i` (`[D, B, H]`, or `[B, D, H]` under layout 1),
/// or `None` when absent or a constant of zeros (the first step then skips its product).
fn initial_state(
    im: &mut Importer,
    n: &NodeProto,
    sp: &Spec,
    i: usize,
    what: &str,
) -> Result<Option<Tensor>, OnnxError> {
    let Some(v) = im.input(n, i) else { return Ok(None) };
    if let Value::Const(c) = &v
        && c.to_f32().iter().all(|&x| x == 0.0)
    {
        check_shape(im, n, what, &c.shape, &state_shape(sp))?;
        return Ok(None);
    }
    let t = im.f32_tensor(n, i)?;
    check_shape(im, n, what, &t.shape().unwrap_or_default(), &state_shape(sp))?;
    let t = if sp.layout == 1 { t.permute(&[1, 0, 2]) } else { t };
    Ok(Some(t.reshape([sp.d(), sp.b, 1, sp.h])))
}

/// The shape of `initial_h`, `Y_h` and their `c` twins: `[D, B, H]`, or `[B, D, H]` under
/// layout 1.
fn state_shape(sp: &Spec) -> Vec<usize> {
    if sp.layout == 1 { vec![sp.b, sp.d(), sp.h] } else { vec![sp.d(), sp.b, sp.h] }
}

/// `x` clipped to `[-clip, clip]` (NaN stays NaN), then activated by each direction's
/// activation number `k`: one op over both directions when they agree, else one per direction
/// joined along axis 0.
fn activate(sp: &Spec, k: usize, x: &Tensor) -> Tensor {
    let clipped = |x: &Tensor| match sp.clip {
        Some(c) => {
            let low = x.maximum(-c);
            x.graph().constant(c).less_than(&low).select(c, &low)
        }
        None => x.clone(),
    };
    let first = sp.activations[0][k];
    if sp.activations.iter().all(|a| a[k] == first) {
        return first.apply(&clipped(x));
    }
    let parts: Vec<Tensor> =
        (0..sp.d()).map(|d| sp.activations[d][k].apply(&clipped(&x.slice(0, d, d + 1)))).collect();
    x.graph().concat(&parts, 0)
}

/// A step's recurrent product: `h [D, B, 1, H]` times `rt [D, H, k H]`, as `[D, B, k, H]`.
fn product(sp: &Spec, h: &Tensor, rt: &Tensor) -> Tensor {
    let (d, b, hh) = (sp.d(), sp.b, sp.h);
    let width = rt.shape().and_then(|s| s.last().copied()).unwrap_or(hh);
    h.reshape([d, b, hh]).matmul(rt).reshape([d, b, width / hh, hh])
}

/// `x + y`, or `y` alone when `x` is absent (a zero state's product).
fn plus(x: Option<Tensor>, y: Tensor) -> Tensor {
    match x {
        Some(x) => x + y,
        None => y,
    }
}

/// Imports an `LSTM`, `GRU` or `RNN` node: `[Y, Y_h]` and, for an LSTM, `Y_c`.
fn recurrent(im: &mut Importer, n: &NodeProto, cell: Cell) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let sp = spec(im, n, cell, &x)?;
    let (d, t, b, i, h, g) = (sp.d(), sp.t, sp.b, sp.i, sp.h, cell.gates());
    let w = known(im, n, 1, "W")?.ok_or_else(|| im.malformed(n, "input W is missing"))?;
    let r = known(im, n, 2, "R")?.ok_or_else(|| im.malformed(n, "input R is missing"))?;
    check_shape(im, n, "W", &w.shape, &[d, g * h, i])?;
    check_shape(im, n, "R", &r.shape, &[d, g * h, h])?;
    let bias = known(im, n, 3, "B")?;
    if let Some(bias) = &bias {
        check_shape(im, n, "B", &bias.shape, &[d, 2 * g * h])?;
    }
    let peepholes = if cell == Cell::Lstm { known(im, n, 7, "P")? } else { None };
    if let Some(p) = &peepholes {
        check_shape(im, n, "P", &p.shape, &[d, 3 * h])?;
    }
    let h0 = initial_state(im, n, &sp, 5, "initial_h")?;
    let c0 = if cell == Cell::Lstm { initial_state(im, n, &sp, 6, "initial_c")? } else { None };

    // The input projection of every time step and direction: one matmul (and its bias).
    let (wt, bt) = projection(&sp, &w.to_f32(), bias.as_ref().map(|b| b.to_f32()).as_deref());
    let slots = cell.slots().len();
    let wt = im.const_weight(n, "W_t", wt)?;
    // One GEMM [T B, I] x [I, D G' H] (a strided X is copied first rather than multiplied as
    // T small products).
    let mut proj = x.reshape([t * b, i]).matmul(&wt);
    if let Some(bt) = bt {
        proj = proj + im.const_weight(n, "B_folded", bt)?;
    }
    // Step s's slice [D, B, slots, H]. Forward layout-0 data is already in step order; else
    // one take puts each direction's time of step s side by side.
    let table = if sp.layout == 0 && d == 1 {
        proj.reshape([t, b, slots, h])
    } else {
        let mut picks = Vec::with_capacity(t * d * b);
        for s in 0..t {
            for dir in 0..d {
                let time = sp.time(dir, s);
                for batch in 0..b {
                    let row = if sp.layout == 0 { time * b + batch } else { batch * t + time };
                    picks.push((row * d + dir) as i64);
                }
            }
        }
        let idx = im.const_weight(n, "steps", Const::i64(vec![picks.len()], picks))?;
        proj.reshape([t * b * d, slots * h]).take(0, &idx, 0.0).reshape([t, d * b, slots, h])
    };
    let step = |s: usize| -> Tensor {
        let at = if sp.layout == 0 && d == 1 { sp.time(0, s) } else { s };
        table.slice(0, at, at + 1).reshape([d, b, slots, h])
    };

    // The recurrent matrices, transposed: [D, H, k H].
    let r = r.to_f32();
    let mut weight = |hint: &str, c: Const| im.const_weight(n, hint, c);
    let (rt, rt_h) = match cell {
        Cell::Gru { linear_before_reset: false } => (
            weight("R_zr_t", recurrent_matrix(&sp, &r, 0..2))?,
            Some(weight("R_h_t", recurrent_matrix(&sp, &r, 2..3))?),
        ),
        _ => (weight("R_t", recurrent_matrix(&sp, &r, 0..g))?, None),
    };
    // Peepholes [D, 1, k, H]: i and f beside the o slot (zero) for the gates read before the
    // cell update, o alone for the one read after.
    let (peep_if, peep_o) = match &peepholes {
        Some(p) if p.to_f32().iter().any(|&v| v != 0.0) => {
            let p = p.to_f32();
            let mut iof = vec![0.0f32; d * 3 * h];
            let mut o = vec![0.0f32; d * h];
            for dir in 0..d {
                let base = dir * 3 * h;
                iof[base..base + h].copy_from_slice(&p[base..base + h]);
                iof[base + 2 * h..base + 3 * h].copy_from_slice(&p[base + 2 * h..base + 3 * h]);
                o[dir * h..dir * h + h].copy_from_slice(&p[base + h..base + 2 * h]);
            }
            (
                Some(weight("P_if", Const::f32(vec![d, 1, 3, h], iof))?),
                Some(weight("P_o", Const::f32(vec![d, 1, 1, h], o))?),
            )
        }
        _ => (None, None),
    };

    let (mut hs, mut cs) = (h0, c0);
    let mut outputs: Vec<Tensor> = Vec::with_capacity(t);
    for s in 0..t {
        let q = step(s);
        let (h_new, c_new) = match cell {
            Cell::Lstm => {
                let pre = plus(hs.as_ref().map(|hp| product(&sp, hp, &rt)), q);
                let mut iof = pre.slice(2, 0, 3);
                if let (Some(p), Some(c)) = (&peep_if, &cs) {
                    iof = iof + p * c;
                }
                let iof = activate(&sp, 0, &iof);
                let ig = iof.slice(2, 0, 1);
                let cand = activate(&sp, 1, &pre.slice(2, 3, 4));
                let c_new = match &cs {
                    Some(c) => {
                        let f = if sp.input_forget { 1.0 - &ig } else { iof.slice(2, 2, 3) };
                        f * c + &ig * &cand
                    }
                    None => &ig * &cand,
                };
                let o = match &peep_o {
                    Some(p) => activate(&sp, 0, &(pre.slice(2, 1, 2) + p * &c_new)),
                    None => iof.slice(2, 1, 2),
                };
                (o * activate(&sp, 2, &c_new), Some(c_new))
            }
            Cell::Gru { linear_before_reset } => {
                let (zr, cand) = if linear_before_reset {
                    // Slots z, r, Rbh, h: the product's h part gets Rbh with z and r.
                    let pre = plus(hs.as_ref().map(|hp| product(&sp, hp, &rt)), q.slice(2, 0, 3));
                    let zr = activate(&sp, 0, &pre.slice(2, 0, 2));
                    let cand = zr.slice(2, 1, 2) * pre.slice(2, 2, 3) + q.slice(2, 3, 4);
                    (zr, cand)
                } else {
                    let pre = plus(hs.as_ref().map(|hp| product(&sp, hp, &rt)), q.slice(2, 0, 2));
                    let zr = activate(&sp, 0, &pre);
                    let reset = match (&hs, &rt_h) {
                        (Some(hp), Some(rh)) => Some(product(&sp, &(zr.slice(2, 1, 2) * hp), rh)),
                        _ => None,
                    };
                    (zr, plus(reset, q.slice(2, 2, 3)))
                };
                let cand = activate(&sp, 1, &cand);
                let z = zr.slice(2, 0, 1);
                // (1 - z) n + z h = n + z (h - n).
                let h_new = match &hs {
                    Some(hp) => &cand + z * (hp - &cand),
                    None => &cand - z * &cand,
                };
                (h_new, None)
            }
            Cell::Rnn => {
                let pre = plus(hs.as_ref().map(|hp| product(&sp, hp, &rt)), q);
                (activate(&sp, 0, &pre), None)
            }
        };
        outputs.push(h_new.clone());
        hs = Some(h_new);
        cs = c_new;
    }

    // Y: time t of direction d is what direction d computed at the step that read time t.
    let as_state = |s: &Tensor| {
        let s = s.reshape([d, b, h]);
        if sp.layout == 1 { s.permute(&[1, 0, 2]) } else { s }
    };
    let last = hs.ok_or_else(|| im.malformed(n, "an empty sequence"))?;
    let y_h = as_state(&last);
    let y = if n.output.first().is_some_and(|o| !o.is_empty()) {
        let mut parts = Vec::with_capacity(t * d);
        for time in 0..t {
            for dir in 0..d {
                let piece = outputs[sp.time(dir, time)].reshape([d, b, h]).slice(0, dir, dir + 1);
                parts.push(if sp.layout == 1 { piece.permute(&[1, 0, 2]) } else { piece });
            }
        }
        if sp.layout == 0 {
            im.cx.concat(&parts, 0).reshape([t, d, b, h])
        } else {
            im.cx.concat(&parts, 1).reshape([b, t, d, h])
        }
    } else {
        // Not an output: never stored.
        y_h.clone()
    };
    let mut out = vec![y, y_h];
    if cell == Cell::Lstm {
        let c = cs.ok_or_else(|| im.malformed(n, "an empty sequence"))?;
        out.push(as_state(&c));
    }
    Ok(out)
}

/// `Scan` (opset 9 on): the body graph run once per step of the static sequence, unrolled at
/// import. Its inputs are the `N` states (the node's first inputs, then the body's previous
/// state outputs) and one slice of each of the `num_scan_inputs` scan inputs along
/// `scan_input_axes` (from the end where `scan_input_directions` is 1); its outputs the next
/// states and one element of each scan output, stacked along `scan_output_axes` (in reverse
/// where `scan_output_directions` is 1). Each step's body values get names of their own; the
/// body reads outer values by name. Outputs: the final states, then the stacked scan outputs.
fn scan(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    if im.opset < 9 {
        return scan8(im, n);
    }
    let body =
        attr(n, "body").and_then(|a| a.g.clone()).ok_or_else(|| im.malformed(n, "no body"))?;
    let total = n.input.len();
    let m = usize::try_from(attr_i(n, "num_scan_inputs", 0)).unwrap_or(0);
    if m == 0 || m > total || body.input.len() != total || body.output.len() < total - m {
        return Err(im.malformed(
            n,
            format!(
                "{total} inputs, num_scan_inputs {m}, a body of {} inputs and {} outputs",
                body.input.len(),
                body.output.len()
            ),
        ));
    }
    let states_n = total - m;
    let k = body.output.len() - states_n;
    let list = |name: &str, len: usize| attr_ints(n, name).unwrap_or_else(|| vec![0; len]);
    let (in_axes, in_dirs) = (list("scan_input_axes", m), list("scan_input_directions", m));
    let (out_axes, out_dirs) = (list("scan_output_axes", k), list("scan_output_directions", k));
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k || out_dirs.len() != k {
        return Err(im.malformed(n, "an axis or direction list of the wrong length"));
    }
    let value = |im: &Importer, i: usize| {
        im.input(n, i).ok_or_else(|| im.malformed(n, format!("input {i} is missing")))
    };
    // (name, value) of each state, and each scan input with its axis.
    let mut states: Vec<(String, Value)> = Vec::with_capacity(states_n);
    for i in 0..states_n {
        states.push((n.input[i].clone(), value(im, i)?));
    }
    let mut scans = Vec::with_capacity(m);
    let mut steps = None;
    for s in 0..m {
        let v = value(im, states_n + s)?;
        let shape = im.shape_of(&v);
        let a = crate::importer::axis(in_axes[s], shape.len())
            .ok_or_else(|| im.malformed(n, format!("scan_input_axes {in_axes:?}")))?;
        if *steps.get_or_insert(shape[a]) != shape[a] {
            return Err(im.malformed(n, "scan inputs of different lengths"));
        }
        scans.push((v, shape, a));
    }
    let steps = steps.unwrap_or(0);
    if steps == 0 {
        return Err(im.unsupported(n, "an empty sequence"));
    }
    let mut collected: Vec<Vec<(String, Value)>> = vec![Vec::new(); k];
    for step in 0..steps {
        let mut inputs = Vec::with_capacity(total);
        for j in 0..total {
            let v = if j < states_n {
                states[j].1.clone()
            } else {
                let (v, shape, a) = &scans[j - states_n];
                let at = if in_dirs[j - states_n] != 0 { steps - 1 - step } else { step };
                let mut squeezed = shape.clone();
                squeezed.remove(*a);
                match v {
                    Value::Tensor(t) => {
                        Value::Tensor(t.slice(*a as isize, at, at + 1).reshape(squeezed))
                    }
                    Value::Const(c) => {
                        let view =
                            lumen_compiler::view::View::contiguous(shape).slice(*a, at, at + 1);
                        Value::Const(Rc::new(c.through(&view).reshaped(squeezed)))
                    }
                }
            };
            inputs.push(v);
        }
        let mut outs = run_body(im, n, &body, &format!("scan{step}"), inputs)?;
        for (j, out) in outs.drain(states_n..).enumerate() {
            collected[j].push(out);
        }
        states = outs;
    }
    let mut result = Vec::with_capacity(states_n + k);
    for (name, v) in states {
        result.push(im.materialize(n, name, v)?);
    }
    for (j, mut elements) in collected.into_iter().enumerate() {
        if out_dirs[j] != 0 {
            elements.reverse();
        }
        let rank = im.shape_of(&elements[0].1).len() + 1;
        let a = crate::importer::axis(out_axes[j], rank)
            .ok_or_else(|| im.malformed(n, format!("scan_output_axes {out_axes:?}")))?;
        let mut parts = Vec::with_capacity(elements.len());
        for (name, v) in elements {
            parts.push(im.materialize(n, name, v)?.unsqueeze(a as isize));
        }
        result.push(super::movement::join(im, &parts, a as isize));
    }
    Ok(result)
}

/// Element `at` of `v` (of shape `shape`) along `axis`, the axis removed.
fn pick(v: &Value, shape: &[usize], axis: usize, at: usize) -> Value {
    let mut squeezed = shape.to_vec();
    squeezed.remove(axis);
    match v {
        Value::Tensor(t) => Value::Tensor(t.slice(axis as isize, at, at + 1).reshape(squeezed)),
        Value::Const(c) => {
            let view = lumen_compiler::view::View::contiguous(shape).slice(axis, at, at + 1);
            Value::Const(Rc::new(c.through(&view).reshaped(squeezed)))
        }
    }
}

/// `Scan` of opset 8: every state and scan input has a batch axis first (the scan inputs'
/// sequence axis second), and the body runs per batch item, unrolled at import as opset 9's
/// form is; `directions` reverses a scan input. `sequence_lens` (the first input) may be absent
/// or known at import with every length the full sequence (shorter ones are refused). Outputs:
/// the final states `[B, ...]` and the scan outputs `[B, T, ...]`.
fn scan8(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let body =
        attr(n, "body").and_then(|a| a.g.clone()).ok_or_else(|| im.malformed(n, "no body"))?;
    let total = n.input.len().saturating_sub(1);
    let m = usize::try_from(attr_i(n, "num_scan_inputs", 0)).unwrap_or(0);
    if m == 0 || m > total || body.input.len() != total || body.output.len() < total - m {
        return Err(im.malformed(
            n,
            format!(
                "{total} inputs after sequence_lens, num_scan_inputs {m}, a body of {} inputs \
                 and {} outputs",
                body.input.len(),
                body.output.len()
            ),
        ));
    }
    let states_n = total - m;
    let k = body.output.len() - states_n;
    let dirs = attr_ints(n, "directions").unwrap_or_else(|| vec![0; m]);
    if dirs.len() != m {
        return Err(im.malformed(n, format!("directions {dirs:?} for {m} scan inputs")));
    }
    let mut values = Vec::with_capacity(total);
    for i in 1..=total {
        let v = im.input(n, i).ok_or_else(|| im.malformed(n, format!("input {i} is missing")))?;
        let shape = im.shape_of(&v);
        values.push((v, shape));
    }
    let batch = values.first().and_then(|(_, s)| s.first().copied()).unwrap_or(0);
    let steps = values[states_n].1.get(1).copied().unwrap_or(0);
    for (j, (_, shape)) in values.iter().enumerate() {
        let scan = j >= states_n;
        if shape.first() != Some(&batch) || (scan && shape.get(1) != Some(&steps)) {
            return Err(im.malformed(
                n,
                format!(
                    "input {} of shape {shape:?}: every state is [B, ...] and every scan input \
                     [B, T, ...] (B {batch}, T {steps})",
                    j + 1
                ),
            ));
        }
    }
    if batch == 0 || steps == 0 {
        return Err(im.unsupported(n, "an empty batch or sequence"));
    }
    if n.input.first().is_some_and(|s| !s.is_empty()) {
        let lens = im.needed_input(n, 0).ok_or_else(|| {
            im.unsupported(n, "sequence_lens must be known at import time (lumen unrolls a Scan)")
        })?;
        if lens.to_i64().iter().any(|&l| l != steps as i64) {
            return Err(im.unsupported(
                n,
                format!("sequence_lens {:?} shorter than the sequence ({steps})", lens.to_i64()),
            ));
        }
    }
    let mut finals: Vec<Vec<Tensor>> = vec![Vec::new(); states_n];
    let mut outputs: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    for b in 0..batch {
        let mut states: Vec<Value> =
            values[..states_n].iter().map(|(v, shape)| pick(v, shape, 0, b)).collect();
        let mut collected: Vec<Vec<Tensor>> = vec![Vec::new(); k];
        for step in 0..steps {
            let mut inputs = states.clone();
            for (j, (v, shape)) in values[states_n..].iter().enumerate() {
                let at = if dirs[j] != 0 { steps - 1 - step } else { step };
                let item = pick(v, shape, 0, b);
                let mut inner = shape.clone();
                inner.remove(0);
                inputs.push(pick(&item, &inner, 0, at));
            }
            let mut outs = run_body(im, n, &body, &format!("scan{b}_{step}"), inputs)?;
            for (j, (name, v)) in outs.drain(states_n..).enumerate() {
                collected[j].push(im.materialize(n, name, v)?.unsqueeze(0));
            }
            states = outs.into_iter().map(|(_, v)| v).collect();
        }
        for (j, v) in states.into_iter().enumerate() {
            let name = format!("{}/scan{b}/state{j}", node_name(n));
            finals[j].push(im.materialize(n, name, v)?.unsqueeze(0));
        }
        for (j, parts) in collected.into_iter().enumerate() {
            outputs[j].push(super::movement::join(im, &parts, 0).unsqueeze(0));
        }
    }
    Ok(finals
        .into_iter()
        .chain(outputs)
        .map(|parts| super::movement::join(im, &parts, 0))
        .collect())
}

/// Most iterations an unrolled `Loop` may take (each one the body's nodes again).
const MAX_LOOP_STEPS: usize = 4096;

/// `Loop`: the body run while the iteration number is below the trip count `M` (when given)
/// and the condition holds (when given), unrolled at import: `M`, the initial condition and
/// every step's `cond_out` must be known then (constants, or computed from given graph inputs).
/// The body's inputs are the iteration number, the condition and the loop-carried values;
/// its outputs the next condition, the next loop-carried values and one element of each scan
/// output. Outputs: the final loop-carried values, then the scan outputs stacked along a new
/// first axis.
fn loop_(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let body =
        attr(n, "body").and_then(|a| a.g.clone()).ok_or_else(|| im.malformed(n, "no body"))?;
    let carried_n = n.input.len().saturating_sub(2);
    if body.input.len() != carried_n + 2 || body.output.len() < carried_n + 1 {
        return Err(im.malformed(
            n,
            format!(
                "{} inputs and a body of {} inputs, {} outputs",
                n.input.len(),
                body.input.len(),
                body.output.len()
            ),
        ));
    }
    let k = body.output.len() - 1 - carried_n;
    let known_int = |im: &Importer, i: usize| -> Result<Option<i64>, OnnxError> {
        match im.input(n, i) {
            None => Ok(None),
            Some(_) => match im.needed_input(n, i).and_then(|c| c.to_i64().first().copied()) {
                Some(v) => Ok(Some(v)),
                None => Err(im.unsupported(
                    n,
                    format!(
                        "input {i} (`{}`) must be known at import time: lumen unrolls a Loop",
                        n.input[i]
                    ),
                )),
            },
        }
    };
    let trips = known_int(im, 0)?;
    let mut keep_going = known_int(im, 1)?.is_none_or(|c| c != 0);
    let mut carried: Vec<(String, Value)> = Vec::with_capacity(carried_n);
    for i in 0..carried_n {
        let v = im
            .input(n, i + 2)
            .ok_or_else(|| im.malformed(n, format!("input {} is missing", i + 2)))?;
        carried.push((n.input[i + 2].clone(), v));
    }
    let mut collected: Vec<Vec<(String, Value)>> = vec![Vec::new(); k];
    let mut step = 0usize;
    while keep_going && trips.is_none_or(|m| (step as i64) < m) {
        if step == MAX_LOOP_STEPS {
            return Err(im.unsupported(n, format!("more than {MAX_LOOP_STEPS} iterations")));
        }
        let mut inputs = vec![
            Value::Const(Rc::new(Const::i64(vec![], vec![step as i64]))),
            Value::Const(Rc::new(Const::i64(vec![], vec![1]))),
        ];
        inputs.extend(carried.iter().map(|(_, v)| v.clone()));
        let mut outs = run_body(im, n, &body, &format!("loop{step}"), inputs)?;
        let cond = im.known_value(&outs[0].0).and_then(|c| c.to_i64().first().copied());
        keep_going = match cond {
            Some(c) => c != 0,
            None => {
                return Err(im.unsupported(
                    n,
                    "the body's condition is computed at run time: lumen unrolls a Loop whose \
                     condition is known at import",
                ));
            }
        };
        for (j, out) in outs.drain(carried_n + 1..).enumerate() {
            collected[j].push(out);
        }
        carried = outs.drain(1..).collect();
        step += 1;
    }
    let mut result = Vec::with_capacity(carried_n + k);
    for (name, v) in carried {
        result.push(im.materialize(n, name, v)?);
    }
    for elements in collected {
        if elements.is_empty() {
            return Err(im.unsupported(n, "a scan output of no iterations (an empty tensor)"));
        }
        let mut parts = Vec::with_capacity(elements.len());
        for (name, v) in elements {
            parts.push(im.materialize(n, name, v)?.unsqueeze(0));
        }
        // Integer elements (i64 where folded, i32 where computed) keep the first's type.
        result.push(super::movement::join(im, &parts, 0));
    }
    Ok(result)
}

/// One step of a `Scan` or `Loop` body, imported in place: the body's own names (its inputs,
/// initializers and node outputs) get the prefix `{node}/{step}/` so that every step's values
/// are distinct, names it does not define are the outer graph's values, and `inputs` are the
/// values of the body's inputs in order. Returns each body output's (step name, value).
///
/// # Errors
/// Every error of the body's nodes; a body output it does not define.
fn run_body(
    im: &mut Importer,
    n: &NodeProto,
    body: &crate::proto::GraphProto,
    step: &str,
    inputs: Vec<Value>,
) -> Result<Vec<(String, Value)>, OnnxError> {
    let prefix = format!("{}/{step}", node_name(n));
    let local: std::collections::HashSet<&str> = body
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(body.initializer.iter().map(|t| t.name.as_str()))
        .chain(body.node.iter().flat_map(|b| b.output.iter().map(String::as_str)))
        .collect();
    let tag = |name: &str| {
        if !name.is_empty() && local.contains(name) {
            format!("{prefix}/{name}")
        } else {
            name.to_string()
        }
    };
    for init in &body.initializer {
        let c = read_tensor(init, &init.name)?;
        im.values.insert(tag(&init.name), Value::Const(Rc::new(c)));
    }
    for (input, v) in body.input.iter().zip(inputs) {
        im.values.insert(tag(&input.name), v);
    }
    let nodes: Vec<NodeProto> = body
        .node
        .iter()
        .map(|b| {
            let mut c = b.clone();
            c.input = b.input.iter().map(|i| tag(i)).collect();
            c.output = b.output.iter().map(|o| tag(o)).collect();
            c.name = format!("{prefix}/{}", node_name(b));
            c
        })
        .collect();
    im.run_nodes(&nodes)?;
    body.output
        .iter()
        .map(|o| {
            let name = tag(&o.name);
            let v = im.values.get(&name).cloned().ok_or_else(|| {
                im.malformed(n, format!("the body does not define its output `{}`", o.name))
            })?;
            Ok((name, v))
        })
        .collect()
}
