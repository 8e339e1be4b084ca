//! A host emulator of the CUDA runtime's launch plans ([`super::support::launches`]): every
//! generated kernel's semantics and cuBLASLt's column-major product, mirrored in Rust over one
//! host array per buffer, so CI checks the plans (collapsed views and their packed words, the
//! reduction forms, transposed and batched cuBLASLt layouts with their strides and per-call
//! offsets, the K = 0 path, concat's copies, the gather error records) against the CPU runtime
//! without a GPU.
//!
//! What it does not check: the CUDA C itself (NVRTC compiles it in CI, a GPU runs it in
//! scripts/gpu-check.sh), the reduction's summation order (here sequential, in the
//! accumulator type of the op table), and cuBLASLt's own numerics. The index math is
//! [`super::codegen::offsets_of_packed`], the line-for-line mirror of the kernels'
//! `lumen_offsets`.

use lumen_compiler::{BufferRole, CompiledProgram, ElemOp, LlirOp, ReduceOp};

use super::codegen::{KernelSpec, offsets_of_packed};
use super::support::{self, KernelLaunch, Launch, Ptr};
use crate::error::TensorKind;
use crate::runtime::check_tensors;
use crate::{HostTensor, RuntimeError, Tensors};

/// Runs `program` through its CUDA launch plans on the host (see the module docs): the
/// outputs the CUDA runtime should produce, up to summation order.
///
/// # Errors
/// [`RuntimeError::Unsupported`] for a node the CUDA runtime refuses;
/// [`RuntimeError::IndexOutOfRange`] for a gather id out of range (as the device error record
/// reports it); the tensor-checking errors of any runtime.
pub fn emulate(
    program: &CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<Tensors, RuntimeError> {
    let llir = &program.llir;
    check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
    check_tensors(&llir.buffers, TensorKind::Input, inputs)?;
    let plans = support::launches(program)?;
    let mut bufs: Vec<Vec<f32>> =
        llir.buffers.iter().map(|b| vec![f32::NAN; b.bytes.div_ceil(4)]).collect();
    let mut errors = vec![u64::MAX; 4 * support::gather_count(program)];
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
                    out.insert(b.id.clone(), HostTensor::new(b.shape.clone(), bufs[r].clone())?);
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
    // The host's check after the one synchronize.
    let mut g = 0;
    for node in &llir.nodes {
        if let LlirOp::Gather { vocab, .. } = node.op {
            if errors[4 * g] != u64::MAX {
                return Err(RuntimeError::IndexOutOfRange {
                    tensor: llir.buffers[node.reads[1].buffer].id.clone(),
                    index: errors[4 * g + 1] as i64,
                    position: errors[4 * g + 2] as usize,
                    rows: vocab,
                });
            }
            g += 1;
        }
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

/// One generated kernel, mirrored (the CUDA C of [`super::codegen`] element for element).
fn run_kernel(
    k: &KernelLaunch,
    bufs: &mut [Vec<f32>],
    errors: &mut [u64],
) -> Result<(), RuntimeError> {
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
    }
    Ok(())
}
