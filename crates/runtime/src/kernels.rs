//! CPU kernels over f32 slices read through views: the matmul with its fused epilogue, the
//! elementwise map, reductions, gather and concat.
//!
//! Every kernel takes each operand as the whole buffer plus the [`View`] it reads (shape,
//! strides, offset in elements), checks that the view stays inside the buffer, and writes its
//! output contiguous, so movement costs no copy. The scalar meaning of each op comes from the
//! compiler's op table ([`ElemOp::eval_f32`], [`ReduceOp::combine_f32`]); nothing here
//! restates it. The matmul is [`crate::gemm`] (the `gemm` crate, which takes any row and column
//! stride, so a transposed operand is just a view; the fused epilogue; the GEMV path). The
//! matmul, maps and reductions split their output over a [`Threads`] team when large enough.
//! Every kernel returns [`RuntimeError::Kernel`] rather than panicking on inconsistent sizes.

use std::borrow::Cow;
use std::ops::Range;

use lumen_compiler::DType;
use lumen_compiler::view::{walk, walk_rows};
use lumen_compiler::{BinaryOp, ElemOp, IntOp, ReduceOp, ScatterReduction, UnaryOp, View};

use crate::RuntimeError;
pub use crate::gemm::{Activation, epilogue_parts};
use crate::gemm::{Matrix, matmul_epilogue};
use crate::isa::{lane_tree, widest};
use crate::packed::{PackedWeight, matmul_packed};
use crate::threads::{PAR_MIN_ELEMS, PAR_MIN_FLOPS, PAR_MIN_PART_ELEMS, Threads};

pub use lumen_compiler::ops::gelu_f32 as gelu_scalar;

fn check_len(
    kernel: &'static str,
    what: &str,
    got: usize,
    want: Option<usize>,
) -> Result<(), RuntimeError> {
    match want {
        Some(w) if w == got => Ok(()),
        Some(w) => {
            Err(RuntimeError::kernel(kernel, format!("{what} has {got} elements, expected {w}")))
        }
        None => Err(RuntimeError::kernel(kernel, format!("{what} size overflows"))),
    }
}

/// Checks that `view` (of `rank` axes, if given) stays inside a buffer of `len` elements.
fn check_view(
    kernel: &'static str,
    what: impl std::fmt::Display,
    view: &View,
    len: usize,
    rank: Option<usize>,
) -> Result<(), RuntimeError> {
    if view.strides.len() != view.shape.len() || rank.is_some_and(|r| r != view.rank()) {
        return Err(RuntimeError::kernel(kernel, format!("{what}'s view has the wrong rank")));
    }
    match view.extent() {
        Some(e) if e <= len => Ok(()),
        _ => Err(RuntimeError::kernel(
            kernel,
            format!("{what}'s view {:?} reaches past its {len} elements", view.shape),
        )),
    }
}

/// [`map`] in place: `ins[k] = None` marks an operand that is `inout` itself, read whole and in
/// row-major order; the others are `(buffer, view)` pairs as for [`map`], outside `inout`.
/// Element `i` is read (from every operand) before `inout[i]` is written, so the result is the
/// one [`map`] gives into a separate buffer (in-place reuse: the planner placed the output at
/// its dying operand's offset). Threads as for [`map`].
///
/// # Errors
/// As [`map`]: an arity other than the op's, views of another shape or reaching outside their
/// buffers.
pub fn map_in_place(
    op: ElemOp,
    ins: &[Option<Input<'_>>],
    inout: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "map";
    if ins.len() != op.arity() || ins.len() > 3 {
        return Err(RuntimeError::kernel(
            K,
            format!("{} takes {} operands", op.name(), op.arity()),
        ));
    }
    let len = inout.len();
    for (i, x) in ins.iter().enumerate() {
        if let Some((buf, view)) = x {
            if view.elements() != len {
                return Err(RuntimeError::kernel(K, format!("operand {i} has another shape")));
            }
            check_view(K, format_args!("operand {i}"), view, buf.len(), None)?;
        }
    }
    struct Run<'a, 'b>(&'a [Option<Input<'b>>], &'a mut [f32], &'a Threads);
    impl OpVisitor for Run<'_, '_> {
        fn visit(self, f: impl Fn([f32; 3]) -> f32 + Sync) {
            let Run(ins, inout, threads) = self;
            // The operands' shape (a flat run when every operand is the output itself).
            let flat = [inout.len()];
            let shape: &[usize] = match ins.iter().flatten().next() {
                Some((_, v)) => &v.shape,
                None => &flat,
            };
            let work = inout.len();
            split_outer(threads, shape, inout, work, |part, o| match part {
                None => widest(
                    #[inline(always)]
                    || map_in_place_with(ins, o, &f),
                ),
                Some((axis, r)) => {
                    let views: Vec<Option<View>> =
                        ins.iter().map(|x| x.map(|(_, v)| v.slice(axis, r.start, r.end))).collect();
                    let sub: Vec<Option<Input<'_>>> = ins
                        .iter()
                        .zip(&views)
                        .map(|(x, v)| x.zip(v.as_ref()).map(|((b, _), v)| (b, v)))
                        .collect();
                    widest(
                        #[inline(always)]
                        || map_in_place_with(&sub, o, &f),
                    );
                }
            });
        }
    }
    with_op(op, Run(ins, inout, threads));
    Ok(())
}

