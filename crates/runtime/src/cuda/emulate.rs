//! A host emulator of the CUDA runtime's launch plans ([`super::support::launches`]): every
//! generated kernel's semantics and cuBLASLt's column-major product, mirrored in Rust over one
//! host array per buffer, so CI checks the plans (collapsed views and their packed words, the
//! reduction forms, transposed and batched cuBLASLt layouts with their strides and per-call
//! offsets, the K = 0 path, concat's copies, the convolutions' geometry and strides word for
//! word, the takes, the gather, take, gather_elements and scatter_elements error records, the
//! casts' conversions, the args' scans, the top-ks' selections and the scatters' combine
//! steps) against the CPU runtime without a GPU. Buffers hold slab words (an i32 per word, an
//! i64 as its low then high word), and outputs are read back with their buffer's type
//! ([`HostTensor::from_words`]), as the CUDA runtime reads them.
//!
//! What it does not check: the CUDA C itself (NVRTC compiles it in CI, a GPU runs it in
//! scripts/gpu-check.sh), the reduction's summation order (here sequential, in the
//! accumulator type of the op table), and cuBLASLt's own numerics. The index math is
//! [`super::codegen::offsets_of_packed`], the line-for-line mirror of the kernels'
//! `lumen_offsets`; the convolution is its kernel's loops on the unpacked [`ConvArgs`] words,
//! in the same order with the same fused multiply-adds (`f32::mul_add` for `fmaf`), so it
//! differs from the device only in the activation's last bits. The cast kernels' conversion
//! functions are written out here branch for branch as the prelude has them (not by calling
//! [`lumen_compiler::DType::cast_f64`], which the CPU runtime uses: the comparison with the
//! CPU is what checks them), and the arg kernels' loop compares as theirs does. The top-k
//! kernel's selection (its `lumen_topk_before` order and its `k` passes), the gather_elements
//! kernel (its wrapped indices and error record) and the scatter_elements kernel (its combine
//! steps, branch for branch as the prelude's) are written out here too, not through
//! [`lumen_compiler::ops::top_k`], [`lumen_compiler::ScatterReduction`] or the CPU kernels. The
//! scatter's threads run in index order, the CPU's order; the device's order with several
//! updates on one element is unspecified, which this does not check.

use lumen_compiler::{BufferRole, CompiledProgram, DType, ElemOp, IntOp, LlirOp, ReduceOp};

use super::codegen::{ConvArgs, KernelSpec, TakeArgs, TopKArgs, offsets_of_packed};
use super::support::{self, KernelLaunch, Launch, Ptr};
use crate::error::TensorKind;
use crate::runtime::check_tensors;
use crate::{HostTensor, RuntimeError, Tensors};

/// Runs `program` through its CUDA launch plans on the host (see the module docs): the
/// outputs the CUDA runtime should produce, up to summation order.
///
/// # Errors
/// [`RuntimeError::Unsupported`] for a node the CUDA runtime refuses;
/// [`RuntimeError::IndexOutOfRange`] for a gather id, a take index or a gather_elements or
/// scatter_elements index out of range (as the device error record reports it); [`RuntimeError::Kernel`] for a launch whose arguments
/// address past a buffer; the tensor-checking errors of any runtime.
pub fn emulate(
    program: &CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<Tensors, RuntimeError> {
    // A program with symbolic dimensions runs as its live LLIR at the inputs' values
    // ([`lumen_compiler::symbolic`]): the launch plans take their sizes from it.
    let bound;
    let program = if program.llir.symbols.is_empty() {
        program
    } else {
        let values = program.llir.bind_inputs(|name| inputs.get(name).map(HostTensor::shape))?;
        bound = CompiledProgram { llir: program.llir.bind(&values)?, ..program.clone() };
        &bound
    };
    let llir = &program.llir;
    check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
    check_tensors(&llir.buffers, TensorKind::Input, inputs)?;
    let plans = support::launches(program)?;
    // A state starts at zero, as the device's slab does (one execute: its first).
    let fill =
        |b: &lumen_compiler::LlirBuffer| if b.role == BufferRole::State { 0.0 } else { f32::NAN };
    let mut bufs: Vec<Vec<f32>> =
        llir.buffers.iter().map(|b| vec![fill(b); b.bytes.div_ceil(4)]).collect();
    let mut errors = vec![u64::MAX; 4 * support::error_records(program)];
    let mut out = Tensors::new();
    let bad = |what: &str| RuntimeError::kernel("emulate", what.to_string());
    for (n, node) in llir.nodes.iter().enumerate() {
        match (&node.op, &plans[n]) {
            (LlirOp::Upload, _) => {
                for &w in &node.writes {
                    let b = &llir.buffers[w];
                    let words: Vec<f32> = match b.role {
                        BufferRole::Constant(v) => vec![v.value()],
                        BufferRole::Input => {
                            inputs.get(&b.id).map(|t| t.words().into_owned()).unwrap_or_default()
                        }
                        _ => weights.get(&b.id).map(|t| t.words().into_owned()).unwrap_or_default(),
                    };
                    bufs[w][..words.len()].copy_from_slice(&words);
                }
            }
            (LlirOp::Readback, _) => {
                for r in node.read_buffers() {
                    let b = &llir.buffers[r];
                    // The live words (a prefix of the buffer's, with symbols).
                    let words = lumen_compiler::hlir::checked_bytes_of(&b.shape, b.dtype)
                        .map_or(bufs[r].len(), |bytes| bytes.div_ceil(4).min(bufs[r].len()));
                    let t = HostTensor::from_words(b.shape.clone(), b.dtype, &bufs[r][..words])?;
                    out.insert(b.id.clone(), t);
                }
            }
            (LlirOp::LtMatmul { epilogue, .. }, Launch::Matmul(calls)) => {
                let p = &calls.problem;
                let (w, x, y) = (node.reads[1].buffer, node.reads[0].buffer, node.writes[0]);
                let bias = node.reads.get(2).map(|r| (r.buffer, r.view.offset));
                let (cm, cn, ck) = (p.mnk.0 as usize, p.mnk.1 as usize, p.mnk.2 as usize);
                let act = epilogue.activation().map(ElemOp::Unary);
                for &[ow, ox, oy] in &calls.offsets {
                    for bt in 0..p.d.batch.max(1) as usize {
                        let at = |l: &super::MatrixLayout, base: usize| {
                            base + bt * l.batch_stride as usize
                        };
                        let (a0, b0, d0) = (at(&p.a, ow), at(&p.b, ox), at(&p.d, oy));
                        let (lda, ldb, ldd) = (p.a.ld as usize, p.b.ld as usize, p.d.ld as usize);
                        for j in 0..cn {
                            for i in 0..cm {
                                let mut acc = 0.0f32;
                                for q in 0..ck {
                                    // op(A)[i, q] and op(B)[q, j], column-major.
                                    let a = if p.trans_a {
                                        bufs[w][a0 + q + i * lda]
                                    } else {
                                        bufs[w][a0 + i + q * lda]
                                    };
                                    let b = if p.trans_b {
                                        bufs[x][b0 + j + q * ldb]
                                    } else {
                                        bufs[x][b0 + q + j * ldb]
                                    };
                                    acc += a * b;
                                }
                                if let Some((bb, off)) = bias {
                                    acc += bufs[bb][off + i];
                                }
                                if let Some(op) = act {
                                    acc = op.eval_f32([acc, 0.0, 0.0]);
                                }
                                bufs[y][d0 + i + j * ldd] = acc;
                            }
                        }
                    }
                }
            }
            (LlirOp::LtMatmul { .. }, Launch::MatmulEmpty) => {}
            (LlirOp::LtMatmul { .. }, Launch::MatmulK0(kernels)) => {
                bufs[node.writes[0]].fill(0.0);
                for k in kernels {
                    run_kernel(k, &mut bufs, &mut errors)?;
                }
            }
            (_, Launch::Kernels(kernels)) => {
                for k in kernels {
                    run_kernel(k, &mut bufs, &mut errors)?;
                }
            }
            _ => return Err(bad("a node without a matching plan")),
        }
    }
    // The host's check after the one synchronize, in node order.
    let mut g = 0;
    for node in &llir.nodes {
        let Some(rows) = support::index_rows(&node.op) else { continue };
        if errors[4 * g] != u64::MAX {
            return Err(RuntimeError::IndexOutOfRange {
                op: support::index_op(&node.op),
                tensor: llir.buffers[node.reads[1].buffer].id.clone(),
                index: errors[4 * g + 1] as i64,
                position: errors[4 * g + 2] as usize,
                rows,
            });
        }
        g += 1;
    }
    Ok(out)
}

/// The buffer id of a pointer argument.
fn buffer(p: Ptr) -> Result<usize, RuntimeError> {
    match p {
        Ptr::Buffer(b) => Ok(b),
        Ptr::Errors(_) => {
            Err(RuntimeError::kernel("emulate", "an error record where a buffer goes"))
        }
    }
}

/// The id at element `e` of an ids buffer's words (i64: two words, low first).
fn id_at(words: &[f32], e: usize, wide: bool) -> i64 {
    if wide {
        (u64::from(words[2 * e].to_bits()) | (u64::from(words[2 * e + 1].to_bits()) << 32)) as i64
    } else {
        i64::from(words[e].to_bits() as i32)
    }
}

/// Element `at` of buffer `b`, or an error naming the kernel: what a device read past the
/// buffer would be.
fn read(bufs: &[Vec<f32>], b: usize, at: u64, what: &str) -> Result<f32, RuntimeError> {
    usize::try_from(at).ok().and_then(|i| bufs.get(b)?.get(i)).copied().ok_or_else(|| {
        RuntimeError::kernel("emulate", format!("{what} reads element {at} past buffer {b}"))
    })
}

/// Stores `v` at element `at` of buffer `b`, or an error naming the kernel.
fn write(bufs: &mut [Vec<f32>], b: usize, at: u64, v: f32, what: &str) -> Result<(), RuntimeError> {
    let slot = usize::try_from(at).ok().and_then(|i| bufs.get_mut(b)?.get_mut(i));
    let slot = slot.ok_or_else(|| {
        RuntimeError::kernel("emulate", format!("{what} writes element {at} past buffer {b}"))
    })?;
    *slot = v;
    Ok(())
}

/// The convolution kernel (`lumen_conv_*`), loop for loop: one output element at a time, the
/// group's channels and the taps in the kernel's order, `fmaf` as `mul_add`, then the epilogue.
fn run_conv(
    k: &KernelLaunch,
    epilogue: lumen_compiler::ConvEpilogue,
    bufs: &mut [Vec<f32>],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("conv {what}"));
    let a = k.words.first().and_then(|w| ConvArgs::from_words(w)).ok_or_else(|| bad("words"))?;
    let want = 3 + usize::from(epilogue.bias) + usize::from(epilogue.residual);
    if k.ptrs.len() != want {
        return Err(bad("pointer count"));
    }
    let (out, x, w) = (buffer(k.ptrs[0])?, buffer(k.ptrs[1])?, buffer(k.ptrs[2])?);
    let bias = if epilogue.bias { Some(buffer(k.ptrs[3])?) } else { None };
    let residual = if epilogue.residual { Some(buffer(k.ptrs[want - 1])?) } else { None };
    let act = epilogue.activation.map(ElemOp::Unary);
    // The tap's input position along axis `d`, or None in the padding (the kernel's skip).
    let pos = |d: usize, o: u64, t: u64| {
        let p = o * a.stride[d] + t * a.dilation[d];
        (p >= a.pad[d] && p - a.pad[d] < a.input[d]).then(|| p - a.pad[d])
    };
    for i in 0..a.len {
        let mut r = i;
        let o2 = r % a.output[2];
        r /= a.output[2];
        let o1 = r % a.output[1];
        r /= a.output[1];
        let o0 = r % a.output[0];
        r /= a.output[0];
        let (oc, n) = (r % a.c_out, r / a.c_out);
        let c0 = oc / a.ocg * a.cg;
        let mut acc = 0.0f32;
        for ci in 0..a.cg {
            let xc = a.x[0] + n * a.x[1] + (c0 + ci) * a.x[2];
            let wc = a.w[0] + oc * a.w[1] + ci * a.w[2];
            for k0 in 0..a.kernel[0] {
                let Some(p0) = pos(0, o0, k0) else { continue };
                for k1 in 0..a.kernel[1] {
                    let Some(p1) = pos(1, o1, k1) else { continue };
                    for k2 in 0..a.kernel[2] {
                        let Some(p2) = pos(2, o2, k2) else { continue };
                        let xv = read(bufs, x, xc + p0 * a.x[3] + p1 * a.x[4] + p2 * a.x[5], "x")?;
                        let wv = read(bufs, w, wc + k0 * a.w[3] + k1 * a.w[4] + k2 * a.w[5], "w")?;
                        acc = xv.mul_add(wv, acc);
                    }
                }
            }
        }
        let mut y = acc;
        if let Some(b) = bias {
            y += read(bufs, b, a.bias[0] + oc * a.bias[1], "bias")?;
        }
        if let Some(rb) = residual {
            let ro = a.residual[0]
                + n * a.residual[1]
                + oc * a.residual[2]
                + o0 * a.residual[3]
                + o1 * a.residual[4]
                + o2 * a.residual[5];
            y += read(bufs, rb, ro, "residual")?;
        }
        if let Some(op) = act {
            y = op.eval_f32([y, 0.0, 0.0]);
        }
        write(bufs, out, i, y, "conv")?;
    }
    Ok(())
}