/// [`map_in_place`]'s loops: contiguous operands as one slice each, else a row at a time over
/// the other operands' views (a slice where the stride is 1, one value where it is 0, a
/// strided read otherwise), each element of `inout` read into the op's arguments before it is
/// overwritten.
#[inline(always)]
fn map_in_place_with(ins: &[Option<Input<'_>>], inout: &mut [f32], f: impl Fn([f32; 3]) -> f32) {
    // The output's own value goes wherever it is an operand (`x + x` reads it twice), the
    // other operands' values in order elsewhere.
    let own: [bool; 3] = std::array::from_fn(|k| matches!(ins.get(k), Some(None)));
    // The other operands (at most two: an operand of `select` is the output), in order.
    let mut others: [Option<Input<'_>>; 2] = [None; 2];
    for (slot, x) in others.iter_mut().zip(ins.iter().flatten()) {
        *slot = Some(*x);
    }
    let args = |x: f32, o: [f32; 2]| -> [f32; 3] {
        let mut a = [0.0f32; 3];
        let mut rest = o.into_iter();
        for (k, slot) in a.iter_mut().enumerate().take(ins.len()) {
            *slot = if own[k] { x } else { rest.next().unwrap_or(0.0) };
        }
        a
    };
    let len = inout.len();
    // A contiguous operand is read as one slice (the views were checked against the buffers).
    fn whole(x: Option<Input<'_>>, len: usize) -> Option<&[f32]> {
        let (b, v) = x?;
        b.get(v.offset..v.offset.checked_add(len)?).filter(|_| v.is_contiguous())
    }
    match (others, others.map(|x| whole(x, len))) {
        ([None, _], _) => {
            // Unary: the operand is the output itself.
            for o in inout.iter_mut() {
                *o = f(args(*o, [0.0; 2]));
            }
        }
        ([Some(_), None], [Some(a), _]) => {
            for (o, &v) in inout.iter_mut().zip(a) {
                *o = f(args(*o, [v, 0.0]));
            }
        }
        ([Some(_), Some(_)], [Some(a), Some(b)]) => {
            for ((o, &p), &q) in inout.iter_mut().zip(a).zip(b) {
                *o = f(args(*o, [p, q]));
            }
        }
        ([Some((a, va)), None], _) => {
            let mut i = 0;
            walk_rows(&va.shape, [va], |[x], len, [sx]| {
                let o = &mut inout[i..i + len];
                i += len;
                match sx {
                    0 => o.iter_mut().for_each(|o| *o = f(args(*o, [a[x], 0.0]))),
                    1 => o
                        .iter_mut()
                        .zip(&a[x..x + len])
                        .for_each(|(o, &v)| *o = f(args(*o, [v, 0.0]))),
                    s => o
                        .iter_mut()
                        .enumerate()
                        .for_each(|(j, o)| *o = f(args(*o, [a[x + j * s], 0.0]))),
                }
            })
        }
        ([Some((a, va)), Some((b, vb))], _) => {
            let mut i = 0;
            walk_rows(&va.shape, [va, vb], |[x, y], len, [sx, sy]| {
                let o = &mut inout[i..i + len];
                i += len;
                o.iter_mut()
                    .enumerate()
                    .for_each(|(j, o)| *o = f(args(*o, [a[x + j * sx], b[y + j * sy]])));
            })
        }
    }
}

/// `out[i] = op(operands at row-major index i)`: `ins` are `(buffer, view)` pairs whose views
/// all have one shape of `out.len()` elements. Contiguous operands take a plain loop. At least
/// [`PAR_MIN_ELEMS`] outputs are split over `threads` along the first axis longer than 1 (an
/// element's value never depends on the split, so outputs are the same on any thread count).
///
/// # Errors
/// [`RuntimeError::Kernel`] for an arity other than the op's, views of different shapes or
/// reaching outside their buffers, or an output of another size.
pub fn map(
    op: ElemOp,
    ins: &[(&[f32], &View)],
    out: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "map";
    if ins.len() != op.arity() {
        return Err(RuntimeError::kernel(
            K,
            format!("{} takes {} operands", op.name(), op.arity()),
        ));
    }
    let shape = &ins[0].1.shape;
    for (i, (buf, view)) in ins.iter().enumerate() {
        if &view.shape != shape {
            return Err(RuntimeError::kernel(K, format!("operand {i} has another shape")));
        }
        check_view(K, format_args!("operand {i}"), view, buf.len(), None)?;
    }
    check_len(K, "out", out.len(), Some(ins[0].1.elements()))?;
    struct Run<'a, 'b>(&'a [(&'b [f32], &'b View)], &'a mut [f32], &'a Threads);
    impl OpVisitor for Run<'_, '_> {
        fn visit(self, f: impl Fn([f32; 3]) -> f32 + Sync) {
            let Run(ins, out, threads) = self;
            let work = out.len();
            split_outer(threads, &ins[0].1.shape, out, work, |part, o| match part {
                None => widest(
                    #[inline(always)]
                    || map_with(ins, o, &f),
                ),
                Some((axis, r)) => {
                    let views: Vec<View> =
                        ins.iter().map(|(_, v)| v.slice(axis, r.start, r.end)).collect();
                    let sub: Vec<(&[f32], &View)> =
                        ins.iter().zip(&views).map(|((b, _), v)| (*b, v)).collect();
                    widest(
                        #[inline(always)]
                        || map_with(&sub, o, &f),
                    );
                }
            });
        }
    }
    with_op(op, Run(ins, out, threads));
    Ok(())
}

/// Runs `f` over `out` (row-major of `shape`) on `threads` when the kernel touches at least
/// [`PAR_MIN_ELEMS`] elements (`work`): split along the first axis longer than 1 (every axis
/// before it has length 1, so each range of it is a contiguous run of `out`), `f` getting
/// `Some((axis, range))` and that run; else `f(None, out)` once on the calling thread.
fn split_outer(
    threads: &Threads,
    shape: &[usize],
    out: &mut [f32],
    work: usize,
    f: impl Fn(Option<(usize, Range<usize>)>, &mut [f32]) + Sync,
) {
    let whole = shape.iter().product::<usize>() == out.len();
    match shape.iter().position(|&d| d > 1) {
        Some(axis) if whole && work >= PAR_MIN_ELEMS && threads.count() > 1 => {
            let rows = (shape[axis], shape[axis + 1..].iter().product());
            // Parts of at least PAR_MIN_PART_ELEMS of work (`work` spread over the axis).
            let align = (PAR_MIN_PART_ELEMS * rows.0).div_ceil(work.max(1)).max(1);
            let _ = threads.for_parts::<()>(out, rows, align, true, |r, part| {
                f(Some((axis, r)), part);
                Ok(())
            });
        }
        _ => f(None, out),
    }
}

/// Something done with an elementwise op's scalar function, monomorphized per op.
trait OpVisitor {
    fn visit(self, f: impl Fn([f32; 3]) -> f32 + Sync);
}

/// Calls `v` with `op`'s scalar function: a constant per op of the table, so each kernel loop
/// is compiled for its op (and vectorizes), rather than dispatching per element.
fn with_op(op: ElemOp, v: impl OpVisitor) {
    macro_rules! dispatch {
        ($($op:expr),* $(,)?) => {
            $(if op == $op {
                const OP: ElemOp = $op;
                return v.visit(#[inline(always)] |a| OP.eval_f32(a));
            })*
        };
    }
    dispatch!(
        ElemOp::Unary(UnaryOp::Neg),
        ElemOp::Unary(UnaryOp::Exp),
        ElemOp::Unary(UnaryOp::Log),
        ElemOp::Unary(UnaryOp::Sqrt),
        ElemOp::Unary(UnaryOp::Recip),
        ElemOp::Unary(UnaryOp::Tanh),
        ElemOp::Unary(UnaryOp::Erf),
        ElemOp::Unary(UnaryOp::Relu),
        ElemOp::Unary(UnaryOp::Gelu),
        ElemOp::Unary(UnaryOp::Contiguous),
        ElemOp::Unary(UnaryOp::Sigmoid),
        ElemOp::Unary(UnaryOp::Silu),
        ElemOp::Unary(UnaryOp::HardSwish),
        ElemOp::Unary(UnaryOp::Relu6),
        ElemOp::Unary(UnaryOp::Sin),
        ElemOp::Unary(UnaryOp::Cos),
        ElemOp::Unary(UnaryOp::Tan),
        ElemOp::Unary(UnaryOp::Asin),
        ElemOp::Unary(UnaryOp::Acos),
        ElemOp::Unary(UnaryOp::Atan),
        ElemOp::Unary(UnaryOp::Sinh),
        ElemOp::Unary(UnaryOp::Cosh),
        ElemOp::Unary(UnaryOp::Asinh),
        ElemOp::Unary(UnaryOp::Acosh),
        ElemOp::Unary(UnaryOp::Atanh),
        ElemOp::Binary(BinaryOp::Add),
        ElemOp::Binary(BinaryOp::Sub),
        ElemOp::Binary(BinaryOp::Mul),
        ElemOp::Binary(BinaryOp::Div),
        ElemOp::Binary(BinaryOp::Maximum),
        ElemOp::Binary(BinaryOp::LessThan),
        ElemOp::Binary(BinaryOp::Equal),
        ElemOp::Binary(BinaryOp::Pow),
        ElemOp::Select,
    );
    // Every op of the table is listed above; this is the generic path for one that is not.
    v.visit(|a| op.eval_f32(a));
}

/// The loop of [`map`] with the op's scalar function `f` known at compile time.
#[inline(always)]
fn map_with(ins: &[(&[f32], &View)], out: &mut [f32], f: impl Fn([f32; 3]) -> f32) {
    let whole = |(buf, v): &(&[f32], &View)| v.is_contiguous() && v.offset + out.len() <= buf.len();
    if ins.iter().all(whole) {
        let at = |k: usize| ins.get(k).map(|(b, v)| &b[v.offset..v.offset + out.len()]);
        match (at(0), at(1), at(2)) {
            (Some(a), None, _) => {
                for (o, &x) in out.iter_mut().zip(a) {
                    *o = f([x, 0.0, 0.0]);
                }
            }
            (Some(a), Some(b), None) => {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = f([x, y, 0.0]);
                }
            }
            (Some(a), Some(b), Some(c)) => {
                for (((o, &x), &y), &z) in out.iter_mut().zip(a).zip(b).zip(c) {
                    *o = f([x, y, z]);
                }
            }
            _ => {}
        }
        return;
    }
    // One operand broadcast along its innermost axis (nearest upsampling's `[.., W, f]` view,
    // stride 0 on `f`): rows of the axis before it, each value computed once and written `f`
    // times, rather than a row of `f` elements per call (a 2x Resize of 128x40x40: 1.12 ms ->
    // 0.19 ms per execute on one thread).
    if let [(a, va)] = ins
        && let rank = va.shape.len()
        && rank >= 2
        && va.strides[rank - 1] == 0
    {
        let rep = va.shape[rank - 1];
        let rows = View {
            shape: va.shape[..rank - 1].to_vec(),
            strides: va.strides[..rank - 1].to_vec(),
            offset: va.offset,
        };
        let mut i = 0;
        walk_rows(&rows.shape, [&rows], |[x], len, [sx]| {
            let o = &mut out[i..i + len * rep];
            i += len * rep;
            match (sx, rep) {
                // Two copies of a contiguous row (a 2x upsampling): a loop that vectorizes.
                (1, 2) => {
                    for (pair, &v) in o.chunks_exact_mut(2).zip(&a[x..x + len]) {
                        let y = f([v, 0.0, 0.0]);
                        pair[0] = y;
                        pair[1] = y;
                    }
                }
                (1, _) => {
                    for (run, &v) in o.chunks_exact_mut(rep).zip(&a[x..x + len]) {
                        run.fill(f([v, 0.0, 0.0]));
                    }
                }
                _ => {
                    for (j, run) in o.chunks_exact_mut(rep).enumerate() {
                        run.fill(f([a[x + j * sx], 0.0, 0.0]));
                    }
                }
            }
        });
        return;
    }
    let shape = &ins[0].1.shape;
    let mut i = 0;
    // A row at a time: a slice where the stride is 1, one value where it is 0 (a broadcast),
    // a strided loop otherwise; the common cases vectorize.
    match ins {
        [(a, va)] => walk_rows(shape, [*va], |[x], len, [sx]| {
            let o = &mut out[i..i + len];
            i += len;
            match sx {
                0 => o.fill(f([a[x], 0.0, 0.0])),
                1 => o.iter_mut().zip(&a[x..x + len]).for_each(|(o, &v)| *o = f([v, 0.0, 0.0])),
                s => o.iter_mut().enumerate().for_each(|(j, o)| *o = f([a[x + j * s], 0.0, 0.0])),
            }
        }),
        [(a, va), (b, vb)] => walk_rows(shape, [*va, *vb], |[x, y], len, [sx, sy]| {
            let o = &mut out[i..i + len];
            i += len;
            match (sx, sy) {
                (1, 1) => {
                    let (a, b) = (&a[x..x + len], &b[y..y + len]);
                    for ((o, &p), &q) in o.iter_mut().zip(a).zip(b) {
                        *o = f([p, q, 0.0]);
                    }
                }
                (1, 0) => {
                    let q = b[y];
                    o.iter_mut().zip(&a[x..x + len]).for_each(|(o, &p)| *o = f([p, q, 0.0]));
                }
                (0, 1) => {
                    let p = a[x];
                    o.iter_mut().zip(&b[y..y + len]).for_each(|(o, &q)| *o = f([p, q, 0.0]));
                }
                (sx, sy) => {
                    for (j, o) in o.iter_mut().enumerate() {
                        *o = f([a[x + j * sx], b[y + j * sy], 0.0]);
                    }
                }
            }
        }),
        [(a, va), (b, vb), (c, vc)] => {
            walk_rows(shape, [*va, *vb, *vc], |[x, y, z], len, [sx, sy, sz]| {
                for (j, o) in out[i..i + len].iter_mut().enumerate() {
                    *o = f([a[x + j * sx], b[y + j * sy], c[z + j * sz]]);
                }
                i += len;
            })
        }
        _ => {}
    }
}

/// The reduction of `input` (read through `view`) over `axis`, written row-major to `out`
/// (the view's shape without `axis`). An axis of length 0 gives the op's identity.
///
/// A sum is accumulated in f64 (in eight lanes, `SUM_LANES`) and rounded to f32 once. The f64
/// error is at most about `n · 2^-53` times the sum of the magnitudes, so the result is within
/// half an ulp (plus that) of the exact sum wherever the terms do not cancel: for inputs of one
/// sign, any axis shorter than about 2^29 elements (a sum that cancels, such as `1e20 + 1 -
/// 1e20`, can still lose what f64 cannot hold). Plain f32 accumulation drifts by up to `n` ulps
/// (0.96% for a million 0.1s; compensated f32 summation still lost 6e-5 there, its carry
/// drifting). Infinities and NaN follow IEEE 754 as in f32 (`MAX + MAX` rounds to
/// `inf`). An input of at least [`PAR_MIN_ELEMS`] elements is split over `threads` by output
/// rows, never along `axis`, so each output is the same on any thread count.
///
/// # Errors
/// [`RuntimeError::Kernel`] when `axis` is out of range, the view leaves the buffer, or `out`
/// has another size.
pub fn reduce(
    op: ReduceOp,
    input: &[f32],
    view: &View,
    axis: usize,
    out: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "reduce";
    check_view(K, "input", view, input.len(), None)?;
    if axis >= view.rank() {
        return Err(RuntimeError::kernel(K, format!("axis {axis} of a rank-{} view", view.rank())));
    }
    let extent = view.shape[axis];
    let rows = view.shape.iter().enumerate().filter(|&(a, _)| a != axis).map(|(_, &d)| d).product();
    check_len(K, "out", out.len(), Some(rows))?;
    out.fill(op.identity_f32());
    if extent == 0 || rows == 0 {
        return Ok(());
    }
    if view.elements() < PAR_MIN_ELEMS || threads.count() == 1 {
        // What `split_outer` does with such a reduction, without building its output shape.
        reduce_rows(op, input, view, axis, out);
        return Ok(());
    }
    // Split over output rows (never over the reduced axis): each part reduces the input's
    // slice of the same axis, so an output's value does not depend on the split.
    let out_shape: Vec<usize> =
        view.shape.iter().enumerate().filter(|&(a, _)| a != axis).map(|(_, &d)| d).collect();
    split_outer(threads, &out_shape, out, view.elements(), |part, o| match part {
        None => reduce_rows(op, input, view, axis, o),
        Some((a, r)) => {
            let at = if a < axis { a } else { a + 1 };
            reduce_rows(op, input, &view.slice(at, r.start, r.end), axis, o);
        }
    });
    Ok(())
}

/// [`reduce`]'s loops, the checks done: `out` (already the identity) gets each row's result.
fn reduce_rows(op: ReduceOp, input: &[f32], view: &View, axis: usize, out: &mut [f32]) {
    let extent = view.shape[axis];
    if axis + 1 == view.rank() && view.is_contiguous() && extent > 0 {
        // The common case (softmax, layer norm: the last axis of a contiguous tensor): each
        // output reduces one run of `extent` elements, in the order the general loop below
        // visits them, so the bits are the same.
        let Some(rows) = input.get(view.offset..view.offset + out.len() * extent) else {
            return;
        };
        let rows = rows.chunks_exact(extent);
        if op == ReduceOp::Sum {
            widest(|| {
                for (o, row) in out.iter_mut().zip(rows) {
                    *o = sum_row(row);
                }
            });
        } else {
            widest(|| {
                for (o, row) in out.iter_mut().zip(rows) {
                    *o = max_row(row);
                }
            });
        }
        return;
    }
    if op == ReduceOp::Sum && sum_over_blocks(input, view, axis, out) {
        return;
    }
    // The reduced axis last: each run of `extent` visits is one output.
    let mut perm: Vec<usize> = (0..view.rank()).filter(|&a| a != axis).collect();
    perm.push(axis);
    let moved = view.permute(&perm);
    let mut i = 0usize;
    if op == ReduceOp::Sum {
        // The reduced axis is the innermost: each row is one output.
        walk_rows(&moved.shape, [&moved], |[x], len, [s]| {
            out[i] = match s {
                1 => sum_row(&input[x..x + len]),
                s => sum_lanes((0..len).map(|j| input[x + j * s])),
            };
            i += 1;
        });
        return;
    }
    walk_rows(&moved.shape, [&moved], |[x], len, [s]| {
        out[i] = (0..len).fold(op.identity_f32(), |acc, j| op.combine_f32(acc, input[x + j * s]));
        i += 1;
    });
}

/// f64 accumulators of a sum: element `j` of a run goes to lane `j % SUM_LANES`, in order of
/// `j`; then the lanes are added in a fixed tree (lane `l` takes `l + 4`, then `l + 2`, then
/// `l + 1`) and the total rounded to f32 once. Eight independent chains, where one chain of
/// dependent f64 additions had cost four cycles an element (9% of the built-in transformer's
/// CPU execute, summing its layer norms' and softmaxes' short rows).
const SUM_LANES: usize = 8;

/// The sum of `values` in [`SUM_LANES`] lanes, the one order every sum in [`reduce`] uses.
#[inline(always)]
fn sum_lanes(values: impl Iterator<Item = f32>) -> f32 {
    let mut acc = [0.0f64; SUM_LANES];
    for (j, v) in values.enumerate() {
        acc[j % SUM_LANES] += f64::from(v);
    }
    lanes_total(acc)
}

/// [`sum_lanes`] of a contiguous run, written so that it vectorizes (the same additions in the
/// same order).
#[inline(always)]
fn sum_row(row: &[f32]) -> f32 {
    let mut acc = [0.0f64; SUM_LANES];
    let chunks = row.chunks_exact(SUM_LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a += f64::from(v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        *a += f64::from(v);
    }
    lanes_total(acc)
}

/// Output elements per tile of [`sum_over_blocks`]: its [`SUM_LANES`] f64 accumulators of a
/// tile (16 KiB) stay in L1.
const SUM_TILE: usize = 256;

/// A sum over `axis` when the axes after it are one contiguous block (mean pooling over tokens,
/// `[B, T, D]` summed over `T`): for each outer index, the `extent` blocks are added into
/// [`SUM_LANES`] accumulators per output element (block `j` into lane `j mod SUM_LANES`,
/// vectorized along the block), then each element's lanes in [`lanes_total`]'s tree: the
/// additions [`sum_lanes`] does for that element, so the same bits as the strided walk, which
/// had summed each output's `extent` values one strided load at a time (1.3 ns an element on
/// the digits ViT's pooling). `false` (nothing written) when the layout does not fit.
fn sum_over_blocks(input: &[f32], view: &View, axis: usize, out: &mut [f32]) -> bool {
    let rank = view.rank();
    if axis + 1 >= rank {
        return false;
    }
    let mut stride = 1;
    for a in (axis + 1..rank).rev() {
        if view.shape[a] != 1 && view.strides[a] != stride {
            return false;
        }
        stride *= view.shape[a];
    }
    let (extent, step, inner) = (view.shape[axis], view.strides[axis], stride);
    if extent == 0 || inner == 0 {
        return false;
    }
    let outer = View {
        shape: view.shape[..axis].to_vec(),
        strides: view.strides[..axis].to_vec(),
        offset: view.offset,
    };
    let mut acc = vec![0.0f64; SUM_LANES * SUM_TILE];
    let mut blocks = out.chunks_exact_mut(inner);
    widest(|| {
        walk(&outer.shape, [&outer], |[base]| {
            let Some(dst) = blocks.next() else { return };
            for t0 in (0..inner).step_by(SUM_TILE) {
                let w = SUM_TILE.min(inner - t0);
                for lane in acc.chunks_exact_mut(SUM_TILE) {
                    lane[..w].fill(0.0);
                }
                for j in 0..extent {
                    let at = base + j * step + t0;
                    let lane = &mut acc[j % SUM_LANES * SUM_TILE..][..w];
                    for (a, &v) in lane.iter_mut().zip(&input[at..at + w]) {
                        *a += f64::from(v);
                    }
                }
                for (d, o) in dst[t0..t0 + w].iter_mut().enumerate() {
                    *o = lanes_total(std::array::from_fn(|l| acc[l * SUM_TILE + d]));
                }
            }
        })
    });
    true
}

/// Lanes of [`max_row`]'s running maxima (one AVX-512 vector).
const MAX_LANES: usize = 16;

/// The max of a contiguous run with [`ReduceOp::Max`]'s semantics, bit for bit: NaN if any
/// element is NaN, else the first element of the largest value. A maximum is exact in any
/// order, so [`MAX_LANES`] running maxima (independent chains, vectorized) give the value;
/// only which zero comes first (`-0` or `+0`, equal but not the same bits) depends on the
/// order, so a row whose maximum is zero is folded again in order. The in-order fold had
/// taken 3.6 times as long as a sum of the same rows (softmax rows of 16 in the digits ViT);
/// this takes about 0.4 of its time there.
#[inline(always)]
fn max_row(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; MAX_LANES];
    let mut nan = false;
    let chunks = row.chunks_exact(MAX_LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            nan |= v.is_nan();
            *a = if v > *a { v } else { *a };
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        nan |= v.is_nan();
        *a = if v > *a { v } else { *a };
    }
    if nan {
        return f32::NAN;
    }
    let max = lane_tree(acc, |a, b| if b > a { b } else { a });
    if max == 0.0 {
        return row.iter().fold(f32::NEG_INFINITY, |m, &v| ReduceOp::Max.combine_f32(m, v));
    }
    max
}

/// A sum's lanes added in [`lane_tree`]'s order and rounded to f32 once.
#[inline(always)]
fn lanes_total(acc: [f64; SUM_LANES]) -> f32 {
    lane_tree(acc, |a, b| a + b) as f32
}

/// `out[m, n] = act(a[m, k] · b[k, n] + bias[n])`, row-major contiguous f32, bias broadcast
/// over rows when given: [`lt_matmul_strided`] with whole-buffer views. With `k = 0` the
/// product is all zeros (so `out = act(bias)`).
///
/// FLOP: `2·m·n·k` plus the epilogue's elementwise work.
///
/// # Errors
/// [`RuntimeError::Kernel`] when a slice's length does not match `m`, `k`, `n`.
pub fn lt_matmul(
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    (m, k, n): (usize, usize, usize),
    act: Activation,
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "lt_matmul";
    check_len(K, "a", a.len(), m.checked_mul(k))?;
    check_len(K, "b", b.len(), k.checked_mul(n))?;
    if let Some(bias) = bias {
        check_len(K, "bias", bias.len(), Some(n))?;
    }
    let (va, vb) = (View::contiguous(&[m, k]), View::contiguous(&[k, n]));
    let vbias = View::contiguous(&[n]);
    let bias = bias.map(|b| (b, &vbias));
    lt_matmul_strided((a, &va), (b, &vb), bias, out, (1, m, k, n), act, threads)
}

/// One operand of a kernel: the whole buffer and the view read from it.
pub type Input<'a> = (&'a [f32], &'a View);

/// `batch` products `act(a · b + bias)` read through views: `a` is `[batch axes..., m, k]`,
/// `b` `[batch axes..., k, n]` (the same batch axes, broadcast ones with stride 0), `bias`
/// `[n]`; `out` is written row-major `[batch, m, n]`. Any row and column strides work
/// (a transposed operand is a view with swapped strides), so nothing is copied first. Each
/// product is [`crate::gemm::matmul_epilogue`] (the GEMM, the GEMV path, the fused epilogue,
/// the split over `threads`), except in a batch of products each below [`PAR_MIN_FLOPS`] of at
/// least 8 rows: there each `b` is packed in turn into one reused copy
/// ([`crate::packed::PackedWeight::pack_into`]) and multiplied by
/// [`crate::packed::matmul_packed`] (on a CPU with its micro-kernels), cheaper than a `gemm`
/// crate call per product. A batch of products each below [`PAR_MIN_FLOPS`] but together at
/// least that (attention's heads) is split over `threads` by whole products instead, each
/// computed as on one thread, so the bits do not depend on the thread count. Measured on the
/// digits ViT's ONNX export (1,800 heads of `16 x 8 x 16` a product), two threads: 0.62 to 0.99
/// of the time with the heads on one thread, median 0.77 (paired runs).
///
/// # Errors
/// [`RuntimeError::Kernel`] when a view does not match the sizes or leaves its buffer, or
/// `out` has another size.
pub fn lt_matmul_strided(
    a: Input<'_>,
    b: Input<'_>,
    bias: Option<Input<'_>>,
    out: &mut [f32],
    dims: (usize, usize, usize, usize),
    act: Activation,
    threads: &Threads,
) -> Result<(), RuntimeError> {
    lt_matmul_prepacked(a, (b, None), bias, out, dims, act, threads)
}

/// [`lt_matmul_strided`], with `b`'s matrix optionally packed at prepare
/// ([`crate::packed::PackedWeight`], which the product then reads instead of `b`): the same
/// `[k, n]` matrix for every batch, so `b`'s batch axes must all have stride 0. Without a
/// packed copy, or on a CPU the packed path does not support, the product is
/// [`crate::gemm::matmul_epilogue`] as in [`lt_matmul_strided`].
///
/// # Errors
/// As [`lt_matmul_strided`]; also [`RuntimeError::Kernel`] when the packed matrix is not
/// `[k, n]` or `b` has a batch axis with a nonzero stride.
pub fn lt_matmul_prepacked(
    (a, va): Input<'_>,
    ((b, vb), packed): (Input<'_>, Option<&PackedWeight>),
    bias: Option<Input<'_>>,
    out: &mut [f32],
    (batch, m, k, n): (usize, usize, usize, usize),
    act: Activation,
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "lt_matmul";
    let rank = va.rank();
    check_view(K, "a", va, a.len(), None)?;
    check_view(K, "b", vb, b.len(), Some(rank))?;
    let nb = rank.checked_sub(2).ok_or_else(|| RuntimeError::kernel(K, "a is not a matrix"))?;
    if va.shape[nb..] != [m, k] || vb.shape[nb..] != [k, n] || va.shape[..nb] != vb.shape[..nb] {
        return Err(RuntimeError::kernel(K, "operand views do not match m, k, n and the batch"));
    }
    let count: usize = va.shape[..nb].iter().product();
    if count != batch {
        return Err(RuntimeError::kernel(K, format!("batch is {batch}, the views hold {count}")));
    }
    let mn = m.checked_mul(n).ok_or_else(|| RuntimeError::kernel(K, "size overflows"))?;
    check_len(K, "out", out.len(), batch.checked_mul(mn))?;
    if let Some((buf, v)) = bias {
        check_view(K, "bias", v, buf.len(), Some(1))?;
        check_len(K, "bias", v.elements(), Some(n))?;
    }
    if packed.is_some_and(|w| w.shape() != (k, n) || vb.strides[..nb].iter().any(|&s| s != 0)) {
        return Err(RuntimeError::kernel(K, "the packed weight is not b's one [k, n] matrix"));
    }
    if mn == 0 || batch == 0 {
        return Ok(());
    }
    // The bias as one contiguous row (a copy only when its view is strided).
    let bias: Option<Cow<'_, [f32]>> = bias.map(|(buf, v)| match v.strides[0] {
        1 => Cow::Borrowed(&buf[v.offset..v.offset + n]),
        _ => Cow::Owned((0..n).map(|j| buf[v.index(j)]).collect()),
    });
    // Batch offsets of each operand, in batch order.
    let batch_shape = &va.shape[..nb];
    let a_batch =
        View { shape: batch_shape.to_vec(), strides: va.strides[..nb].to_vec(), offset: va.offset };
    let b_batch =
        View { shape: batch_shape.to_vec(), strides: vb.strides[..nb].to_vec(), offset: vb.offset };
    let mut offsets = Vec::with_capacity(batch);
    walk(batch_shape, [&a_batch, &b_batch], |o| offsets.push(o));
    let outside = || RuntimeError::kernel(K, "an operand's matrix leaves its buffer");
    let flops = mn.saturating_mul(k).saturating_mul(2);
    // Many small products, each with its own right operand (attention's heads): each operand
    // packed in turn into one reused copy and multiplied by lumen's loops around the
    // micro-kernels, where the `gemm` crate's per-call planning and packing cost more than the
    // arithmetic (16x8x16 heads: about half the time; 16x16x8, whose strip is half padding,
    // three quarters). Fewer rows than a micro-kernel tile stay with the crate's paths.
    let pack_each = packed.is_none()
        && batch > 1
        && flops < PAR_MIN_FLOPS
        && m >= PACK_EACH_MIN_ROWS
        && crate::packed::vector_lanes().is_some();
    let product = |[oa, ob]: [usize; 2],
                   out_mat: &mut [f32],
                   threads: &Threads,
                   slot: &mut Option<PackedWeight>| {
        let am = Matrix::new(a, oa, (m, k), (va.strides[nb], va.strides[nb + 1]));
        let bm = Matrix::new(b, ob, (k, n), (vb.strides[nb], vb.strides[nb + 1]));
        let (am, bm) = (am.ok_or_else(outside)?, bm.ok_or_else(outside)?);
        let own = match packed {
            Some(w) => Some(w),
            None if pack_each => PackedWeight::pack_into(bm, slot)?,
            None => None,
        };
        match own {
            Some(w) => matmul_packed(am, w, bias.as_deref(), out_mat, act, threads),
            None => {
                matmul_epilogue(am, bm, bias.as_deref(), out_mat, act, threads);
                Ok(())
            }
        }
    };
    // Many products, each too small to split (attention's heads): the batch is split over the
    // threads instead, each product on one thread, so it runs as on one thread.
    if batch > 1 && flops < PAR_MIN_FLOPS && flops.saturating_mul(batch) >= PAR_MIN_FLOPS {
        let one = Threads::single();
        return threads.for_parts(out, (batch, mn), 1, true, |range, part| {
            let mut slot = None;
            for (i, out_mat) in range.zip(part.chunks_mut(mn)) {
                product(offsets[i], out_mat, &one, &mut slot)?;
            }
            Ok(())
        });
    }
    let mut slot = None;
    for (o, out_mat) in offsets.into_iter().zip(out.chunks_mut(mn)) {
        product(o, out_mat, threads, &mut slot)?;
    }
    Ok(())
}

/// Rows a product of a batch needs for its right operand to be packed on the fly
/// ([`lt_matmul_prepacked`]): about a micro-kernel tile's (6 with AVX-512); fewer rows leave the
/// tile mostly empty and the packing unpaid for.
const PACK_EACH_MIN_ROWS: usize = 8;

/// The id at slab word offset `word` of an ids buffer (`i64` as two words, low first; `i32`
/// as one).
fn id_at(ids: &[f32], element: usize, wide: bool) -> i64 {
    if wide {
        let lo = u64::from(ids[2 * element].to_bits());
        let hi = u64::from(ids[2 * element + 1].to_bits());
        (lo | (hi << 32)) as i64
    } else {
        i64::from(ids[element].to_bits() as i32)
    }
}

/// Embedding lookup: `out[i, :] = table[ids[i], :]` for every id in row-major order of
/// `ids_view`; `table` is read through `table_view` (`[vocab, dim]`), `ids` holds slab words
/// (`wide`: i64 as two words each; else i32). `ids_name` names the ids in errors.
///
/// # Errors
/// [`RuntimeError::IndexOutOfRange`] for an id outside `0..vocab` (nothing is read for it);
/// [`RuntimeError::Kernel`] for views that leave their buffers or an output of another size.
pub fn gather(
    (table, table_view): Input<'_>,
    (ids, ids_view): Input<'_>,
    wide: bool,
    ids_name: &str,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "gather";
    check_view(K, "table", table_view, table.len(), Some(2))?;
    let words = if wide { ids.len() / 2 } else { ids.len() };
    check_view(K, "ids", ids_view, words, None)?;
    let (vocab, dim) = (table_view.shape[0], table_view.shape[1]);
    check_len(K, "out", out.len(), ids_view.elements().checked_mul(dim))?;
    let mut result = Ok(());
    let mut position = 0usize;
    walk(&ids_view.shape, [ids_view], |[e]| {
        if result.is_err() {
            return;
        }
        let id = id_at(ids, e, wide);
        match usize::try_from(id).ok().filter(|&r| r < vocab) {
            Some(row) => {
                let dst = &mut out[position * dim..(position + 1) * dim];
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = table[table_view.offset
                        + row * table_view.strides[0]
                        + j * table_view.strides[1]];
                }
            }
            None => {
                // The id's place in the ids buffer (the user's tensor), not in this view of it.
                result = Err(RuntimeError::IndexOutOfRange {
                    op: "gather",
                    tensor: ids_name.to_string(),
                    index: id,
                    position: e,
                    rows: vocab,
                });
            }
        }
        position += 1;
    });
    result
}

/// `x` picked along `axis` by `indices` into `out` (row-major): position `j` of the axis
/// holds `x`'s slice `indices[j]`, or `fill` where the index is negative ([`LlirOp::Take`]).
/// `indices` is a 1-D view of slab words (`wide`: i64 as two words each; else i32); every
/// index is checked before anything is written. Each slice copy is one contiguous run when
/// `x`'s axes after `axis` are row-major.
///
/// # Errors
/// [`RuntimeError::IndexOutOfRange`] for an index at or past the axis' length, naming
/// `indices_name`; [`RuntimeError::Kernel`] for views that leave their buffers or do not fit,
/// or an output of another size.
///
/// [`LlirOp::Take`]: lumen_compiler::LlirOp::Take
#[allow(clippy::too_many_arguments)]
pub fn take(
    (x, xv): Input<'_>,
    (idx, iv): Input<'_>,
    wide: bool,
    axis: usize,
    fill: f32,
    indices_name: &str,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "take";
    check_view(K, "x", xv, x.len(), None)?;
    let words = if wide { idx.len() / 2 } else { idx.len() };
    check_view(K, "indices", iv, words, Some(1))?;
    if axis >= xv.rank() {
        return Err(RuntimeError::kernel(K, "axis out of range"));
    }
    let (extent, count) = (xv.shape[axis], iv.shape[0]);
    let outer: usize = xv.shape[..axis].iter().product();
    let inner: usize = xv.shape[axis + 1..].iter().product();
    check_len(K, "out", out.len(), outer.checked_mul(count).and_then(|v| v.checked_mul(inner)))?;
    let mut rows = Vec::with_capacity(count);
    for j in 0..count {
        let e = iv.offset + j * iv.strides[0];
        let id = id_at(idx, e, wide);
        rows.push(match usize::try_from(id) {
            Err(_) => None,
            Ok(r) if r < extent => Some(r),
            Ok(_) => {
                return Err(RuntimeError::IndexOutOfRange {
                    op: "gather",
                    tensor: indices_name.to_string(),
                    index: id,
                    position: e,
                    rows: extent,
                });
            }
        });
    }
    let outer_view = View {
        shape: xv.shape[..axis].to_vec(),
        strides: xv.strides[..axis].to_vec(),
        offset: xv.offset,
    };
    let inner_view = View {
        shape: xv.shape[axis + 1..].to_vec(),
        strides: xv.strides[axis + 1..].to_vec(),
        offset: 0,
    };
    let runs = inner_view.is_contiguous();
    let mut chunks = out.chunks_exact_mut(inner.max(1));
    let mut inner_offsets = Vec::new();
    if !runs {
        inner_view.for_each_offset(|o| inner_offsets.push(o));
    }
    walk(&outer_view.shape, [&outer_view], |[base]| {
        for row in &rows {
            let Some(dst) = chunks.next() else { return };
            match row {
                None => dst.fill(fill),
                Some(r) => {
                    let start = base + r * xv.strides[axis];
                    if runs {
                        dst.copy_from_slice(&x[start..start + inner]);
                    } else {
                        for (d, &o) in dst.iter_mut().zip(&inner_offsets) {
                            *d = x[start + o];
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

/// The value of element `e` (a view offset, in elements of `dtype`) of slab words `words`, as
/// f64: an f32, an i32 word, or an i64's two words.
#[inline]
fn value_at(words: &[f32], e: usize, dtype: DType) -> f64 {
    match dtype {
        DType::I32 | DType::I64 => id_at(words, e, dtype == DType::I64) as f64,
        _ => f64::from(words[e]),
    }
}

/// `x` (slab words of `from` elements, read through `xv` in row-major order) converted to
/// `to` into `out` (slab words, contiguous), by [`DType::cast_f64`]'s rule ([`LlirOp::Cast`]).
/// The same type copies each element's words exactly (an i64 keeps all 64 bits).
///
/// # Errors
/// [`RuntimeError::Kernel`] for a view that leaves its buffer, a `u8` type, or an output of
/// another size.
///
/// [`LlirOp::Cast`]: lumen_compiler::LlirOp::Cast
pub fn cast(
    (x, xv): Input<'_>,
    from: DType,
    to: DType,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "cast";
    let width = |d: DType| match d {
        DType::F32 | DType::I32 => Ok(1usize),
        DType::I64 => Ok(2),
        DType::U8 => Err(RuntimeError::kernel(K, "u8 is not a tensor type")),
    };
    let (wf, wt) = (width(from)?, width(to)?);
    check_view(K, "x", xv, x.len() / wf, None)?;
    check_len(K, "out", out.len(), xv.elements().checked_mul(wt))?;
    let mut at = 0usize;
    walk(&xv.shape, [xv], |[e]| {
        let dst = &mut out[at..at + wt];
        at += wt;
        if from == to {
            dst.copy_from_slice(&x[e * wf..e * wf + wf]);
            return;
        }
        let v = to.cast_f64(value_at(x, e, from));
        match to {
            DType::I64 => {
                let bits = (v as i64) as u64;
                dst[0] = f32::from_bits(bits as u32);
                dst[1] = f32::from_bits((bits >> 32) as u32);
            }
            DType::I32 => dst[0] = f32::from_bits((v as i32) as u32),
            _ => dst[0] = v as f32,
        }
    });
    Ok(())
}

/// An integer map ([`LlirOp::IntMap`]): `out[i] = op(operands at i)` over their common
/// shape, every operand (slab words of `dtype`: an i32 one word, an i64 two) read through its
/// view in row-major order, the result by [`IntOp::eval`] in `dtype`'s width (exact at every
/// value), written contiguous. One thread: these ops are rare and memory-bound.
///
/// # Errors
/// [`RuntimeError::Kernel`] for an arity other than the op's, a type other than i32/i64,
/// views of another shape or leaving their buffers, or an output of another size.
///
/// [`LlirOp::IntMap`]: lumen_compiler::LlirOp::IntMap
pub fn int_map(
    op: IntOp,
    dtype: DType,
    ins: &[Input<'_>],
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "int_map";
    if !IntOp::takes(dtype) {
        return Err(RuntimeError::kernel(K, format!("{dtype} is not an integer type")));
    }
    let wide = dtype == DType::I64;
    let w = if wide { 2 } else { 1 };
    let Some(&(_, first)) = ins.first() else {
        return Err(RuntimeError::kernel(K, "no operands"));
    };
    if ins.len() != op.arity() {
        return Err(RuntimeError::kernel(K, format!("{} operands for {op}", ins.len())));
    }
    for (k, &(x, v)) in ins.iter().enumerate() {
        check_view(K, format_args!("operand {k}"), v, x.len() / w, None)?;
        if v.shape != first.shape {
            return Err(RuntimeError::kernel(K, format!("operand {k} has another shape")));
        }
    }
    check_len(K, "out", out.len(), first.elements().checked_mul(w))?;
    let mut at = 0usize;
    let mut put = |y: i64| {
        if wide {
            let bits = y as u64;
            out[at] = f32::from_bits(bits as u32);
            out[at + 1] = f32::from_bits((bits >> 32) as u32);
        } else {
            out[at] = f32::from_bits(y as i32 as u32);
        }
        at += w;
    };
    match ins {
        [(x, xv)] => walk(&xv.shape, [*xv], |[e]| put(op.eval(dtype, id_at(x, e, wide), 0))),
        [(x, xv), (y, yv)] => walk(&xv.shape, [*xv, *yv], |[e, f]| {
            put(op.eval(dtype, id_at(x, e, wide), id_at(y, f, wide)));
        }),
        _ => return Err(RuntimeError::kernel(K, "more than two operands")),
    }
    Ok(())
}

/// The index of the largest (`max`) or smallest element along `axis` of `x` (f32, read
/// through its view), as i64 words into `out` ([`lumen_compiler::ops::arg_index`]'s rule:
/// first on ties unless `last`, NaN wins).
///
/// # Errors
/// [`RuntimeError::Kernel`] for a view that leaves its buffer, an axis out of range, or an
/// output of another size.
pub fn arg(
    (x, xv): Input<'_>,
    max: bool,
    axis: usize,
    last: bool,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "arg";
    check_view(K, "x", xv, x.len(), None)?;
    if axis >= xv.rank() {
        return Err(RuntimeError::kernel(K, "axis out of range"));
    }
    let extent = xv.shape[axis];
    let mut rest = xv.clone();
    rest.shape.remove(axis);
    rest.strides.remove(axis);
    check_len(K, "out", out.len(), rest.elements().checked_mul(2))?;
    let step = xv.strides[axis];
    let mut at = 0usize;
    walk(&rest.shape, [&rest], |[base]| {
        let i = lumen_compiler::ops::arg_index((0..extent).map(|k| x[base + k * step]), max, last);
        let bits = i as u64;
        out[at] = f32::from_bits(bits as u32);
        out[at + 1] = f32::from_bits((bits >> 32) as u32);
        at += 2;
    });
    Ok(())
}

/// The positions of the `k` largest (or smallest) elements along `axis` of `x` (f32, read
/// through its view), as i64 words into `out` ([`lumen_compiler::ops::top_k`]'s order).
///
/// # Errors
/// [`RuntimeError::Kernel`] for a view that leaves its buffer, an axis out of range, `k`
/// past the axis, or an output of another size.
pub fn top_k(
    (x, xv): Input<'_>,
    axis: usize,
    k: usize,
    largest: bool,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "topk";
    check_view(K, "x", xv, x.len(), None)?;
    if axis >= xv.rank() || k > xv.shape[axis] {
        return Err(RuntimeError::kernel(K, "axis out of range or k past it"));
    }
    let extent = xv.shape[axis];
    let inner: usize = xv.shape[axis + 1..].iter().product();
    let mut rest = xv.clone();
    rest.shape.remove(axis);
    rest.strides.remove(axis);
    check_len(K, "out", out.len(), rest.elements().checked_mul(k * 2))?;
    let step = xv.strides[axis];
    let mut row = Vec::with_capacity(extent);
    let mut r = 0usize;
    walk(&rest.shape, [&rest], |[base]| {
        row.clear();
        row.extend((0..extent).map(|e| x[base + e * step]));
        // Output element (outer, j, inner) of row r = outer * inner + inner_pos.
        let (outer, pos) = (r / inner.max(1), r % inner.max(1));
        for (j, &i) in lumen_compiler::ops::top_k(&row, k, largest).iter().enumerate() {
            let at = 2 * ((outer * k + j) * inner + pos);
            let bits = i as u64;
            out[at] = f32::from_bits(bits as u32);
            out[at + 1] = f32::from_bits((bits >> 32) as u32);
        }
        r += 1;
    });
    Ok(())
}

/// `out[i] = data[i with axis replaced by indices[i]]` (ONNX's `GatherElements`): `data` f32
/// through its view, `indices` slab words (`wide`: i64) through theirs, of the output's
/// shape; a negative index counts from the axis' end.
///
/// # Errors
/// [`RuntimeError::IndexOutOfRange`] naming `indices_name` for an index outside the axis;
/// [`RuntimeError::Kernel`] for views that leave their buffers or do not fit.
pub fn gather_elements(
    (data, dv): Input<'_>,
    (idx, iv): Input<'_>,
    wide: bool,
    axis: usize,
    indices_name: &str,
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "gather_elements";
    check_view(K, "data", dv, data.len(), None)?;
    let words = if wide { idx.len() / 2 } else { idx.len() };
    check_view(K, "indices", iv, words, Some(dv.rank()))?;
    if axis >= dv.rank() {
        return Err(RuntimeError::kernel(K, "axis out of range"));
    }
    check_len(K, "out", out.len(), Some(iv.elements()))?;
    let extent = dv.shape[axis] as i64;
    // The data view's offset of each output position but its axis, walked beside the indices.
    let mut base = dv.clone();
    base.shape = iv.shape.clone();
    base.strides[axis] = 0;
    let mut at = 0usize;
    let mut result = Ok(());
    walk(&iv.shape, [iv, &base], |[e, b]| {
        if result.is_err() {
            return;
        }
        let id = id_at(idx, e, wide);
        let id = if id < 0 { id + extent } else { id };
        if !(0..extent).contains(&id) {
            result = Err(RuntimeError::IndexOutOfRange {
                op: "gather",
                tensor: indices_name.to_string(),
                index: id_at(idx, e, wide),
                position: e,
                rows: extent as usize,
            });
            return;
        }
        out[at] = data[b + id as usize * dv.strides[axis]];
        at += 1;
    });
    result
}

/// ScatterElements ([`lumen_compiler::HlirOp::ScatterElements`]): `data` (slab words of
/// `dtype` elements: an f32 or an i32 per word, an i64 as two, read through its view) copied
/// into `out` (contiguous, the data's shape), then for every position `i` of `updates` (words
/// of `dtype` through their view) in row-major order, the output element at `i` with `axis`
/// replaced by `indices[i]` (slab words through their view, `wide`: i64; a negative index
/// counts from the axis' end) combined with `updates[i]` by `reduction` in `dtype`
/// ([`ScatterReduction::combine_f32`], `combine_i32`, `combine_i64`). The copy is split over
/// `threads` when large; the scatter walks on one thread, in order, so of several plain
/// updates on one element the last wins, and reductions combine in row-major order.
///
/// # Errors
/// [`RuntimeError::IndexOutOfRange`] (op `scatter_elements`) naming `indices_name` for the
/// first index outside the axis, in row-major order (nothing is written for it);
/// [`RuntimeError::Kernel`] for a `u8` type, views that leave their buffers or do not fit,
/// or an output of another size.
#[allow(clippy::too_many_arguments)]
pub fn scatter_elements(
    (data, dv): Input<'_>,
    (idx, iv): Input<'_>,
    (upd, uv): Input<'_>,
    dtype: DType,
    wide: bool,
    axis: usize,
    reduction: ScatterReduction,
    indices_name: &str,
    out: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "scatter_elements";
    let w = match dtype {
        DType::F32 | DType::I32 => 1,
        DType::I64 => 2,
        DType::U8 => return Err(RuntimeError::kernel(K, "u8 is not a tensor type")),
    };
    check_view(K, "data", dv, data.len() / w, None)?;
    let words = if wide { idx.len() / 2 } else { idx.len() };
    check_view(K, "indices", iv, words, Some(dv.rank()))?;
    check_view(K, "updates", uv, upd.len() / w, Some(dv.rank()))?;
    if axis >= dv.rank() {
        return Err(RuntimeError::kernel(K, "axis out of range"));
    }
    let fits = uv.shape == iv.shape
        && iv.shape.iter().zip(&dv.shape).enumerate().all(|(a, (i, d))| a == axis || i <= d);
    if !fits {
        return Err(RuntimeError::kernel(
            K,
            format!(
                "indices {:?} and updates {:?} do not fit data {:?}",
                iv.shape, uv.shape, dv.shape
            ),
        ));
    }
    let len = dv.elements();
    check_len(K, "out", out.len(), len.checked_mul(w))?;
    // The copy: one slice when the data is read in order (split over the team when large),
    // else element by element through the view.
    if dv.is_contiguous() && len > 0 {
        let src = &data[dv.offset * w..(dv.offset + len) * w];
        let parallel = src.len() >= PAR_MIN_ELEMS;
        threads.for_parts(out, (src.len(), 1), PAR_MIN_PART_ELEMS, parallel, |rows, part| {
            part.copy_from_slice(&src[rows]);
            Ok::<(), RuntimeError>(())
        })?;
    } else {
        let mut at = 0usize;
        walk(&dv.shape, [dv], |[e]| {
            out[at..at + w].copy_from_slice(&data[e * w..e * w + w]);
            at += w;
        });
    }
    // The output's offset of each update's position but its axis, walked beside the indices
    // and the updates; the index times the axis' stride is added.
    let strides = lumen_compiler::view::row_major_strides(&dv.shape);
    let step = strides[axis];
    let mut base = View { shape: iv.shape.clone(), strides, offset: 0 };
    base.strides[axis] = 0;
    let extent = dv.shape[axis] as i64;
    let mut result = Ok(());
    walk(&iv.shape, [iv, uv, &base], |[e, u, b]| {
        if result.is_err() {
            return;
        }
        let raw = id_at(idx, e, wide);
        let id = if raw < 0 { raw + extent } else { raw };
        if !(0..extent).contains(&id) {
            result = Err(RuntimeError::IndexOutOfRange {
                op: K,
                tensor: indices_name.to_string(),
                index: raw,
                position: e,
                rows: extent as usize,
            });
            return;
        }
        let t = b + id as usize * step;
        match dtype {
            DType::I64 => {
                let v = reduction.combine_i64(id_at(out, t, true), id_at(upd, u, true)) as u64;
                out[2 * t] = f32::from_bits(v as u32);
                out[2 * t + 1] = f32::from_bits((v >> 32) as u32);
            }
            DType::I32 => {
                let (old, new) = (out[t].to_bits() as i32, upd[u].to_bits() as i32);
                out[t] = f32::from_bits(reduction.combine_i32(old, new) as u32);
            }
            _ => out[t] = reduction.combine_f32(out[t], upd[u]),
        }
    });
    result
}

/// `ins` joined along `axis` into `out` (row-major, of shape `out_shape`): each operand is
/// copied into its slice of the output.
///
/// # Errors
/// [`RuntimeError::Kernel`] when the operands do not fill `out_shape` along `axis`, a view
/// leaves its buffer, or `out` has another size.
pub fn concat(
    ins: &[Input<'_>],
    axis: usize,
    out_shape: &[usize],
    out: &mut [f32],
) -> Result<(), RuntimeError> {
    const K: &str = "concat";
    let whole = View::contiguous(out_shape);
    check_len(K, "out", out.len(), Some(whole.elements()))?;
    if axis >= out_shape.len() {
        return Err(RuntimeError::kernel(K, "axis out of range"));
    }
    let mut start = 0usize;
    for (i, (buf, view)) in ins.iter().enumerate() {
        check_view(K, format_args!("operand {i}"), view, buf.len(), Some(out_shape.len()))?;
        let len = view.shape[axis];
        let end = start + len;
        let fits = end <= out_shape[axis]
            && view.shape.iter().zip(out_shape).enumerate().all(|(a, (x, y))| a == axis || x == y);
        if !fits {
            return Err(RuntimeError::kernel(K, format!("operand {i} does not fit the output")));
        }
        let dst = whole.slice(axis, start, end);
        walk(&view.shape, [&dst, *view], |[o, x]| out[o] = buf[x]);
        start = end;
    }
    if start != out_shape[axis] {
        return Err(RuntimeError::kernel(K, "operands do not fill the output"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::tests::bits;

    static ONE: std::sync::LazyLock<Threads> = std::sync::LazyLock::new(Threads::single);

    /// In place gives the bits `map` gives into a separate buffer: every op, the output's own
    /// value at any operand position (twice for `x op x`), the others contiguous, broadcast
    /// (stride 0) or transposed.
    #[test]
    fn in_place_map_is_map() {
        let shape = [3usize, 4];
        let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
        let other: Vec<f32> = (0..12).map(|i| ((i * 7 % 12) as f32 - 4.0) * 0.21).collect();
        let whole = View::contiguous(&shape);
        let row = View { shape: shape.to_vec(), strides: vec![0, 1], offset: 0 };
        let transposed = View { shape: shape.to_vec(), strides: vec![1, 3], offset: 0 };
        let ops: Vec<ElemOp> = UnaryOp::ALL
            .iter()
            .map(|&u| ElemOp::Unary(u))
            .chain(BinaryOp::ALL.iter().map(|&b| ElemOp::Binary(b)))
            .chain([ElemOp::Select])
            .collect();
        for op in ops {
            let n = op.arity();
            for own in 0..n {
                for (ov, twice) in
                    [(&whole, false), (&row, false), (&transposed, false), (&whole, true)]
                {
                    // Operands: x at `own` (and everywhere when `twice`), `other` elsewhere.
                    let is_own = |k: usize| k == own || twice;
                    let sep: Vec<(&[f32], &View)> = (0..n)
                        .map(|k| if is_own(k) { (&x[..], &whole) } else { (&other[..], ov) })
                        .collect();
                    let mut want = vec![0.0f32; 12];
                    map(op, &sep, &mut want, &ONE).unwrap();
                    let ins: Vec<Option<Input<'_>>> = (0..n)
                        .map(|k| if is_own(k) { None } else { Some((&other[..], ov)) })
                        .collect();
                    let mut got = x.clone();
                    map_in_place(op, &ins, &mut got, &ONE).unwrap();
                    assert_eq!(bits(&got), bits(&want), "{} own {own} twice {twice}", op.name());
                }
            }
        }
    }

    /// A unary map over a view broadcast along its innermost axis (nearest upsampling) gives
    /// each element of the row-major walk: factors 1 to 3, rows contiguous or strided.
    #[test]
    fn repeated_innermost_axis_matches_the_element_walk() {
        let x: Vec<f32> = (0..60).map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.37).collect();
        for rep in 1..=3 {
            for (rows, cols, row_stride) in [(3usize, 4usize, 1usize), (4, 3, 5)] {
                // [2, rows, cols, rep]: element (b, i, j, r) reads x at b*20 + i*4 + j*stride.
                let (si, sj) = if row_stride == 1 { (cols, 1) } else { (1, row_stride) };
                let view = View {
                    shape: vec![2, rows, cols, rep],
                    strides: vec![20, si, sj, 0],
                    offset: 1,
                };
                for op in [UnaryOp::Contiguous, UnaryOp::Neg, UnaryOp::Exp] {
                    let op = ElemOp::Unary(op);
                    let mut got = vec![0.0f32; view.elements()];
                    map(op, &[(&x[..], &view)], &mut got, &ONE).unwrap();
                    let mut want = Vec::new();
                    view.for_each_offset(|o| want.push(op.eval_f32([x[o], 0.0, 0.0])));
                    assert_eq!(bits(&got), bits(&want), "{} rep {rep} stride {row_stride}", op);
                }
            }
        }
    }

    /// The contiguous fast paths (map, map in place, reduce over the last axis) give the bits
    /// of the general strided loops: the same values read through a transposed buffer.
    #[test]
    fn contiguous_fast_paths_match_strided_loops() {
        let (r, c) = (5usize, 7usize);
        let x: Vec<f32> = (0..r * c).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.173).collect();
        let y: Vec<f32> = (0..r * c).map(|i| ((i * 11 % 17) as f32 - 8.5) * 0.291).collect();
        // Stored transposed: element (i, j) at j * r + i, read back through swapped strides.
        let transpose =
            |v: &[f32]| -> Vec<f32> { (0..r * c).map(|k| v[(k % r) * c + k / r]).collect() };
        let (xt, yt) = (transpose(&x), transpose(&y));
        let whole = View::contiguous(&[r, c]);
        let strided = View { shape: vec![r, c], strides: vec![1, r], offset: 0 };
        for op in ElemOp::ALL {
            let n = op.arity();
            let fast: Vec<Input<'_>> =
                [(&x[..], &whole), (&y[..], &whole), (&y[..], &whole)][..n].to_vec();
            let slow: Vec<Input<'_>> =
                [(&xt[..], &strided), (&yt[..], &strided), (&yt[..], &strided)][..n].to_vec();
            let (mut a, mut b) = (vec![0.0f32; r * c], vec![0.0f32; r * c]);
            map(op, &fast, &mut a, &ONE).unwrap();
            map(op, &slow, &mut b, &ONE).unwrap();
            assert_eq!(bits(&a), bits(&b), "map {}", op.name());
            // In place: x is the output; the others contiguous, then strided.
            let fast: Vec<Option<Input<'_>>> =
                (0..n).map(|k| (k > 0).then_some((&y[..], &whole))).collect();
            let slow: Vec<Option<Input<'_>>> =
                (0..n).map(|k| (k > 0).then_some((&yt[..], &strided))).collect();
            let (mut a, mut b) = (x.clone(), x.clone());
            map_in_place(op, &fast, &mut a, &ONE).unwrap();
            map_in_place(op, &slow, &mut b, &ONE).unwrap();
            assert_eq!(bits(&a), bits(&b), "in place {}", op.name());
        }
        for op in ReduceOp::ALL {
            let (mut a, mut b) = (vec![0.0f32; r], vec![0.0f32; r]);
            reduce(op, &x, &whole, 1, &mut a, &ONE).unwrap();
            reduce(op, &xt, &strided, 1, &mut b, &ONE).unwrap();
            assert_eq!(bits(&a), bits(&b), "reduce {op:?}");
        }
    }

    /// `map` runs its loops compiled for the widest instruction set ([`crate::isa::widest`]);
    /// the same loops compiled for the baseline give the same bits, for every op, on
    /// awkward values (the exp and gelu maps use FMA there, a library call here).
    #[test]
    fn widest_isa_maps_match_the_baseline() {
        let special = [0.0, -0.0, 1.0, -1.0, 88.7, 88.8, -103.9, -104.0, f32::MAX, f32::MIN];
        let more = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, -1e-40, 3.5, -7.25];
        let mut x: Vec<f32> = special.iter().chain(&more).copied().collect();
        x.extend((0..1000).map(|i| ((i * 7919 % 2000) as f32 - 1000.0) * 0.0123));
        let y: Vec<f32> = x.iter().rev().map(|v| v * 0.5 + 0.25).collect();
        let whole = View::contiguous(&[x.len()]);
        for op in ElemOp::ALL {
            let ins: Vec<Input<'_>> =
                [(&x[..], &whole), (&y[..], &whole), (&x[..], &whole)][..op.arity()].to_vec();
            let (mut wide, mut base) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
            map(op, &ins, &mut wide, &ONE).unwrap();
            map_with(&ins, &mut base, |a| op.eval_f32(a));
            assert_eq!(bits(&wide), bits(&base), "{}", op.name());
        }
    }

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
            }
        }
        c
    }

    #[test]
    fn k_zero_gives_act_of_bias() {
        let mut out = vec![f32::NAN; 6];
        lt_matmul(&[], &[], Some(&[1.0, -2.0, 3.0]), &mut out, (2, 0, 3), Activation::Relu, &ONE)
            .unwrap();
        assert_eq!(out, vec![1.0, 0.0, 3.0, 1.0, 0.0, 3.0]);
    }

    #[test]
    fn bias_epilogue_row_bias() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let eye = [1.0, 0.0, 0.0, 1.0];
        let mut out = [0.0; 4];
        lt_matmul(&a, &eye, Some(&[10.0, 20.0]), &mut out, (2, 2, 2), Activation::Identity, &ONE)
            .unwrap();
        assert_eq!(out, [11.0, 22.0, 13.0, 24.0]);
    }

    #[test]
    fn blocks_cover_every_row() {
        // n = 1 makes the epilogue block 262144 rows: m spans two blocks with a remainder.
        let (m, k, n) = (300_000, 3, 1);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let b = [0.5, -1.0, 2.0];
        let mut out = vec![f32::NAN; m];
        lt_matmul(&a, &b, Some(&[0.25]), &mut out, (m, k, n), Activation::Relu, &ONE).unwrap();
        let want = naive(&a, &b, m, k, n);
        for (o, w) in out.iter().zip(&want) {
            assert_eq!(*o as f64, (w + 0.25).max(0.0));
        }
    }

    /// GELU (tanh form) at exactly representable points, from mpmath at 60 digits:
    /// `x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))`.
    const GELU_EXACT: [(f32, f64); 14] = [
        (6.0, 5.999_999_999_915_603_5),
        (3.0, 2.996_362_607_918_227),
        (1.0, 0.841_191_990_608_276_7),
        (0.5, 0.345_714_009_825_143_9),
        (-0.5, -0.154_285_990_174_856_08),
        (-1.0, -0.158_808_009_391_723_3),
        (-3.0, -3.637_392_081_773_018_8e-3),
        (-4.0, -7.024_594_819_237_269e-5),
        (-5.0, -2.291_796_196_629_506e-7),
        (-6.0, -8.439_646_700_762_297e-11),
        (-8.0, -3.107_782_937_501_111_2e-21),
        (-10.0, -1.204_092_348_209_806e-37),
        (-10.5, -7.424_900_556_079_04e-43),
        (-13.0, -1.051_151_776_763_253_3e-76),
    ];

    #[test]
    fn gelu_is_accurate_on_the_negative_tail() {
        assert_eq!(gelu_scalar(0.0), 0.0);
        for (x, exact) in GELU_EXACT {
            let got = f64::from(gelu_scalar(x));
            if exact.abs() >= f64::from(f32::MIN_POSITIVE) {
                // The f32 constants and f32 rounding of z (|2z| <= 88 here) bound the error.
                let rel = (got - exact).abs() / exact.abs();
                assert!(rel < 2e-5, "gelu({x}) = {got:e}, exact {exact:e}, rel {rel:e}");
            } else if exact.abs() >= 1e-45 {
                // Subnormal results keep their sign and magnitude to within a few ulps of 2^-149.
                assert!(got < 0.0 && (got - exact).abs() < 1e-44, "gelu({x}) = {got:e}");
            } else {
                // Below f32's range: a negative zero, never a positive value or NaN.
                assert!(got == 0.0 && got.is_sign_negative(), "gelu({x}) = {got:e}");
            }
        }
    }

    proptest::proptest! {
        /// Against the f64 reference wherever the value is a normal f32 (down to x = -10.1).
        /// The error is f32's rounding of z magnified by |2z| (up to 88 here): a dense sweep
        /// of [-10.1, 10] measured at most 1.15e-5, at x = -10.04.
        #[test]
        fn gelu_relative_error_is_bounded(x in -10.1f32..10.0) {
            let got = f64::from(gelu_scalar(x));
            let want = lumen_compiler::ops::gelu_f64(f64::from(x));
            if want.abs() >= f64::from(f32::MIN_POSITIVE) {
                let rel = (got - want).abs() / want.abs();
                proptest::prop_assert!(rel < 2e-5, "gelu({}) = {:e}, want {:e}", x, got, want);
            } else {
                proptest::prop_assert!(got <= 0.0 && (got - want).abs() < f64::from(f32::MIN_POSITIVE));
            }
        }
    }

    #[test]
    fn gelu_at_the_infinities() {
        assert_eq!(gelu_scalar(f32::INFINITY), f32::INFINITY);
        let neg = gelu_scalar(f32::NEG_INFINITY);
        assert!(neg == 0.0 && neg.is_sign_negative(), "gelu(-inf) = {neg}");
        // Finite inputs whose cube overflows f32 take the same limits.
        assert_eq!(gelu_scalar(f32::MAX), f32::MAX);
        let low = gelu_scalar(f32::MIN);
        assert!(low == 0.0 && low.is_sign_negative(), "gelu(MIN) = {low}");
        assert!(gelu_scalar(f32::NAN).is_nan());
        // The fused epilogue applies the same scalar: 1 * 1 + (-6) = -5.
        let mut out = [0.0f32; 3];
        lt_matmul(&[1.0; 3], &[1.0], Some(&[-6.0]), &mut out, (3, 1, 1), Activation::Gelu, &ONE)
            .unwrap();
        let exact = GELU_EXACT[8].1;
        assert_eq!(GELU_EXACT[8].0, -5.0);
        for v in out {
            let rel = (f64::from(v) - exact).abs() / exact.abs();
            assert!(rel < 2e-5, "epilogue gelu(-5) = {v:e}");
        }
    }

    #[test]
    fn relu_keeps_nan() {
        let mut out = [0.0; 3];
        let x = [-1.0, f32::NAN, 2.0];
        map(ElemOp::Unary(UnaryOp::Relu), &[(&x, &View::contiguous(&[3]))], &mut out, &ONE)
            .unwrap();
        assert_eq!(out[0], 0.0);
        assert!(out[1].is_nan());
        assert_eq!(out[2], 2.0);
    }

    #[test]
    fn strided_operands_broadcast_and_transpose() {
        // [2, 3] + [3] (bias over rows), and a transposed [3, 2] read as [2, 3].
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0, 20.0, 30.0];
        let vb = View::contiguous(&[3]).expand(&[2, 3]).unwrap();
        let mut out = [0.0; 6];
        let add = ElemOp::Binary(BinaryOp::Add);
        map(add, &[(&x, &View::contiguous(&[2, 3])), (&b, &vb)], &mut out, &ONE).unwrap();
        assert_eq!(out, [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        let t = View::contiguous(&[3, 2]).permute(&[1, 0]);
        map(ElemOp::Unary(UnaryOp::Contiguous), &[(&x, &t)], &mut out, &ONE).unwrap();
        assert_eq!(out, [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
        // A view past the buffer is refused, not read.
        let past = View { shape: vec![4], strides: vec![2], offset: 0 };
        let err =
            map(ElemOp::Unary(UnaryOp::Neg), &[(&x, &past)], &mut [0.0; 4], &ONE).unwrap_err();
        assert!(err.to_string().contains("reaches past"), "{err}");
    }

    #[test]
    fn reduce_over_any_axis() {
        let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let v = View::contiguous(&[2, 3, 4]);
        let mut out = vec![0.0; 8];
        reduce(ReduceOp::Sum, &x, &v, 1, &mut out, &ONE).unwrap();
        assert_eq!(out, [12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]);
        let mut out = vec![0.0; 6];
        reduce(ReduceOp::Max, &x, &v, 2, &mut out, &ONE).unwrap();
        assert_eq!(out, [3.0, 7.0, 11.0, 15.0, 19.0, 23.0]);
        let mut empty = vec![1.0; 2];
        reduce(ReduceOp::Max, &[], &View::contiguous(&[2, 0]), 1, &mut empty, &ONE).unwrap();
        assert_eq!(empty, [f32::NEG_INFINITY; 2]);
    }

    /// The lane-parallel max of contiguous rows gives the in-order fold's bits: NaN anywhere,
    /// infinities, and which zero comes first when the maximum is zero; rows shorter and
    /// longer than the lanes, with a tail. The strided path (the same rows read transposed)
    /// folds in order and must agree.
    #[test]
    fn row_maxima_match_the_in_order_fold() {
        let specials = [0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5, -2.0];
        for len in [1, 2, 15, 16, 17, 33, 64] {
            let rows = 200;
            let x: Vec<f32> = (0..rows * len)
                .map(|i| {
                    let r = i / len;
                    let h = (i as u32).wrapping_mul(2_654_435_761) >> 7;
                    match r % 4 {
                        // Zeros of both signs and negatives: the maximum is a zero.
                        0 => [-0.0, 0.0, -1.0][h as usize % 3],
                        // Now and then a special value.
                        1 if h.is_multiple_of(5) => specials[h as usize % specials.len()],
                        _ => (h % 1000) as f32 / 100.0 - 5.0,
                    }
                })
                .collect();
            let want: Vec<u32> = x
                .chunks(len)
                .map(|row| {
                    row.iter().fold(f32::NEG_INFINITY, |m, &v| ReduceOp::Max.combine_f32(m, v))
                })
                .map(f32::to_bits)
                .collect();
            let mut out = vec![0.0; rows];
            reduce(ReduceOp::Max, &x, &View::contiguous(&[rows, len]), 1, &mut out, &ONE).unwrap();
            assert_eq!(bits(&out), want, "rows of {len}");
            let t = View::contiguous(&[rows, len]).permute(&[1, 0]);
            let mut strided = vec![0.0; rows];
            reduce(ReduceOp::Max, &x, &t, 0, &mut strided, &ONE).unwrap();
            assert_eq!(bits(&strided), want, "rows of {len}, strided");
            assert!(out.iter().any(|v| v.is_nan()) || len < 5, "the test holds NaN rows");
            assert!(out.iter().any(|v| v.to_bits() == (-0.0f32).to_bits()), "and -0 maxima");
        }
    }

    #[test]
    fn long_sums_are_accurate_and_keep_ieee_specials() {
        let n = 1_000_000;
        let x = vec![0.1f32; n];
        let mut out = [0.0f32];
        reduce(ReduceOp::Sum, &x, &View::contiguous(&[n]), 0, &mut out, &ONE).unwrap();
        let exact = 0.1f32 as f64 * n as f64;
        assert!(((out[0] as f64) - exact).abs() / exact < 1e-7, "{} vs {exact}", out[0]);
        for (vals, want) in [
            (vec![1.0, f32::INFINITY, 2.0], f32::INFINITY),
            (vec![f32::INFINITY, f32::NEG_INFINITY], f32::NAN),
            (vec![1.0, f32::NAN], f32::NAN),
            (vec![f32::MAX, f32::MAX], f32::INFINITY),
            (vec![1e8, 1.0, -1e8], 1.0),
        ] {
            let mut out = [0.0f32];
            reduce(ReduceOp::Sum, &vals, &View::contiguous(&[vals.len()]), 0, &mut out, &ONE)
                .unwrap();
            assert!(out[0] == want || (want.is_nan() && out[0].is_nan()), "{vals:?}: {}", out[0]);
        }
    }

    /// A sum reads its run in eight f64 lanes in one order whatever the layout: the last axis
    /// of a contiguous tensor and the same values through a transposed view give the same bits
    /// (runs of 1 to 70, off every lane multiple), each the exact sum rounded once.
    #[test]
    fn sums_take_the_same_order_in_every_layout() {
        for extent in [1, 2, 7, 8, 9, 16, 31, 64, 70] {
            let rows = 5;
            let x: Vec<f32> =
                (0..rows * extent).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
            let mut direct = vec![0.0; rows];
            reduce(ReduceOp::Sum, &x, &View::contiguous(&[rows, extent]), 1, &mut direct, &ONE)
                .unwrap();
            // The same values stored column-major, read through the transposed view.
            let xt: Vec<f32> =
                (0..rows * extent).map(|i| x[(i % rows) * extent + i / rows]).collect();
            let view = View::contiguous(&[extent, rows]).permute(&[1, 0]);
            let mut strided = vec![0.0; rows];
            reduce(ReduceOp::Sum, &xt, &view, 1, &mut strided, &ONE).unwrap();
            assert_eq!(bits(&direct), bits(&strided), "extent {extent}");
            // And as a sum over the first axis of `[extent, rows]`: a block of rows at a time.
            let mut blocks = vec![0.0; rows];
            let first = View::contiguous(&[extent, rows]);
            reduce(ReduceOp::Sum, &xt, &first, 0, &mut blocks, &ONE).unwrap();
            assert_eq!(bits(&direct), bits(&blocks), "extent {extent}, over axis 0");
            for (r, got) in direct.iter().enumerate() {
                let exact: f64 =
                    x[r * extent..(r + 1) * extent].iter().map(|&v| f64::from(v)).sum();
                assert_eq!(*got, exact as f32, "extent {extent}, row {r}");
            }
        }
        // Where the order shows: 1e20 (lane 0), 1 (lane 1) and -1e20 (lane 2) meet only in the
        // tree, lane 0 with lane 2 first, so the 1 survives (one chain of additions gives 0);
        // both layouts take that order.
        let row = [1e20f32, 1.0, -1e20, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let x: Vec<f32> = row.iter().chain(&row).copied().collect();
        let mut direct = [f32::NAN; 2];
        reduce(ReduceOp::Sum, &x, &View::contiguous(&[2, 9]), 1, &mut direct, &ONE).unwrap();
        // Column-major: element j of both rows at 2j and 2j + 1.
        let xt: Vec<f32> = row.iter().flat_map(|&v| [v, v]).collect();
        let view = View::contiguous(&[9, 2]).permute(&[1, 0]);
        let mut strided = [f32::NAN; 2];
        reduce(ReduceOp::Sum, &xt, &view, 1, &mut strided, &ONE).unwrap();
        let mut blocks = [f32::NAN; 2];
        reduce(ReduceOp::Sum, &xt, &View::contiguous(&[9, 2]), 0, &mut blocks, &ONE).unwrap();
        assert_eq!((direct, strided, blocks), ([1.0; 2], [1.0; 2], [1.0; 2]));
    }

    /// A sum over a middle axis followed by a contiguous block (`[B, T, D]` over `T`), with
    /// blocks wider than a tile and an outer axis that skips elements: each output is
    /// `sum_lanes` of its values in order, bit for bit, on one and two threads (values whose
    /// sums depend on the order: four lanes instead of eight fail).
    #[test]
    fn sums_over_a_middle_axis_take_the_lanes_order() {
        for (b, t, d) in [(3, 17, 5), (2, 9, 300), (1, 1, 1), (450, 16, 32)] {
            // A sliced outer axis: every other batch of a buffer twice as long.
            // ±1e20 among small values: f64 drops the small ones next to them, so the sum depends
            // on which lane each value goes to and how the lanes meet.
            let x: Vec<f32> = (0..2 * b * t * d)
                .map(|i| match i % 37 {
                    0 => 1e20,
                    5 => -1e20,
                    _ => ((i * 37 % 101) as f32 - 50.0) / 7.0,
                })
                .collect();
            let full = View::contiguous(&[2 * b, t, d]);
            let view = View {
                shape: vec![b, t, d],
                strides: vec![2 * full.strides[0], full.strides[1], 1],
                offset: t * d,
            };
            let want: Vec<u32> = (0..b * d)
                .map(|o| {
                    let (bi, di) = (o / d, o % d);
                    sum_lanes((0..t).map(|ti| x[view.offset + bi * view.strides[0] + ti * d + di]))
                })
                .map(f32::to_bits)
                .collect();
            for team in [ONE.clone(), Threads::new(Some(2)).unwrap()] {
                let mut out = vec![f32::NAN; b * d];
                reduce(ReduceOp::Sum, &x, &view, 1, &mut out, &team).unwrap();
                assert_eq!(bits(&out), want, "[{b}, {t}, {d}], {} threads", team.count());
            }
        }
    }

    #[test]
    fn batched_transposed_matmul_matches_naive() {
        // [2, 2, 3] x [2, 3, 2]^T-stored: b is read from a [2, 2, 3] buffer transposed.
        let a: Vec<f32> = (0..12).map(|v| v as f32 - 5.0).collect();
        let b: Vec<f32> = (0..12).map(|v| (v as f32) * 0.5).collect();
        let va = View::contiguous(&[2, 2, 3]);
        let vb = View::contiguous(&[2, 2, 3]).permute(&[0, 2, 1]);
        let mut out = vec![0.0; 8];
        lt_matmul_strided(
            (&a, &va),
            (&b, &vb),
            None,
            &mut out,
            (2, 2, 3, 2),
            Activation::Identity,
            &ONE,
        )
        .unwrap();
        for bt in 0..2 {
            for i in 0..2 {
                for j in 0..2 {
                    let want: f32 =
                        (0..3).map(|p| a[bt * 6 + i * 3 + p] * b[bt * 6 + j * 3 + p]).sum();
                    assert_eq!(out[bt * 4 + i * 2 + j], want);
                }
            }
        }
    }

    /// Attention-sized products in a batch large enough to split over threads (1,800 heads of
    /// `[16, 8] · [8, 16]`, the right operand a transposed view, and `[16, 16] · [16, 8]`):
    /// each within f32 rounding of the f64 product, the same bits on 1, 2 and 3 threads.
    #[test]
    fn batches_of_small_products_split_over_threads() {
        let teams = [ONE.clone(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        let batch = 1800;
        for (m, k, n, b_transposed) in [(16, 8, 16, true), (16, 16, 8, false)] {
            let a: Vec<f32> =
                (0..batch * m * k).map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0).collect();
            let b: Vec<f32> =
                (0..batch * k * n).map(|i| ((i * 5 % 19) as f32 - 9.0) / 4.0).collect();
            let va = View::contiguous(&[batch, m, k]);
            let vb = if b_transposed {
                View::contiguous(&[batch, n, k]).permute(&[0, 2, 1])
            } else {
                View::contiguous(&[batch, k, n])
            };
            assert!(2 * m * k * n * batch >= PAR_MIN_FLOPS, "the batch splits");
            let mut first: Option<Vec<u32>> = None;
            for team in &teams {
                let mut out = vec![f32::NAN; batch * m * n];
                let dims = (batch, m, k, n);
                lt_matmul_strided(
                    (&a, &va),
                    (&b, &vb),
                    None,
                    &mut out,
                    dims,
                    Activation::Identity,
                    team,
                )
                .unwrap();
                for (idx, got) in out.iter().enumerate() {
                    let (t, i, j) = (idx / (m * n), idx / n % m, idx % n);
                    let want: f64 = (0..k)
                        .map(|p| {
                            f64::from(a[t * m * k + i * k + p])
                                * f64::from(b[vb.index(t * k * n + p * n + j)])
                        })
                        .sum();
                    assert!((f64::from(*got) - want).abs() <= 1e-5 * (1.0 + want.abs()), "[{idx}]");
                }
                match &first {
                    None => first = Some(bits(&out)),
                    Some(f) => assert_eq!(f, &bits(&out), "{m}x{k}x{n}, {} threads", team.count()),
                }
            }
        }
    }

    /// Maps (fresh and in place) and reductions large enough to split give the bits of one
    /// thread on two and three: broadcast, transposed and leading-1 shapes.
    #[test]
    fn threaded_maps_and_reductions_match_one_thread() {
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        // At least PAR_MIN_ELEMS, so two and three threads split it.
        let (rows, cols) = (1031usize, 1025usize);
        let shape = [1, rows, cols];
        let len = rows * cols;
        assert!(len >= PAR_MIN_ELEMS);
        let x: Vec<f32> = (0..len).map(|i| ((i * 37 % 1001) as f32 - 500.0) * 0.013).collect();
        let bias: Vec<f32> = (0..cols).map(|i| i as f32 * 0.01 - 5.0).collect();
        let whole = View::contiguous(&shape);
        let row = View::contiguous(&[cols]).expand(&shape).unwrap();
        let transposed = View::contiguous(&[cols, rows]).permute(&[1, 0]).reshape(&shape).unwrap();
        let add = ElemOp::Binary(BinaryOp::Add);
        let mut first: Option<Vec<Vec<u32>>> = None;
        for t in &teams {
            let mut got = Vec::new();
            let mut out = vec![0.0f32; len];
            map(add, &[(&x, &whole), (&bias, &row)], &mut out, t).unwrap();
            got.push(bits(&out));
            map(ElemOp::Unary(UnaryOp::Gelu), &[(&x, &transposed)], &mut out, t).unwrap();
            got.push(bits(&out));
            let mut inout = x.clone();
            map_in_place(add, &[None, Some((&bias, &row))], &mut inout, t).unwrap();
            got.push(bits(&inout));
            map_in_place(ElemOp::Unary(UnaryOp::Exp), &[None], &mut inout, t).unwrap();
            got.push(bits(&inout));
            for (axis, kept) in [(2, rows), (1, cols)] {
                let mut red = vec![0.0f32; kept];
                reduce(ReduceOp::Sum, &x, &whole, axis, &mut red, t).unwrap();
                got.push(bits(&red));
                reduce(ReduceOp::Max, &x, &transposed, axis, &mut red, t).unwrap();
                got.push(bits(&red));
            }
            match &first {
                None => first = Some(got),
                Some(want) => assert_eq!(&got, want, "{} threads", t.count()),
            }
        }
        // The values themselves: the bias add and a row's sum.
        let want = first.unwrap();
        assert_eq!(want[0][cols + 3], (x[cols + 3] + bias[3]).to_bits());
        let row0: f64 = x[..cols].iter().map(|&v| f64::from(v)).sum();
        assert_eq!(want[4][0], (row0 as f32).to_bits());
    }

    /// Batched products read through transposed, broadcast (stride-0 batch) and offset views at
    /// odd sizes (m, k, n of 1, 2, 3 and off every tile multiple), with bias and each
    /// activation, against the f64 reference; two threads give one thread's bits.
    #[test]
    fn strided_batched_matmul_at_odd_shapes() {
        let two = Threads::new(Some(2)).unwrap();
        for &(m, k, n) in
            &[(1, 1, 1), (2, 3, 1), (3, 1, 5), (5, 7, 9), (300, 5, 3), (2600, 33, 100)]
        {
            for act in [Activation::Identity, Activation::Relu, Activation::Gelu] {
                // a: [2, m, k] stored after 3 unused elements; b: one [n, k] matrix read
                // transposed and broadcast over the batch; bias read with stride 2.
                let a: Vec<f32> =
                    (0..3 + 2 * m * k).map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.07).collect();
                let b: Vec<f32> = (0..n * k).map(|i| ((i * 7 % 17) as f32 - 8.0) * 0.11).collect();
                let bias: Vec<f32> = (0..2 * n).map(|i| i as f32 * 0.3 - 1.0).collect();
                let va = View { shape: vec![2, m, k], strides: vec![m * k, k, 1], offset: 3 };
                let vb = View { shape: vec![2, k, n], strides: vec![0, 1, k], offset: 0 };
                let vbias = View { shape: vec![n], strides: vec![2], offset: 0 };
                let mut one = vec![f32::NAN; 2 * m * n];
                let mut par = vec![f32::NAN; 2 * m * n];
                for (out, t) in [(&mut one, &*ONE), (&mut par, &two)] {
                    lt_matmul_strided(
                        (&a, &va),
                        (&b, &vb),
                        Some((&bias, &vbias)),
                        out,
                        (2, m, k, n),
                        act,
                        t,
                    )
                    .unwrap();
                }
                assert_eq!(bits(&par), bits(&one), "{m}x{k}x{n} {act:?}: threads");
                for bt in 0..2 {
                    for i in 0..m {
                        for j in 0..n {
                            let dot: f64 = (0..k)
                                .map(|p| {
                                    f64::from(a[3 + bt * m * k + i * k + p])
                                        * f64::from(b[j * k + p])
                                })
                                .sum();
                            let x = dot + f64::from(bias[2 * j]);
                            let want = match act {
                                Activation::Identity => x,
                                Activation::Relu => x.max(0.0),
                                Activation::Gelu => lumen_compiler::ops::gelu_f64(x),
                            };
                            let got = f64::from(one[bt * m * n + i * n + j]);
                            assert!(
                                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{m}x{k}x{n} {act:?}: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn gather_and_concat() {
        let table = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        let vt = View::contiguous(&[3, 2]);
        let ids = crate::HostTensor::from_i64([2], vec![2, 0]).unwrap();
        let words = ids.words();
        let mut out = [0.0; 4];
        gather((&table, &vt), (&words, &View::contiguous(&[2])), true, "ids", &mut out).unwrap();
        assert_eq!(out, [20.0, 21.0, 0.0, 1.0]);
        let bad = crate::HostTensor::from_i64([1], vec![3]).unwrap();
        let err = gather(
            (&table, &vt),
            (&bad.words(), &View::contiguous(&[1])),
            true,
            "ids",
            &mut out[..2],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "gather: id 3 at position 0 of `ids` is out of range for a table of 3 rows"
        );
        let x = [1.0, 2.0];
        let y = [3.0, 4.0, 5.0, 6.0];
        let mut cat = [0.0; 6];
        concat(
            &[(&x, &View::contiguous(&[2, 1])), (&y, &View::contiguous(&[2, 2]))],
            1,
            &[2, 3],
            &mut cat,
        )
        .unwrap();
        assert_eq!(cat, [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    }

    #[test]
    fn length_errors() {
        let mut out = [0.0; 4];
        let err =
            lt_matmul(&[0.0; 3], &[0.0; 4], None, &mut out, (2, 2, 2), Activation::Identity, &ONE)
                .unwrap_err();
        assert_eq!(err.to_string(), "kernel lt_matmul: a has 3 elements, expected 4");
        let err =
            lt_matmul(&[], &[], None, &mut [], (usize::MAX, 2, 0), Activation::Identity, &ONE)
                .unwrap_err();
        assert_eq!(err.to_string(), "kernel lt_matmul: a size overflows");
        let three = View::contiguous(&[3]);
        assert!(map(ElemOp::Unary(UnaryOp::Relu), &[(&[0.0; 3], &three)], &mut out, &ONE).is_err());
        assert!(map(ElemOp::Unary(UnaryOp::Gelu), &[], &mut out, &ONE).is_err());
    }
}