/// The max pool kernel (`lumen_max_pool`), loop for loop: one output element at a time, the
/// taps in the kernel's order, `v > acc || v != v` keeping `v`, a NaN written canonical.
fn run_max_pool(k: &KernelLaunch, bufs: &mut [Vec<f32>]) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("max_pool {what}"));
    let a = k.words.first().and_then(|w| ConvArgs::from_words(w)).ok_or_else(|| bad("words"))?;
    let [out, x] = k.ptrs[..] else { return Err(bad("pointer count")) };
    let (out, x) = (buffer(out)?, buffer(x)?);
    let pos = |d: usize, o: u64, t: u64| {
        let p = o * a.stride[d] + t * a.dilation[d];
        (p >= a.pad[d] && p - a.pad[d] < a.input[d]).then(|| p - a.pad[d])
    };
    for i in 0..a.len {
        let mut r = i;
        let o2 = r % a.output[2];
        r /= a.output[2];
        let o1 = r % a.output[1];
        r /= a.output[1];
        let o0 = r % a.output[0];
        r /= a.output[0];
        let (c, n) = (r % a.c_out, r / a.c_out);
        let xc = a.x[0] + n * a.x[1] + c * a.x[2];
        let mut acc = f32::NEG_INFINITY;
        for k0 in 0..a.kernel[0] {
            let Some(p0) = pos(0, o0, k0) else { continue };
            for k1 in 0..a.kernel[1] {
                let Some(p1) = pos(1, o1, k1) else { continue };
                for k2 in 0..a.kernel[2] {
                    let Some(p2) = pos(2, o2, k2) else { continue };
                    let v = read(bufs, x, xc + p0 * a.x[3] + p1 * a.x[4] + p2 * a.x[5], "x")?;
                    if v > acc || v.is_nan() {
                        acc = v;
                    }
                }
            }
        }
        write(bufs, out, i, if acc.is_nan() { f32::NAN } else { acc }, "max_pool")?;
    }
    Ok(())
}

/// The take kernel (`lumen_take_*`): threads `i < picks` check index `i` into the error
/// record, threads `i < len` write their output element.
fn run_take(
    k: &KernelLaunch,
    (wide, rank): (bool, usize),
    bufs: &mut [Vec<f32>],
    errors: &mut [u64],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("take {what}"));
    let [views, t] = k.words.as_slice() else { return Err(bad("words")) };
    let t = TakeArgs::from_words(t).ok_or_else(|| bad("words"))?;
    let [out, x, idx, Ptr::Errors(g)] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, x, idx) = (buffer(out)?, buffer(x)?, buffer(idx)?);
    let len = views[0];
    let id = |bufs: &[Vec<f32>], j: u64| -> Result<i64, RuntimeError> {
        let e = t.idx_offset + j * t.idx_stride;
        let words = if wide { 2 * e + 1 } else { e };
        if bufs[idx].len() as u64 <= words {
            return Err(bad("reads an index past its buffer"));
        }
        Ok(id_at(&bufs[idx], e as usize, wide))
    };
    for i in 0..len.max(t.picks) {
        if i < t.picks {
            let v = id(bufs, i)?;
            if v >= 0 && v as u64 >= t.extent {
                errors[4 * g] = errors[4 * g].min(i);
            }
        }
        if i < len {
            let j = (i / t.inner) % t.picks;
            let v = id(bufs, j)?;
            let y = if v < 0 {
                f32::from_bits(t.fill as u32)
            } else if v as u64 >= t.extent {
                f32::NAN
            } else {
                let off = offsets_of_packed(views, rank, 1, i)[0];
                read(bufs, x, off + v as u64 * t.stride, "x")?
            };
            write(bufs, out, i, y, "take")?;
        }
    }
    Ok(())
}

/// An element of a cast kernel's input or output: its bits as the kernel's pointer type reads
/// them (an i64's 64 bits from its two words).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Elem {
    F32(f32),
    I32(i32),
    I64(i64),
}

impl Elem {
    /// Element `e` of buffer `b` read as `dtype`, or an error past the buffer.
    fn read(bufs: &[Vec<f32>], b: usize, e: u64, dtype: DType) -> Result<Self, RuntimeError> {
        Ok(match dtype {
            DType::I64 => {
                let lo = read(bufs, b, 2 * e, "cast")?.to_bits();
                let hi = read(bufs, b, 2 * e + 1, "cast")?.to_bits();
                Elem::I64((u64::from(lo) | (u64::from(hi) << 32)) as i64)
            }
            DType::I32 => Elem::I32(read(bufs, b, e, "cast")?.to_bits() as i32),
            _ => Elem::F32(read(bufs, b, e, "cast")?),
        })
    }

    /// Its type.
    fn dtype(self) -> DType {
        match self {
            Elem::F32(_) => DType::F32,
            Elem::I32(_) => DType::I32,
            Elem::I64(_) => DType::I64,
        }
    }

    /// Stores it as element `i` of buffer `b` (an i64 as two words), or an error past it.
    fn write(self, bufs: &mut [Vec<f32>], b: usize, i: u64) -> Result<(), RuntimeError> {
        match self {
            Elem::F32(v) => write(bufs, b, i, v, "cast"),
            Elem::I32(v) => write(bufs, b, i, f32::from_bits(v as u32), "cast"),
            Elem::I64(v) => {
                let bits = v as u64;
                write(bufs, b, 2 * i, f32::from_bits(bits as u32), "cast")?;
                write(bufs, b, 2 * i + 1, f32::from_bits((bits >> 32) as u32), "cast")
            }
        }
    }

    /// The prelude's `lumen_cast_{from}_{to}` of this element into `to` (the element itself,
    /// bits unchanged, for its own type: the kernel's word copy).
    fn cast(self, to: DType) -> Self {
        match (self, to) {
            (Elem::F32(v), DType::I32) => Elem::I32(if v.is_nan() {
                0
            } else if v >= 2_147_483_648.0 {
                i32::MAX
            } else if v < -2_147_483_648.0 {
                i32::MIN
            } else {
                v.trunc() as i32
            }),
            (Elem::F32(v), DType::I64) => Elem::I64(if v.is_nan() {
                0
            } else if v >= 9_223_372_036_854_775_808.0 {
                i64::MAX
            } else if v < -9_223_372_036_854_775_808.0 {
                i64::MIN
            } else {
                v.trunc() as i64
            }),
            // __int2float_rn; __double2float_rn(__ll2double_rn(v)).
            (Elem::I32(v), DType::F32) => Elem::F32(v as f32),
            (Elem::I32(v), DType::I64) => Elem::I64(i64::from(v)),
            (Elem::I64(v), DType::F32) => Elem::F32((v as f64) as f32),
            (Elem::I64(v), DType::I32) => {
                Elem::I32(i32::try_from(v).unwrap_or(if v > 0 { i32::MAX } else { i32::MIN }))
            }
            (same, _) => same,
        }
    }
}

/// The cast kernel (`lumen_cast_*`): element `i` of the input's view, converted, stored as
/// element `i` of the output.
fn run_cast(
    k: &KernelLaunch,
    (from, to, rank): (DType, DType, usize),
    bufs: &mut [Vec<f32>],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("cast {what}"));
    let [views] = k.words.as_slice() else { return Err(bad("words")) };
    let [out, x] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, x) = (buffer(out)?, buffer(x)?);
    for i in 0..views[0] {
        let e = offsets_of_packed(views, rank, 1, i)[0];
        let y = Elem::read(bufs, x, e, from)?.cast(to);
        if y.dtype() != to {
            return Err(bad("to a type no kernel writes"));
        }
        y.write(bufs, out, i)?;
    }
    Ok(())
}

/// The integer map kernel (`lumen_int_map_*`): per output element, its operands read as
/// `dtype` through the packed views, the op table's [`IntOp::eval`] (what the kernel's
/// `lumen_int_{op}_{dtype}` computes), written as `dtype`.
fn run_int_map(
    k: &KernelLaunch,
    (op, dtype, rank): (IntOp, DType, usize),
    bufs: &mut [Vec<f32>],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("int_map {what}"));
    let [views] = k.words.as_slice() else { return Err(bad("words")) };
    let Some((&out, ins)) = k.ptrs.split_first() else { return Err(bad("pointers")) };
    let out = buffer(out)?;
    let ins: Vec<usize> = ins.iter().map(|&p| buffer(p)).collect::<Result<_, _>>()?;
    if ins.len() != op.arity() {
        return Err(bad("operand count"));
    }
    let int = |e: Elem| match e {
        Elem::I32(v) => i64::from(v),
        Elem::I64(v) => v,
        Elem::F32(_) => 0,
    };
    for i in 0..views[0] {
        let off = offsets_of_packed(views, rank, ins.len(), i);
        let mut a = [0i64; 2];
        for (s, (&b, &o)) in a.iter_mut().zip(ins.iter().zip(&off)) {
            *s = int(Elem::read(bufs, b, o, dtype)?);
        }
        let y = op.eval(dtype, a[0], a[1]);
        let y = if dtype == DType::I32 { Elem::I32(y as i32) } else { Elem::I64(y) };
        y.write(bufs, out, i)?;
    }
    Ok(())
}

/// The arg kernel (`lumen_arg*`): per output row, the kernel's loop over the axis: stop at a
/// NaN (it wins), else keep the element that compares better (`>`, or `>=` for the last of
/// equals; `<` / `<=` for argmin).
fn run_arg(
    k: &KernelLaunch,
    (max, last, rank): (bool, bool, usize),
    bufs: &mut [Vec<f32>],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("arg {what}"));
    let [views, extent, stride] = k.words.as_slice() else { return Err(bad("words")) };
    let (&[extent], &[stride]) = (extent.as_slice(), stride.as_slice()) else {
        return Err(bad("words"));
    };
    let [out, x] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, x) = (buffer(out)?, buffer(x)?);
    let better = |x: f32, best: f32| match (max, last) {
        (true, false) => x > best,
        (true, true) => x >= best,
        (false, false) => x < best,
        (false, true) => x <= best,
    };
    for r in 0..views[0] {
        let base = offsets_of_packed(views, rank, 1, r)[0];
        let mut at = 0u64;
        if extent > 0 {
            let mut best = read(bufs, x, base, "x")?;
            let mut j = 1;
            while j < extent && !best.is_nan() {
                let v = read(bufs, x, base + j * stride, "x")?;
                if v.is_nan() || better(v, best) {
                    best = v;
                    at = j;
                }
                j += 1;
            }
        }
        Elem::I64(at as i64).write(bufs, out, r)?;
    }
    Ok(())
}

/// The prelude's `lumen_topk_before`: whether `a` (at `ia`) comes before `b` (at `ib`) in a
/// top-k's order. A NaN before every number when `largest`, after every number otherwise;
/// numbers by value (`-0 == +0`); equal numbers, and NaNs, by position.
fn topk_before(a: f32, ia: u64, b: f32, ib: u64, largest: bool) -> bool {
    let (na, nb) = (a.is_nan(), b.is_nan());
    if na != nb {
        return if largest { na } else { nb };
    }
    if !na && a != b {
        return if largest { a > b } else { a < b };
    }
    ia < ib
}

/// The top-k kernel (`lumen_topk_*`): per output row, `k` passes over the axis, pass `j`
/// keeping the first element in the order among those after pass `j - 1`'s; its position is
/// written as an i64 at `(r / inner · k + j) · inner + r % inner`.
fn run_topk(
    k: &KernelLaunch,
    (largest, rank): (bool, usize),
    bufs: &mut [Vec<f32>],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("topk {what}"));
    let [views, t] = k.words.as_slice() else { return Err(bad("words")) };
    let t = TopKArgs::from_words(t).ok_or_else(|| bad("words"))?;
    let [out, x] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, x) = (buffer(out)?, buffer(x)?);
    if t.inner == 0 {
        return Err(bad("inner 0"));
    }
    for r in 0..views[0] {
        let base = offsets_of_packed(views, rank, 1, r)[0];
        let (outer, pos) = (r / t.inner, r % t.inner);
        let (mut prev, mut prev_at) = (0.0f32, 0u64);
        for j in 0..t.k {
            let (mut best, mut at) = (0.0f32, t.extent);
            for e in 0..t.extent {
                let v = read(bufs, x, base + e * t.stride, "x")?;
                if j > 0 && !topk_before(prev, prev_at, v, e, largest) {
                    continue;
                }
                if at == t.extent || topk_before(v, e, best, at, largest) {
                    best = v;
                    at = e;
                }
            }
            Elem::I64(at as i64).write(bufs, out, (outer * t.k + j) * t.inner + pos)?;
            prev = best;
            prev_at = at;
        }
    }
    Ok(())
}

/// The gather_elements kernel (`lumen_gather_elements_*`): output element `i` reads its index
/// through view 1, wraps a negative one by the axis' length, and reads data through view 0
/// plus the index times the axis' stride; an index still outside the axis writes NaN and puts
/// `i` into the error record.
fn run_gather_elements(
    k: &KernelLaunch,
    (wide, rank): (bool, usize),
    bufs: &mut [Vec<f32>],
    errors: &mut [u64],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("gather_elements {what}"));
    let [views, extent, stride] = k.words.as_slice() else { return Err(bad("words")) };
    let (&[extent], &[stride]) = (extent.as_slice(), stride.as_slice()) else {
        return Err(bad("words"));
    };
    let [out, data, idx, Ptr::Errors(g)] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, data, idx) = (buffer(out)?, buffer(data)?, buffer(idx)?);
    for i in 0..views[0] {
        let off = offsets_of_packed(views, rank, 2, i);
        let words = if wide { 2 * off[1] + 1 } else { off[1] };
        if bufs[idx].len() as u64 <= words {
            return Err(bad("reads an index past its buffer"));
        }
        let mut id = id_at(&bufs[idx], off[1] as usize, wide);
        if id < 0 {
            id += extent as i64;
        }
        let y = if id < 0 || id as u64 >= extent {
            errors[4 * g] = errors[4 * g].min(i);
            f32::NAN
        } else {
            read(bufs, data, off[0] + id as u64 * stride, "data")?
        };
        write(bufs, out, i, y, "gather_elements")?;
    }
    Ok(())
}

/// The prelude's `lumen_scatter_combine_*` of the element there `a` and the update `b` (of
/// one type) for reduction code `r`, branch for branch as the prelude has it: a float NaN is
/// the canonical `0x7fc00000`, integers wrap (through their unsigned type), an unknown code
/// (0 included) is the update.
fn scatter_combine(a: Elem, b: Elem, r: u64) -> Elem {
    match (a, b) {
        (Elem::F32(a), Elem::F32(b)) => Elem::F32(match r {
            1 => a + b,
            2 => a * b,
            3 | 4 if a.is_nan() || b.is_nan() => f32::from_bits(0x7fc0_0000),
            3 => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            4 => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            _ => b,
        }),
        (Elem::I32(a), Elem::I32(b)) => Elem::I32(match r {
            1 => (a as u32).wrapping_add(b as u32) as i32,
            2 => (a as u32).wrapping_mul(b as u32) as i32,
            3 => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            4 => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            _ => b,
        }),
        (Elem::I64(a), Elem::I64(b)) => Elem::I64(match r {
            1 => (a as u64).wrapping_add(b as u64) as i64,
            2 => (a as u64).wrapping_mul(b as u64) as i64,
            3 => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            4 => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            _ => b,
        }),
        (_, b) => b,
    }
}

/// The scatter_elements kernel (`lumen_scatter_elements_*`): update `i` reads its index
/// through view 1 and wraps a negative one by the axis' length; in range, its update (view 0)
/// is stored into the output element at view 2 plus the index times the axis' stride (code 0)
/// or combined with it ([`scatter_combine`], the atomicCAS loop's step); out of range, nothing
/// is written and `i` goes into the error record. Threads run here in index order (one order
/// the device may take: the CPU's row-major one).
fn run_scatter_elements(
    k: &KernelLaunch,
    (dtype, wide, rank): (DType, bool, usize),
    bufs: &mut [Vec<f32>],
    errors: &mut [u64],
) -> Result<(), RuntimeError> {
    let bad = |what: &str| RuntimeError::kernel("emulate", format!("scatter_elements {what}"));
    let [views, extent, stride, reduction] = k.words.as_slice() else {
        return Err(bad("words"));
    };
    let (&[extent], &[stride], &[reduction]) =
        (extent.as_slice(), stride.as_slice(), reduction.as_slice())
    else {
        return Err(bad("words"));
    };
    let [out, updates, idx, Ptr::Errors(g)] = k.ptrs[..] else { return Err(bad("pointers")) };
    let (out, updates, idx) = (buffer(out)?, buffer(updates)?, buffer(idx)?);
    for i in 0..views[0] {
        let off = offsets_of_packed(views, rank, 3, i);
        let words = if wide { 2 * off[1] + 1 } else { off[1] };
        if bufs[idx].len() as u64 <= words {
            return Err(bad("reads an index past its buffer"));
        }
        let mut id = id_at(&bufs[idx], off[1] as usize, wide);
        if id < 0 {
            id += extent as i64;
        }
        if id < 0 || id as u64 >= extent {
            errors[4 * g] = errors[4 * g].min(i);
            continue;
        }
        let at = off[2] + id as u64 * stride;
        let v = Elem::read(bufs, updates, off[0], dtype)?;
        let y = if reduction == 0 {
            v
        } else {
            scatter_combine(Elem::read(bufs, out, at, dtype)?, v, reduction)
        };
        y.write(bufs, out, at)?;
    }
    Ok(())
}

/// One generated kernel, mirrored (the CUDA C of [`super::codegen`] element for element).
fn run_kernel(
    k: &KernelLaunch,
    bufs: &mut [Vec<f32>],
    errors: &mut [u64],
) -> Result<(), RuntimeError> {
    match k.spec {
        KernelSpec::Conv { epilogue } => return run_conv(k, epilogue, bufs),
        KernelSpec::MaxPool => return run_max_pool(k, bufs),
        KernelSpec::Take { wide, rank } => return run_take(k, (wide, rank), bufs, errors),
        KernelSpec::Cast { from, to, rank } => return run_cast(k, (from, to, rank), bufs),
        KernelSpec::IntMap { op, dtype, rank } => return run_int_map(k, (op, dtype, rank), bufs),
        KernelSpec::Arg { max, last, rank } => return run_arg(k, (max, last, rank), bufs),
        KernelSpec::TopK { largest, rank } => return run_topk(k, (largest, rank), bufs),
        KernelSpec::GatherElements { wide, rank } => {
            return run_gather_elements(k, (wide, rank), bufs, errors);
        }
        KernelSpec::ScatterElements { dtype, wide, rank } => {
            return run_scatter_elements(k, (dtype, wide, rank), bufs, errors);
        }
        _ => {}
    }
    let views = &k.words[0];
    let len = views[0];
    match k.spec {
        KernelSpec::Map { op, rank } => {
            let out = buffer(k.ptrs[0])?;
            let ins: Vec<usize> =
                k.ptrs[1..].iter().map(|&p| buffer(p)).collect::<Result<_, _>>()?;
            for i in 0..len {
                let off = offsets_of_packed(views, rank, ins.len(), i);
                let mut a = [0.0f32; 3];
                for (s, (&b, &o)) in a.iter_mut().zip(ins.iter().zip(&off)) {
                    *s = bufs[b][o as usize];
                }
                bufs[out][i as usize] = op.eval_f32(a);
            }
        }
        KernelSpec::Copy { rank } => {
            let (out, input) = (buffer(k.ptrs[0])?, buffer(k.ptrs[1])?);
            for i in 0..len {
                let off = offsets_of_packed(views, rank, 2, i);
                bufs[out][off[1] as usize] = bufs[input][off[0] as usize];
            }
        }
        KernelSpec::Reduce { op, rank, .. } => {
            let (out, input) = (buffer(k.ptrs[0])?, buffer(k.ptrs[1])?);
            let (extent, stride) = (k.words[1][0] as usize, k.words[2][0] as usize);
            for r in 0..len {
                let base = offsets_of_packed(views, rank, 1, r)[0] as usize;
                let at = |j: usize| bufs[input][base + j * stride];
                bufs[out][r as usize] = match op {
                    ReduceOp::Sum => (0..extent).map(|j| f64::from(at(j))).sum::<f64>() as f32,
                    ReduceOp::Max => {
                        (0..extent).fold(op.identity_f32(), |acc, j| op.combine_f32(acc, at(j)))
                    }
                };
            }
        }
        KernelSpec::Gather { wide, rank } => {
            let (out, table, ids) = (buffer(k.ptrs[0])?, buffer(k.ptrs[1])?, buffer(k.ptrs[2])?);
            let Ptr::Errors(g) = k.ptrs[3] else {
                return Err(RuntimeError::kernel("emulate", "gather error record"));
            };
            let [offset, rs, cs, vocab, dim] = k.words[1][..] else {
                return Err(RuntimeError::kernel("emulate", "gather table words"));
            };
            for i in 0..len * dim {
                let (row, col) = (i / dim, i % dim);
                let e = offsets_of_packed(views, rank, 1, row)[0] as usize;
                let id = id_at(&bufs[ids], e, wide);
                bufs[out][i as usize] = if id < 0 || id as u64 >= vocab {
                    if col == 0 {
                        errors[4 * g] = errors[4 * g].min(row);
                    }
                    f32::NAN
                } else {
                    bufs[table][(offset + id as u64 * rs + col * cs) as usize]
                };
            }
        }
        KernelSpec::GatherReport { wide, rank } => {
            let ids = buffer(k.ptrs[0])?;
            let Ptr::Errors(g) = k.ptrs[1] else {
                return Err(RuntimeError::kernel("emulate", "report error record"));
            };
            if errors[4 * g] < len {
                let e = offsets_of_packed(views, rank, 1, errors[4 * g])[0];
                errors[4 * g + 1] = id_at(&bufs[ids], e as usize, wide) as u64;
                errors[4 * g + 2] = e;
            }
        }
        KernelSpec::Conv { .. }
        | KernelSpec::IntMap { .. }
        | KernelSpec::MaxPool
        | KernelSpec::Take { .. }
        | KernelSpec::Cast { .. }
        | KernelSpec::Arg { .. }
        | KernelSpec::TopK { .. }
        | KernelSpec::GatherElements { .. }
        | KernelSpec::ScatterElements { .. } => {}
    }
    Ok(())
}
