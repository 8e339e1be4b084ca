//! Tests of the CUDA runtime (feature `cuda`).
//!
//! Without a GPU: creating the runtime must fail with `NoCudaDevice` (never panic); NVRTC,
//! when libnvrtc is on the loader path, must compile every generated kernel (each op of the
//! op table at each rank, copies, both reductions in both forms, gathers, a convolution per
//! epilogue, takes, casts between every pair of f32/i32/i64, argmax/argmin, top-k,
//! gather_elements, scatter_elements) to PTX and CUBIN
//! for sm_90 and say how many; every program the GPU tests run must have a CUDA form
//! (host-only); and the CUDA launch plans, emulated on the host
//! (`lumen_runtime::cuda::emulate`), must match the CPU runtime on the shipped transformer
//! block and digits ViT, matmuls in every form, 128 random programs over every op,
//! convolutions of every kind and epilogue, takes (with their error record), and casts and
//! argmax/argmin bit for bit (integer outputs read back with their type), top-k and
//! gather_elements bit for bit (with the gather_elements error record), and scatter_elements
//! bit for bit (every reduction, f32/i32/i64 data, duplicates in the CPU's order, with its
//! error record).
//! On a GPU: the digits MLP against the CPU runtime, linear-relu at edge shapes and every
//! epilogue against the f64 reference, the tall product's exact golden, the slab-poisoning
//! differential tests (first op set, and random programs over every op), the transformer block
//! and the ViT against the CPU (argmax identical, max |cuda - cpu| <= 1e-3), convolutions and
//! takes against the CPU (planned, no-reuse and NaN-poisoned), casts and argmax/argmin against
//! the CPU bit for bit (the same three ways), top-k and gather_elements against the CPU bit for
//! bit (the same three ways), scatter_elements against the CPU bit for bit where the threads'
//! order cannot matter (within rounding for an inexact float sum of duplicates), the
//! device-reported gather, take, gather_elements and scatter_elements errors, and
//! (ignored, run by scripts/gpu-check.sh) the fused-vs-unfused bench.
//! Each GPU test prints `skipped: <reason>` and returns when there is no device (fails instead
//! under `LUMEN_REQUIRE_CUDA=1`, as scripts/gpu-check.sh runs them).
#![cfg(feature = "cuda")]

mod common;
mod cuda_shared;
mod tensor_programs;

use std::path::PathBuf;

use common::*;
use cuda_shared::integers::{self, assert_bit_identical};
use cuda_shared::scatter;
use cuda_shared::selection;
use cuda_shared::spatial::{self, BAD_TAKE};
use cuda_shared::*;
use lumen_compiler::{CompileOptions, CompiledProgram, Epilogue, Graph};
use lumen_runtime::cuda::{
    self, CodeKind, ComputeMode, CudaOptions, CudaProgram, CudaRuntime, Libraries, Probe,
};
use lumen_runtime::{
    CpuOptions, CpuRuntime, HostTensor, Placement, PreparedProgram, Runtime, RuntimeError, Tensors,
};

/// Set (to 1) where a GPU must be used: scripts/gpu-check.sh sets it, so a test that would
/// skip there fails instead of passing without having run.
const REQUIRE_CUDA: &str = "LUMEN_REQUIRE_CUDA";

/// Prints why a test skips, or panics with it under [`REQUIRE_CUDA`].
fn skip(reason: &str) {
    if std::env::var_os(REQUIRE_CUDA).is_some_and(|v| v == "1") {
        panic!("{REQUIRE_CUDA}=1 but the test would skip: {reason}");
    }
    println!("skipped: {reason}");
}

/// The runtime, or `None` after printing why the test skips. Any error but `NoCudaDevice`
/// fails the test: a machine with a GPU must be able to open it.
fn gpu(options: CudaOptions) -> Option<CudaRuntime> {
    match CudaRuntime::new(options) {
        Ok(rt) => Some(rt),
        Err(RuntimeError::NoCudaDevice { reason }) => {
            skip(&reason);
            None
        }
        Err(other) => panic!("opening the CUDA device failed: {other}"),
    }
}

fn fp32() -> CudaOptions {
    CudaOptions::default()
}

fn run_cuda(
    rt: &CudaRuntime,
    program: &CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
) -> Tensors {
    let mut prepared = rt.prepare_cuda(program, weights).expect("prepare on CUDA");
    prepared.execute(inputs).expect("execute on CUDA")
}

fn max_abs_diff(a: &Tensors, b: &Tensors) -> f64 {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "output names");
    let mut worst = 0.0f64;
    for (name, x) in a {
        let y = &b[name];
        assert_eq!(x.shape(), y.shape(), "{name}");
        for (p, q) in x.data().iter().zip(y.data()) {
            let e = (f64::from(*p) - f64::from(*q)).abs();
            assert!(e.is_finite(), "{name}: {p} vs {q}");
            worst = worst.max(e);
        }
    }
    worst
}

/// Largest `|a - b| / max(1, |b|)` over all outputs.
fn max_rel_diff(a: &Tensors, b: &Tensors) -> f64 {
    let mut worst = 0.0f64;
    for (name, x) in a {
        for (p, q) in x.data().iter().zip(b[name].data()) {
            let (p, q) = (f64::from(*p), f64::from(*q));
            let e = (p - q).abs() / q.abs().max(1.0);
            assert!(e.is_finite(), "{name}: {p} vs {q}");
            worst = worst.max(e);
        }
    }
    worst
}

#[test]
fn without_a_device_creation_fails_with_a_reason_and_never_panics() {
    let libs = Libraries::probe();
    match CudaRuntime::new(fp32()) {
        Ok(rt) => println!("device present: {:?}", rt.device_info()),
        Err(RuntimeError::NoCudaDevice { reason }) => {
            skip(&format!("(no device) {reason}"));
            if libs.cuda == Probe::NotFound {
                assert!(reason.starts_with("libcuda.so not found"), "{reason}");
            }
            let msg = RuntimeError::NoCudaDevice { reason: reason.clone() }.to_string();
            assert_eq!(msg, format!("no CUDA device: {reason}"));
        }
        Err(other) => panic!("expected NoCudaDevice or a device, got {other}"),
    }
    // The by-name path the CLI uses gives the same answer.
    match lumen_runtime::runtime_by_name("cuda") {
        Ok(rt) => assert_eq!(rt.name(), "cuda"),
        Err(e) => assert!(e.to_string().starts_with("no CUDA device: "), "{e}"),
    }
}

#[test]
fn nvrtc_compiles_every_kernel_for_sm_90() {
    if !cuda::nvrtc_present() {
        skip("libnvrtc not found");
        return;
    }
    let (major, minor) = cuda::nvrtc_version().expect("nvrtcVersion");
    println!("NVRTC {major}.{minor}");
    // One module holds every generated kernel: each elementwise op of the op table at each
    // rank, the copies, both reductions in both forms, the gathers and their reports, a
    // convolution per epilogue, the takes, the casts, the args.
    let t = std::time::Instant::now();
    let ptx = cuda::compile_ptx("sm_90").expect("every kernel compiles to PTX");
    let (_, names) = cuda::kernel_sources();
    assert_eq!(ptx.names, names);
    assert_eq!(ptx.kind, CodeKind::Ptx);
    let text = ptx.ptx().expect("PTX is text");
    assert!(text.contains(".target sm_90"), "{text}");
    for name in &names {
        assert!(text.contains(&format!(".entry {name}(")), "{name} missing from the PTX");
    }
    let count = |prefix: &str| names.iter().filter(|n| n.starts_with(prefix)).count();
    println!(
        "NVRTC compiled {} kernels for sm_90 ({} map, {} copy, {} reduce, {} gather, {} \
         gather_report, {} conv, {} take, {} cast, {} arg, {} topk, {} gather_elements, {} \
         scatter_elements; {} bytes of PTX, {:.1} s)",
        names.len(),
        count("lumen_map_"),
        count("lumen_copy_"),
        count("lumen_reduce_"),
        count("lumen_gather_i"),
        count("lumen_gather_report_"),
        count("lumen_conv_"),
        count("lumen_take_"),
        count("lumen_cast_"),
        count("lumen_arg"),
        count("lumen_topk_"),
        count("lumen_gather_elements_"),
        count("lumen_scatter_elements_"),
        text.len(),
        t.elapsed().as_secs_f64()
    );
    let cubin = cuda::compile_cubin("sm_90").expect("every kernel compiles to a CUBIN");
    assert_eq!(cubin.kind, CodeKind::Cubin);
    assert_eq!(cubin.image.get(..4), Some(&b"\x7fELF"[..]), "an ELF image");
    println!(
        "NVRTC compiled the same {} kernels to a {} byte sm_90 CUBIN",
        names.len(),
        cubin.image.len()
    );
}

/// Every row of the compiler's op table carries its CUDA C expression (`ElemOp::cuda_fn`, the
/// reductions' identity and combine step): each compiles with NVRTC for sm_90 inside a small
/// kernel, so the table's CUDA side is checked before any generated kernel uses it.
#[test]
fn nvrtc_compiles_every_op_table_expression() {
    if !cuda::nvrtc_present() {
        skip("libnvrtc not found");
        return;
    }
    use lumen_compiler::{ElemOp, ReduceOp};
    for op in ElemOp::ALL {
        let name = format!("lumen_table_{}", op.name());
        let source = format!(
            "{}extern \"C\" __global__ void {name}(float* o, const float* a, const float* b, \
             const float* c) {{ o[threadIdx.x] = lumen_op_{}(a[threadIdx.x], b[threadIdx.x], \
             c[threadIdx.x]); }}\n",
            op.cuda_fn(),
            op.name()
        );
        let ptx = cuda::compile_source(&name, &source, "sm_90", CodeKind::Ptx)
            .unwrap_or_else(|e| panic!("{}: {e}\n{source}", op.name()));
        assert!(String::from_utf8_lossy(&ptx).contains(&format!(".entry {name}(")));
    }
    for op in ReduceOp::ALL {
        let name = format!("lumen_table_{}", op.name());
        let source = format!(
            "extern \"C\" __global__ void {name}(float* o, const float* x, int n) {{ float acc = \
             {}; for (int i = 0; i < n; ++i) {{ float v = x[i]; {{ float x = v; acc = {}; }} }} \
             o[0] = acc; }}\n",
            op.cuda_identity(),
            op.cuda_combine()
        );
        cuda::compile_source(&name, &source, "sm_90", CodeKind::Ptx)
            .unwrap_or_else(|e| panic!("{}: {e}\n{source}", op.name()));
    }
    println!(
        "NVRTC compiled {} elementwise and {} reduction expressions of the op table",
        ElemOp::ALL.len(),
        ReduceOp::ALL.len()
    );
}

#[test]
fn nvrtc_reports_a_broken_source_with_its_log() {
    if !cuda::nvrtc_present() {
        skip("libnvrtc not found");
        return;
    }
    // A typo of the kind this guards the built-in sources against.
    let broken = "extern \"C\" __global__ void k(flaot* x) { x[0] = 1.0f; }";
    let err = cuda::compile_source("lumen_typo", broken, "sm_90", CodeKind::Ptx).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("NVRTC nvrtcCompileProgram failed for kernel `lumen_typo`: "), "{msg}");
    assert!(msg.contains("lumen_typo.cu") && msg.contains("flaot"), "the log is kept: {msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");
    println!("{msg}");
}

#[test]
fn every_program_the_gpu_tests_run_is_in_the_cuda_op_set() {
    // CUDA refuses at prepare what it cannot run (RuntimeError::Unsupported). The GPU tests
    // below only mean something if their programs are all accepted: checked host-only, so a
    // machine without a GPU sees it too.
    let supported = |p: &CompiledProgram| {
        cuda::check_supported(p).unwrap_or_else(|e| panic!("{}: {e}", p.label));
    };
    // The unfused linear-relu's bias add (an add reading `b [n]` through a broadcast view) is
    // the generated add kernel over rank 2 (the bias' stride-0 axis); the relu after it rank 1.
    let unfused = linear_relu_unfused(4, 3, 5, "linear-relu");
    let spec = |n: usize| match cuda::support::launch(&unfused, n).expect("launch") {
        cuda::Launch::Kernels(k) => k[0].spec,
        other => panic!("node {n}: {other:?}"),
    };
    assert_eq!(spec(2), cuda::KernelSpec::Map { op: "add".parse().unwrap(), rank: 2 });
    assert_eq!(spec(3), cuda::KernelSpec::Map { op: "relu".parse().unwrap(), rank: 1 });
    assert!(matches!(cuda::support::launch(&unfused, 1), Ok(cuda::Launch::Matmul(_))));
    for fused in [false, true] {
        supported(&digits_program(&[64, 128, 64, 10], 450, fused));
    }
    for (m, k, n) in [
        (1, 1, 1),
        (1, 7, 5),
        (5, 7, 1),
        (1, 300, 1),
        (3, 0, 4),
        (64, 256, 64),
        (33, 65, 17),
        (130, 9, 300),
        (2, 0, 3),
        (4096, 4096, 4096),
        (TALL_M, 10, 10),
    ] {
        supported(&linear_relu_unfused(m, k, n, "linear-relu"));
        supported(&linear_fused(m, k, n, Epilogue::ReluBias, "linear-relu"));
    }
    for epilogue in Epilogue::ALL {
        supported(&linear_fused(9, 13, 11, epilogue, epilogue.name()));
        supported(&linear_fused(2, 2, 2, epilogue, "col-bias"));
    }
    let mut cx = Graph::new();
    cx.input("x", [1, 70]).gelu().output("y");
    supported(&compile(&cx, "gelu-tail"));
    for seed in 0..48u64 {
        let (program, desc) = random_program(seed, &RANDOM_SHAPE);
        cuda::check_supported(&program).unwrap_or_else(|e| panic!("{desc}: {e}"));
    }
    for (program, _, _) in spatial_cases().iter().chain([&spatial::bad_take(false)]) {
        supported(program);
    }
    for (program, _, _) in &integers::integer_programs() {
        supported(program);
    }
    for (program, _, _) in selection::selection_programs()
        .iter()
        .chain([&selection::bad_gather_elements(false), &selection::bad_gather_elements(true)])
    {
        supported(program);
    }
    for (program, _, _) in scatter::scatter_programs().iter().chain([
        &scatter::scatter_duplicates(),
        &scatter::bad_scatter_elements(false),
        &scatter::bad_scatter_elements(true),
    ]) {
        supported(program);
    }
}

// ---------------------------------------------------------------------------------------------
// Host-only: the CUDA launch plans, emulated (lumen_runtime::cuda::emulate), against the CPU.

/// `|a - b| <= 1e-4 + 1e-3 |b|` everywhere (NaN where the CPU has NaN): the worst `|a - b|`.
fn close_to_cpu(what: &str, got: &Tensors, cpu: &Tensors) -> f64 {
    assert_eq!(got.keys().collect::<Vec<_>>(), cpu.keys().collect::<Vec<_>>(), "{what}");
    let mut worst = 0.0f64;
    for (name, want) in cpu {
        let g = &got[name];
        assert_eq!(g.shape(), want.shape(), "{what} {name}");
        for (i, (&x, &y)) in g.data().iter().zip(want.data()).enumerate() {
            if y.is_nan() {
                assert!(x.is_nan(), "{what} {name}[{i}]: {x} vs cpu NaN");
                continue;
            }
            if y.is_infinite() {
                assert_eq!(x, y, "{what} {name}[{i}]");
                continue;
            }
            let e = (f64::from(x) - f64::from(y)).abs();
            assert!(e <= 1e-4 + 1e-3 * f64::from(y).abs(), "{what} {name}[{i}]: {x} vs cpu {y}");
            worst = worst.max(e);
        }
    }
    worst
}

/// The transformer block and a two-block ViT (tanh and erf GELU), fused and unfused.
fn model_programs() -> Vec<CompiledProgram> {
    use lumen_compiler::models::{Gelu, VitConfig, vit};
    let mut out = Vec::new();
    for fuse in [false, true] {
        let options = CompileOptions { fuse, ..Default::default() };
        let t = lumen_compiler::programs::transformer(Default::default()).expect("transformer");
        out.push(
            t.compile(&CompileOptions { name: "transformer".into(), ..options.clone() }).unwrap(),
        );
        for gelu in [Gelu::Tanh, Gelu::Erf] {
            let config = VitConfig {
                image: [8, 8],
                patch: 4,
                width: 16,
                heads: 2,
                blocks: 2,
                ffn: 32,
                classes: 10,
                eps: 1e-5,
                gelu,
            };
            let g = vit(&config, 3).expect("vit");
            out.push(
                g.compile(&CompileOptions { name: format!("vit-{gelu:?}"), ..options.clone() })
                    .unwrap(),
            );
        }
    }
    out
}

/// Matmuls in every form the DSL builds: transposed operands, a broadcast batch, a batch of
/// two axes over permuted heads (one cuBLASLt call per outer index), and an empty batch.
fn matmul_forms() -> Vec<CompiledProgram> {
    let mut programs = Vec::new();
    let mut cx = Graph::new();
    let a = cx.input("a", [5, 3]);
    let b = cx.weight("b", [4, 3]);
    a.matmul(b.transpose(0, 1)).output("abt");
    a.transpose(0, 1).matmul(&a).output("ata");
    programs.push(compile(&cx, "transposed"));
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3, 4, 5]);
    let w = cx.weight("w", [5, 6]);
    x.matmul(&w).output("bcast");
    // A batch axis broadcast (stride 0) and a transposed operand in one product.
    let y = cx.input("y", [1, 3, 4, 5]);
    x.matmul(y.transpose(-1, -2)).output("bcast2");
    programs.push(compile(&cx, "batched"));
    let mut cx = Graph::new();
    // [batch, seq, heads, dim] -> [batch, heads, seq, dim]: batch and heads are two strides.
    let q = cx.input("q", [2, 7, 3, 4]).permute(&[0, 2, 1, 3]);
    let k = cx.input("k", [2, 7, 3, 4]).permute(&[0, 2, 1, 3]);
    q.matmul(k.transpose(-1, -2)).softmax(-1).output("scores");
    programs.push(compile(&cx, "heads"));
    programs
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_models_and_matmul_forms() {
    for program in model_programs().into_iter().chain(matmul_forms()) {
        let weights = weights_for(&program, 7);
        let inputs = inputs_for(&program, 8);
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let emulated = cuda::emulate::emulate(&program, &weights, &inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        let err = close_to_cpu(&program.label, &emulated, &cpu);
        println!("{}: emulated cuda plans vs cpu, max |diff| {err:.2e}", program.label);
    }
    // The forms are what they claim: transposed layouts, a stride-0 batch, and attention's
    // [batch, heads] over [batch, seq, heads, dim] as 2 calls of a 3-matrix strided batch.
    let problems = |p: &CompiledProgram| -> Vec<cuda::LtCalls> {
        cuda::support::launches(p)
            .unwrap()
            .into_iter()
            .filter_map(|l| match l {
                cuda::Launch::Matmul(c) => Some(c),
                _ => None,
            })
            .collect()
    };
    let forms = matmul_forms();
    let t = problems(&forms[0]);
    assert!(t[0].problem.trans_a && !t[0].problem.trans_b, "{t:?}");
    assert!(!t[1].problem.trans_a && t[1].problem.trans_b, "{t:?}");
    let b = problems(&forms[1]);
    // [2, 3, 4, 5] x [5, 6]: the compiler folds the batch into M, one [24, 5] x [5, 6] GEMM.
    assert!(b.iter().any(|c| c.problem.mnk == (6, 24, 5) && c.offsets.len() == 1), "{b:?}");
    // [2, 3, 4, 5] x [1, 3, 5, 4]ᵀ: the broadcast outer axis is a loop whose calls all read
    // the same matrices of y (stride 0), each a strided batch of 3.
    assert!(
        b.iter().any(|c| c.offsets.len() == 2 && c.offsets[1][0] == 0 && c.problem.a.batch == 3),
        "{b:?}"
    );
    let h = problems(&forms[2]);
    assert_eq!(h[0].offsets.len(), 2, "{h:?}");
    assert_eq!((h[0].problem.b.batch, h[0].problem.b.batch_stride), (3, 4), "{h:?}");
    assert!(h[0].problem.trans_a, "k transposed: {h:?}");
}

/// The f32 tensors and the metadata of `data/{name}`.
fn fixture(name: &str) -> (Tensors, std::collections::BTreeMap<String, String>) {
    let dir = std::env::var_os("LUMEN_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data"));
    let bytes = std::fs::read(dir.join(name)).expect(name);
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("header");
    let meta = meta.metadata().clone().unwrap_or_default().into_iter().collect();
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let mut tensors = Tensors::new();
    for (tname, view) in st.tensors() {
        if view.dtype() != safetensors::Dtype::F32 {
            continue;
        }
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        tensors.insert(tname.clone(), HostTensor::new(view.shape().to_vec(), data).expect("f32"));
    }
    tensors.sort_keys();
    (tensors, meta)
}

/// The shipped models with their weights and inputs: the transformer block
/// (data/transformer_block.safetensors, PyTorch's TransformerEncoderLayer x 2) and the digits
/// ViT (data/digits_vit.safetensors, trained by PyTorch) over its first `vit_batch` images,
/// each fused and unfused.
fn shipped_models(vit_batch: usize) -> Vec<(CompiledProgram, Tensors, Tensors)> {
    use lumen_compiler::models::{Gelu, VitConfig, vit};
    let mut out = Vec::new();
    let (mut t, meta) = fixture("transformer_block.safetensors");
    let sizes = transformer_sizes(&meta);
    let x = t.shift_remove("x").expect("x");
    t.shift_remove("y");
    let inputs: Tensors = [("x".to_string(), x)].into();
    let graph = lumen_compiler::programs::transformer(sizes).expect("transformer");
    for fuse in [false, true] {
        let options =
            CompileOptions { name: "transformer_block".into(), fuse, ..Default::default() };
        out.push((graph.compile(&options).expect("compile"), t.clone(), inputs.clone()));
    }
    let (mut v, meta) = fixture("digits_vit.safetensors");
    let size = |k: &str| meta[k].parse::<usize>().expect(k);
    let side = meta["image"].split('x').next().and_then(|s| s.parse().ok()).expect("image");
    let config = VitConfig {
        image: [side, side],
        patch: size("patch"),
        width: size("width"),
        heads: size("heads"),
        blocks: size("blocks"),
        ffn: size("ffn"),
        classes: size("classes"),
        eps: 1e-5,
        gelu: if meta.get("gelu").map(String::as_str) == Some("tanh") {
            Gelu::Tanh
        } else {
            Gelu::Erf
        },
    };
    let x = v.shift_remove("x").expect("x");
    v.shift_remove("logits");
    let batch = vit_batch.min(x.shape()[0]);
    let cols = x.shape()[1];
    let x = HostTensor::new([batch, cols], x.data()[..batch * cols].to_vec()).expect("x");
    let inputs: Tensors = [("x".to_string(), x)].into();
    let graph = vit(&config, batch).expect("vit");
    for fuse in [false, true] {
        let options = CompileOptions { name: "digits_vit".into(), fuse, ..Default::default() };
        out.push((graph.compile(&options).expect("compile"), v.clone(), inputs.clone()));
    }
    out
}

/// Row-wise argmax over the last axis.
fn argmax_last(t: &HostTensor) -> Vec<usize> {
    let cols = t.shape().last().copied().unwrap_or(1).max(1);
    t.data()
        .chunks(cols)
        .map(|row| (0..row.len()).fold(0, |best, j| if row[j] > row[best] { j } else { best }))
        .collect()
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_the_shipped_transformer_and_vit() {
    for (program, weights, inputs) in shipped_models(24) {
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let emulated = cuda::emulate::emulate(&program, &weights, &inputs).expect("emulate");
        let err = close_to_cpu(&program.label, &emulated, &cpu);
        assert_eq!(argmax_last(&emulated["y"]), argmax_last(&cpu["y"]), "{}", program.label);
        println!("{}: emulated cuda plans vs cpu, max |diff| {err:.2e}", program.label);
    }
}

/// Random programs over every op (the CPU differential test's generator), fused and unfused.
fn random_tensor_programs(seeds: std::ops::Range<u64>) -> Vec<(CompiledProgram, Tensors, Tensors)> {
    let mut out = Vec::new();
    for seed in seeds {
        let case = tensor_programs::build(seed);
        for fuse in [false, true] {
            let options = CompileOptions {
                name: format!("random-{seed}-fuse-{fuse}"),
                fuse,
                ..Default::default()
            };
            let program = case.graph.compile(&options).expect("compile");
            out.push((program, case.weights.clone(), case.inputs.clone()));
        }
    }
    out
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_random_programs_over_every_op() {
    let mut launches = std::collections::BTreeSet::new();
    let cases = random_tensor_programs(0..64);
    for (program, weights, inputs) in &cases {
        for l in cuda::support::launches(program).expect("launch plans") {
            launches.extend(l.kernels().iter().map(|k| k.spec.family()));
        }
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        close_to_cpu(&program.label, &emulated, &cpu);
    }
    assert_eq!(
        launches.into_iter().collect::<Vec<_>>(),
        ["copy", "gather", "gather_report", "map", "reduce"],
        "kernel families seen"
    );
    println!("{} random programs: emulated cuda plans match the cpu", cases.len());
}

/// A gather over `ids` (declared `[2, 3]`, read transposed) with one id out of range.
fn bad_gather() -> (CompiledProgram, Tensors, Tensors) {
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("ids", [2, 3], lumen_compiler::DType::I64);
    table.gather(ids.transpose(0, 1)).output("y");
    let program = compile(&cx, "bad-gather");
    let weights: Tensors = [("table".to_string(), tensor(&[4, 2], &[0.0; 8]))].into();
    let inputs: Tensors =
        [("ids".to_string(), HostTensor::from_i64([2, 3], vec![0, 9, 1, 2, 3, 0]).unwrap())].into();
    (program, weights, inputs)
}

const BAD_GATHER: &str =
    "gather: id 9 at position 1 of `ids` is out of range for a table of 4 rows";

#[test]
fn emulated_gather_error_record_reports_like_the_cpu() {
    let (program, weights, inputs) = bad_gather();
    let err = cuda::emulate::emulate(&program, &weights, &inputs).unwrap_err().to_string();
    assert_eq!(err, BAD_GATHER);
}

/// Every convolution and take program the CUDA tests run (`cuda_shared::spatial`): the DSL
/// convolutions fused and unfused, one per kernel epilogue, the takes.
fn spatial_cases() -> Vec<(CompiledProgram, Tensors, Tensors)> {
    let mut cases = spatial::conv_programs();
    cases.extend(spatial::conv_epilogue_programs(&cuda::codegen::conv_epilogues()));
    cases.extend(spatial::take_programs());
    cases
}

/// The generated kernels of `program`'s launch plans.
fn kernel_specs(program: &CompiledProgram) -> Vec<cuda::KernelSpec> {
    let plans =
        cuda::support::launches(program).unwrap_or_else(|e| panic!("{}: {e}", program.label));
    plans.iter().flat_map(|l| l.kernels().iter().map(|k| k.spec)).collect()
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_convolutions() {
    let mut epilogues = std::collections::BTreeSet::new();
    let cases = spatial::conv_programs();
    for (program, weights, inputs) in &cases {
        for spec in kernel_specs(program) {
            if let cuda::KernelSpec::Conv { epilogue } = spec {
                epilogues.insert(epilogue.to_string());
            }
        }
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        let err = close_to_cpu(&program.label, &emulated, &cpu);
        println!("{}: emulated cuda plans vs cpu, max |diff| {err:.2e}", program.label);
    }
    // The fused programs' epilogues reached the kernels; the unfused ones have none.
    for e in ["none", "bias", "bias+relu", "bias+silu", "relu6", "bias+residual+hardswish"] {
        assert!(epilogues.contains(e), "no conv kernel with epilogue {e}: {epilogues:?}");
    }
    for e in ["bias+sigmoid", "bias+residual+relu"] {
        assert!(epilogues.contains(e), "no conv kernel with epilogue {e}: {epilogues:?}");
    }
    println!("{} convolution programs: emulated cuda plans match the cpu", cases.len());
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_every_conv_epilogue() {
    let epilogues = cuda::codegen::conv_epilogues();
    let cases = spatial::conv_epilogue_programs(&epilogues);
    for ((program, weights, inputs), &epilogue) in cases.iter().zip(&epilogues) {
        let convs: Vec<_> = kernel_specs(program)
            .into_iter()
            .filter(|s| matches!(s, cuda::KernelSpec::Conv { .. }))
            .collect();
        assert_eq!(convs, [cuda::KernelSpec::Conv { epilogue }], "{}", program.label);
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        close_to_cpu(&program.label, &emulated, &cpu);
    }
    println!("{} conv epilogues: emulated cuda plans match the cpu", cases.len());
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_takes() {
    let mut specs = std::collections::BTreeSet::new();
    for (program, weights, inputs) in spatial::take_programs() {
        specs.extend(kernel_specs(&program).into_iter().filter(|s| {
            matches!(s, cuda::KernelSpec::Take { .. } | cuda::KernelSpec::GatherReport { .. })
        }));
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let emulated = cuda::emulate::emulate(&program, &weights, &inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        close_to_cpu(&program.label, &emulated, &cpu);
    }
    // i64 and i32 indices, each take with its rank-1 report.
    let wide: Vec<bool> = specs
        .iter()
        .filter_map(|s| match s {
            cuda::KernelSpec::Take { wide, .. } => Some(*wide),
            _ => None,
        })
        .collect();
    assert!(wide.contains(&true) && wide.contains(&false), "{specs:?}");
    assert!(specs.contains(&cuda::KernelSpec::GatherReport { wide: false, rank: 1 }), "{specs:?}");
    assert!(specs.contains(&cuda::KernelSpec::GatherReport { wide: true, rank: 1 }), "{specs:?}");
}

#[test]
fn emulated_take_error_record_reports_like_the_cpu() {
    for empty in [false, true] {
        let (program, weights, inputs) = spatial::bad_take(empty);
        let mut cpu = CpuRuntime::default().prepare(&program, &weights).expect("prepare");
        assert_eq!(cpu.execute(&inputs).unwrap_err().to_string(), BAD_TAKE, "cpu, empty {empty}");
        let err = cuda::emulate::emulate(&program, &weights, &inputs).unwrap_err().to_string();
        assert_eq!(err, BAD_TAKE, "emulated, empty {empty}");
    }
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_casts_and_args_bit_for_bit() {
    use lumen_compiler::DType;
    let mut specs = std::collections::BTreeSet::new();
    let mut elements = 0;
    let cases = integers::integer_programs();
    for (program, weights, inputs) in &cases {
        specs.extend(kernel_specs(program));
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        elements += assert_bit_identical(&program.label, &emulated, &cpu);
        if program.label.starts_with("casts") {
            // By hand, so the two cannot agree on a wrong rule: truncation toward zero,
            // saturation, NaN to 0; an i64's f32 through the nearest f64.
            let i32s = emulated["f32_i32"].index_values().expect("i32");
            let (max, min) = (i64::from(i32::MAX), i64::from(i32::MIN));
            assert_eq!(
                i32s,
                [
                    0,
                    0,
                    0,
                    max,
                    min,
                    0,
                    0,
                    0,
                    2,
                    -2,
                    0,
                    0,
                    2_147_483_520,
                    max,
                    min,
                    min,
                    max,
                    min,
                    max,
                    min,
                    max,
                    min,
                    16_777_216,
                    -3
                ]
            );
            let i64s = emulated["f32_i64"].index_values().expect("i64");
            assert_eq!(
                &i64s[12..22],
                [
                    2_147_483_520,
                    2_147_483_648,
                    -2_147_483_648,
                    -2_147_483_904,
                    10_000_000_000,
                    -10_000_000_000,
                    i64::MAX,
                    i64::MIN,
                    i64::MAX,
                    i64::MIN
                ]
            );
            assert_eq!(emulated["i64_f32"].data()[16], 2f32.powi(62));
            assert_eq!(emulated["i64_f32"].data()[17], -(2f32.powi(62)));
            let narrowed = emulated["i64_i32"].index_values().expect("i32");
            assert_eq!(&narrowed[11..15], [max, min, max, min]);
            assert_eq!(
                emulated["i32_f32"].data()[5..8],
                [16_777_216.0, -16_777_216.0, 16_777_220.0]
            );
            // The same type keeps a NaN's payload (elements 1 and 2, transposed to 4 and 8).
            let t = emulated["f32_t_f32"].data();
            assert_eq!((t[4].to_bits(), t[8].to_bits()), (0x7fc0_1234, 0xffc0_0001));
            assert_eq!(emulated["i64_t_i64"].dtype(), DType::I64);
        } else if program.label.starts_with("bits") {
            // Row 0 by hand (x: MIN, MAX, -1, 0, 1, then 16_777_217 or 2^32; shifts 1, 0, 31,
            // 32, -1, 63): bits past the sign dropped, the sign copied in from the right, a
            // shift outside 0..width 0 (or -1 for a negative value shifted right).
            let row = |name: &str| emulated[name].index_values().expect(name)[..6].to_vec();
            let (max, min) = (i64::from(i32::MAX), i64::from(i32::MIN));
            assert_eq!(row("i32_shift_left"), [0, max, min, 0, 0, 0]);
            assert_eq!(row("i32_shift_right"), [min / 2, max, -1, 0, 0, 0]);
            assert_eq!(row("i64_shift_left"), [0, i64::MAX, -(1 << 31), 0, 0, 0]);
            assert_eq!(row("i64_shift_right"), [i64::MIN / 2, i64::MAX, -1, 0, 0, 0]);
            assert_eq!(row("i32_bit_not")[..3], [max, min, 0]);
            assert_eq!(row("i64_bit_not")[..3], [i64::MAX, i64::MIN, 0]);
            assert_eq!(row("i32_bit_xor")[0], 0);
            assert_eq!(row("i64_bit_and")[0], i64::MIN);
            assert_eq!(emulated["i32_bit_or"].dtype(), DType::I32);
        } else {
            // x's rows along the last axis, by hand: a first NaN wins, a NaN after, ties.
            let am = emulated["argmax2"].index_values().expect("i64");
            let am_last = emulated["argmax2_last"].index_values().expect("i64");
            assert_eq!((am[0], am[3], am[6], am[8]), (0, 0, 3, 4), "{am:?}");
            assert_eq!((am[9], am_last[9]), (0, 4), "a row of equal values");
            assert_eq!((am[11], am_last[11]), (0, 4), "a row of ±0");
            assert_eq!((am[4], am_last[4]), (0, 2), "infinities");
            assert_eq!(emulated["argmax_keepdim"].shape(), [3, 4, 1]);
        }
    }
    // Every cast pair (each read at ranks 1 and 2), each arg kernel.
    for from in cuda::codegen::CAST_TYPES {
        for to in cuda::codegen::CAST_TYPES {
            for rank in [1, 2] {
                let spec = cuda::KernelSpec::Cast { from, to, rank };
                assert!(specs.contains(&spec), "{} never ran", spec.name());
            }
        }
    }
    for max in [true, false] {
        for last in [false, true] {
            let ranks: Vec<usize> = specs
                .iter()
                .filter_map(|s| match *s {
                    cuda::KernelSpec::Arg { max: m, last: l, rank } if (m, l) == (max, last) => {
                        Some(rank)
                    }
                    _ => None,
                })
                .collect();
            assert!(ranks.contains(&1) && ranks.contains(&2), "max {max} last {last}: {ranks:?}");
        }
    }
    // Every integer op on both types.
    for op in lumen_compiler::IntOp::ALL {
        for dtype in cuda::codegen::INT_TYPES {
            let ran = specs.iter().any(|s| {
                matches!(*s, cuda::KernelSpec::IntMap { op: o, dtype: d, .. } if (o, d) == (op, dtype))
            });
            assert!(ran, "{op} on {dtype} never ran");
        }
    }
    println!(
        "{} cast, arg and bit programs: emulated cuda plans match the cpu bit for bit ({elements} \
         elements, {} kernels)",
        cases.len(),
        specs.len()
    );
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_topk_and_gather_elements_bit_for_bit() {
    let mut specs = std::collections::BTreeSet::new();
    let mut elements = 0;
    let cases = selection::selection_programs();
    for (program, weights, inputs) in &cases {
        specs.extend(kernel_specs(program));
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        elements += assert_bit_identical(&program.label, &emulated, &cpu);
        if program.label.starts_with("topk") {
            // Rows of x by hand, so the two cannot agree on a wrong order: a NaN first (it is
            // the largest), three NaNs (by position among themselves), infinities and ties.
            let row = |name: &str, r: usize| -> Vec<i64> {
                emulated[name].index_values().expect("i64")[6 * r..6 * r + 6].to_vec()
            };
            assert_eq!(row("max2_k6", 4), [0, 2, 3, 4, 1, 5]);
            assert_eq!(row("min2_k6", 4), [5, 1, 4, 3, 2, 0]);
            assert_eq!(row("max2_k6", 8), [1, 2, 4, 3, 0, 5]);
            assert_eq!(row("min2_k6", 8), [5, 0, 3, 1, 2, 4]);
            assert_eq!(row("max2_k6", 9), [0, 2, 3, 5, 1, 4]);
            assert_eq!(row("min2_k6", 9), [1, 4, 3, 5, 0, 2]);
            assert_eq!(row("max2_k6", 2), [0, 1, 2, 3, 4, 5], "±0 are equal: by position");
            assert_eq!(row("min2_k6", 11), [0, 1, 2, 3, 4, 5], "all NaN: by position");
            assert_eq!(emulated["k0"].shape(), [3, 0, 6]);
            // The values keep each element's bits (a NaN's payload and sign, -0).
            let v = emulated["max2_k6_values"].data();
            assert_eq!(
                v[48..54].iter().map(|x| x.to_bits()).collect::<Vec<_>>()[..3],
                [0x7fc0_1234, 0xffc0_0001, f32::NAN.to_bits()]
            );
        } else {
            // d [3, 5] by hand: row 0 at 4, -1 (= 4), 0, -5 (= 0); row 1 at 2, 2, -3 (= 2), 1.
            let y = emulated["axis1_i64"].data();
            let d = selection::data_values();
            let want = [d[4], d[4], d[0], d[0], d[7], d[7], d[7], d[6]];
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(y), bits(&want));
        }
    }
    for largest in [true, false] {
        for rank in [1, 2] {
            let spec = cuda::KernelSpec::TopK { largest, rank };
            assert!(specs.contains(&spec), "{} never ran", spec.name());
        }
    }
    for wide in [true, false] {
        for rank in [1, 2] {
            let spec = cuda::KernelSpec::GatherElements { wide, rank };
            assert!(specs.contains(&spec), "{} never ran", spec.name());
        }
    }
    println!(
        "{} top-k and gather_elements programs: emulated cuda plans match the cpu bit for bit \
         ({elements} elements, {} kernels)",
        cases.len(),
        specs.len()
    );
}

#[test]
fn emulated_gather_elements_error_record_reports_like_the_cpu() {
    for negative in [false, true] {
        let (program, weights, inputs) = selection::bad_gather_elements(negative);
        let want = selection::bad_gather_elements_message(negative);
        let mut cpu = CpuRuntime::default().prepare(&program, &weights).expect("prepare");
        assert_eq!(cpu.execute(&inputs).unwrap_err().to_string(), want, "cpu");
        let err = cuda::emulate::emulate(&program, &weights, &inputs).unwrap_err().to_string();
        assert_eq!(err, want, "emulated");
        // The take and the gather_elements each have their own error record.
        let ks: Vec<cuda::support::KernelLaunch> = cuda::support::launches(&program)
            .unwrap()
            .iter()
            .flat_map(|l| l.kernels().to_vec())
            .collect();
        let record = |family: &str| {
            ks.iter().find(|k| k.spec.family() == family).map(|k| k.ptrs[3]).expect(family)
        };
        assert_eq!(cuda::support::error_records(&program), 2);
        assert_ne!(record("gather_elements"), record("take"));
    }
}

#[test]
fn emulated_cuda_plans_match_the_cpu_on_scatter_elements_bit_for_bit() {
    use lumen_compiler::DType;
    let mut specs = std::collections::BTreeSet::new();
    let mut elements = 0;
    let mut cases = scatter::scatter_programs();
    cases.push(scatter::scatter_duplicates());
    for (program, weights, inputs) in &cases {
        specs.extend(kernel_specs(program));
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let emulated = cuda::emulate::emulate(program, weights, inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", program.label));
        elements += assert_bit_identical(&program.label, &emulated, &cpu);
        if program.label.starts_with("scatter-duplicates") {
            // By hand: row 0 of d [[0.1, -0, 1], [-1, 0.3, 0]] gets 0.7 and 1e8 at 0 (the
            // last wins), +0 then -0 at 1; row 1 gets -0 and 0.2 at 0, 1/3 and 3 at 2.
            assert_eq!(emulated["dup_none"].data(), [1e8, -0.0, 1.0, 0.2, 0.3, 3.0]);
            assert!(emulated["dup_none"].data()[1].is_sign_negative());
            assert!(emulated["dup_max"].data()[1].is_sign_negative(), "-0 stays");
        } else {
            // d [3, 5] along axis 1 at [[4, -5 (= 0)], [2, 1], [-1 (= 4), 3]] by u's first
            // two columns [[-1.5, -1.25], [-0.25, 0], [1, 1.25]].
            let y = emulated["plain_axis1"].data();
            let d = selection::data_values();
            let want = [
                -1.25, d[1], d[2], d[3], -1.5, d[5], 0.0, -0.25, d[8], d[9], d[10], d[11], d[12],
                1.25, 1.0,
            ];
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(y), bits(&want));
            // w[0][0] = MAX gets 1, 3 and 5 (index -3 is 0): MAX + 9 wraps to MIN + 8.
            assert_eq!(emulated["i64_add"].index_values().unwrap()[0], i64::MIN + 8);
        }
    }
    // Every data type with both index types; the copy is the same-type cast kernel.
    for dtype in [DType::F32, DType::I32, DType::I64] {
        let wides: Vec<bool> = specs
            .iter()
            .filter_map(|s| match *s {
                cuda::KernelSpec::ScatterElements { dtype: d, wide, .. } if d == dtype => {
                    Some(wide)
                }
                _ => None,
            })
            .collect();
        assert!(!wides.is_empty(), "no {dtype} scatter ran");
        assert!(
            specs.iter().any(|s| matches!(*s, cuda::KernelSpec::Cast { from, to, .. } if from == dtype && to == dtype)),
            "no {dtype} copy"
        );
    }
    for wide in [false, true] {
        assert!(
            specs.iter().any(
                |s| matches!(*s, cuda::KernelSpec::ScatterElements { wide: w, .. } if w == wide)
            ),
            "no scatter with wide = {wide}"
        );
    }
    println!(
        "{} scatter programs: emulated cuda plans match the cpu bit for bit ({elements} \
         elements, {} kernels)",
        cases.len(),
        specs.len()
    );
}

#[test]
fn emulated_scatter_elements_error_record_reports_like_the_cpu() {
    for negative in [false, true] {
        let (program, weights, inputs) = scatter::bad_scatter_elements(negative);
        let want = scatter::bad_scatter_elements_message(negative);
        let mut cpu = CpuRuntime::default().prepare(&program, &weights).expect("prepare");
        assert_eq!(cpu.execute(&inputs).unwrap_err().to_string(), want, "cpu");
        let err = cuda::emulate::emulate(&program, &weights, &inputs).unwrap_err().to_string();
        assert_eq!(err, want, "emulated");
        // The gather_elements and the scatter each have their own error record.
        let ks: Vec<cuda::support::KernelLaunch> = cuda::support::launches(&program)
            .unwrap()
            .iter()
            .flat_map(|l| l.kernels().to_vec())
            .collect();
        let record = |family: &str| {
            ks.iter().find(|k| k.spec.family() == family).map(|k| k.ptrs[3]).expect(family)
        };
        assert_eq!(cuda::support::error_records(&program), 2);
        assert_ne!(record("gather_elements"), record("scatter_elements"));
    }
}

// ---------------------------------------------------------------------------------------------
// GPU tests.

/// Reads the digits MLP fixture: weights w1..w3, b1..b3 and the input batch x.
fn digits() -> (Tensors, Tensors, Vec<usize>) {
    // LUMEN_DATA_DIR: where scripts/gpu-check.sh put data/ on a machine without the checkout.
    let dir = std::env::var_os("LUMEN_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data"));
    let path = dir.join("digits_mlp.safetensors");
    let bytes = std::fs::read(&path).expect("data/digits_mlp.safetensors");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let f32_tensor = |name: &str| {
        let view = st.tensor(name).expect(name);
        assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        HostTensor::new(view.shape().to_vec(), data).expect(name)
    };
    let mut weights = Tensors::new();
    let mut widths = Vec::new();
    for l in 1.. {
        let w = format!("w{l}");
        if st.tensor(&w).is_err() {
            break;
        }
        let wt = f32_tensor(&w);
        if widths.is_empty() {
            widths.push(wt.shape()[0]);
        }
        widths.push(wt.shape()[1]);
        weights.insert(w, wt);
        weights.insert(format!("b{l}"), f32_tensor(&format!("b{l}")));
    }
    let inputs: Tensors = [("x".to_string(), f32_tensor("x"))].into_iter().collect();
    (weights, inputs, widths)
}

/// The digits MLP as the DSL builds it, unfused or with fused epilogues (RELU_BIAS on hidden
/// layers, BIAS on the last).
fn digits_program(widths: &[usize], batch: usize, fused: bool) -> CompiledProgram {
    if !fused {
        let graph = lumen_compiler::programs::mlp(widths, batch).expect("mlp");
        let options = CompileOptions { name: "digits".into(), fuse: false, ..Default::default() };
        return graph.compile(&options).expect("compile");
    }
    let mut h = HlirBuilder::default();
    let mut cur = h.input("x", &[batch, widths[0]]);
    let last = widths.len() - 2;
    for (i, pair) in widths.windows(2).enumerate() {
        let w = h.weight(&format!("w{}", i + 1), &[pair[0], pair[1]]);
        let b = h.weight(&format!("b{}", i + 1), &[pair[1]]);
        let epilogue = if i == last { Epilogue::Bias } else { Epilogue::ReluBias };
        cur = h.matmul(cur, w, Some(b), epilogue);
    }
    h.output(cur, "y");
    compile_fused(&h.hlir, "digits")
}

fn argmax_rows(t: &HostTensor) -> Vec<usize> {
    let cols = t.shape()[1];
    t.data()
        .chunks(cols)
        .map(|row| {
            let mut best = 0;
            for (j, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = j;
                }
            }
            best
        })
        .collect()
}

#[test]
fn digits_mlp_matches_the_cpu() {
    let Some(rt) = gpu(fp32()) else { return };
    let (weights, inputs, widths) = digits();
    let batch = inputs["x"].shape()[0];
    assert_eq!(widths, [64, 128, 64, 10]);
    for fused in [false, true] {
        let program = digits_program(&widths, batch, fused);
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let gpu_out = run_cuda(&rt, &program, &weights, &inputs);
        let err = max_abs_diff(&gpu_out, &cpu);
        println!("{}: max |cuda - cpu| = {err:.3e}", program.label);
        assert!(err <= 1e-3, "{}: {err}", program.label);
        assert_eq!(argmax_rows(&gpu_out["y"]), argmax_rows(&cpu["y"]), "{}", program.label);
    }
}

#[test]
fn linear_relu_shapes_match_the_f64_reference() {
    let Some(rt) = gpu(fp32()) else { return };
    let shapes = [
        (1, 1, 1),
        (1, 7, 5),
        (5, 7, 1),
        (1, 300, 1),
        (3, 0, 4),
        (64, 256, 64),
        (33, 65, 17),
        (130, 9, 300),
    ];
    for (i, &(m, k, n)) in shapes.iter().enumerate() {
        let unfused = linear_relu_unfused(m, k, n, "linear-relu");
        let fused = linear_fused(m, k, n, Epilogue::ReluBias, "linear-relu");
        let weights = weights_for(&unfused, 100 + i as u64);
        let inputs = inputs_for(&unfused, 200 + i as u64);
        for program in [&unfused, &fused] {
            let out = run_cuda(&rt, program, &weights, &inputs);
            let err = max_err_vs_reference(program, &weights, &inputs, &out);
            // FP32 products summed in some order: error grows like k * eps.
            let tol = 2e-6 * (k as f64 + 1.0);
            assert!(err <= tol, "{} {m}x{k}x{n}: {err}", program.label);
        }
    }
}

#[test]
fn k_zero_gives_relu_of_bias() {
    let Some(rt) = gpu(fp32()) else { return };
    let weights: Tensors = [
        ("w".to_string(), tensor(&[0, 3], &[])),
        ("b".to_string(), tensor(&[3], &[1.0, -2.0, 3.0])),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors = [("x".to_string(), tensor(&[2, 0], &[]))].into_iter().collect();
    for program in
        [linear_relu_unfused(2, 0, 3, "k0"), linear_fused(2, 0, 3, Epilogue::ReluBias, "k0")]
    {
        let out = run_cuda(&rt, &program, &weights, &inputs);
        assert_eq!(out["y"].data(), &[1.0, 0.0, 3.0, 1.0, 0.0, 3.0], "{}", program.label);
    }
}

#[test]
fn gelu_kernel_is_relatively_accurate_on_the_tail() {
    // The NVRTC gelu kernel (not cuBLASLt's epilogue) in its stable form: no cancellation for
    // x < -4, -0 at -inf, NaN kept. Same points and tolerance as the CPU kernel's test.
    let Some(rt) = gpu(fp32()) else { return };
    let mut points: Vec<f32> = (0..=64).map(|i| -12.0 + 0.25 * i as f32).collect();
    points.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MIN, f32::MAX]);
    let n = points.len();
    let mut cx = Graph::new();
    cx.input("x", [1, n]).gelu().output("y");
    let program = compile(&cx, "gelu-tail");
    let inputs: Tensors = [("x".to_string(), tensor(&[1, n], &points))].into_iter().collect();
    let out = run_cuda(&rt, &program, &Tensors::new(), &inputs);
    let want = lumen_runtime::reference::execute_f64(&program.llir, &Tensors::new(), &inputs)
        .expect("reference");
    for (i, (&g, &r)) in out["y"].data().iter().zip(&want["y"].data).enumerate() {
        let g = f64::from(g);
        let what = format!("gelu({}) = {g:e} on CUDA, reference {r:e}", points[i]);
        if r.is_nan() {
            assert!(g.is_nan(), "{what}");
        } else if r.is_infinite() {
            assert_eq!(g, r, "{what}");
        } else if r.abs() >= f64::from(f32::MIN_POSITIVE) {
            assert!((g - r).abs() <= 2e-5 * r.abs(), "{what}");
        } else {
            // Below f32's normal range: a subnormal or a zero, never positive.
            assert!(g <= 0.0 && g.abs() < f64::from(f32::MIN_POSITIVE), "{what}");
        }
    }
    let neg_inf = out["y"].data()[points.iter().position(|&p| p == f32::NEG_INFINITY).unwrap()];
    assert!(neg_inf == 0.0 && neg_inf.is_sign_negative(), "gelu(-inf) = {neg_inf}");
}

#[test]
fn memory_debug_refuses_an_overlapping_plan() {
    // As on the CPU: the default mode trusts the plan, memory debug verifies it at prepare.
    let Some(rt) = gpu(CudaOptions { memory_debug: true, ..fp32() }) else { return };
    let mut program = linear_relu_unfused(4, 3, 5, "overlap");
    let weights = weights_for(&program, 1);
    let x = program.llir.buffers.iter().position(|b| b.id == "x").unwrap();
    let w = program.llir.buffers.iter().position(|b| b.id == "w").unwrap();
    assert!(rt.prepare_cuda(&program, &weights).is_ok(), "a valid plan prepares");
    program.plan.offsets[w] = program.plan.offsets[x];
    match rt.prepare_cuda(&program, &weights) {
        Err(RuntimeError::InvalidProgram { reason, .. }) => assert_eq!(
            reason,
            "memory debug: the plan fails verification: buffers x [0, 256) and w [0, 256) \
             overlap but their lifetimes conflict"
        ),
        Err(other) => panic!("expected InvalidProgram, got {other}"),
        Ok(_) => panic!("memory debug prepared an overlapping plan"),
    }
}

#[test]
fn every_epilogue_matches_the_reference() {
    let Some(rt) = gpu(fp32()) else { return };
    let (m, k, n) = (9, 13, 11);
    for (i, epilogue) in Epilogue::ALL.into_iter().enumerate() {
        let program = linear_fused(m, k, n, epilogue, epilogue.name());
        let weights = weights_for(&program, 300 + i as u64);
        let inputs = inputs_for(&program, 400 + i as u64);
        let out = run_cuda(&rt, &program, &weights, &inputs);
        let err = max_err_vs_reference(&program, &weights, &inputs, &out);
        // GELU: cuBLASLt may evaluate tanh with the hardware approximation (relative error
        // about 2^-11), so it gets a looser bound than the exact epilogues.
        let tol = if matches!(epilogue, Epilogue::Gelu | Epilogue::GeluBias) { 2e-3 } else { 1e-5 };
        println!("{}: max error {err:.3e}", epilogue.name());
        assert!(err <= tol, "{}: {err}", epilogue.name());
    }
}

#[test]
fn bias_is_per_column_of_the_output() {
    // A = [[1,2],[3,4]], B = I, bias [10, 20] over the last axis: [[11,22],[13,24]]. A bias
    // applied per row of the row-major output would give [[11,12],[23,24]].
    let Some(rt) = gpu(fp32()) else { return };
    let program = linear_fused(2, 2, 2, Epilogue::Bias, "col-bias");
    let weights: Tensors = [
        ("w".to_string(), tensor(&[2, 2], &[1.0, 0.0, 0.0, 1.0])),
        ("b".to_string(), tensor(&[2], &[10.0, 20.0])),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors =
        [("x".to_string(), tensor(&[2, 2], &[1.0, 2.0, 3.0, 4.0]))].into_iter().collect();
    let out = run_cuda(&rt, &program, &weights, &inputs);
    assert_eq!(out["y"].data(), &[11.0, 22.0, 13.0, 24.0]);
}

#[test]
fn tall_product_relu_sums_to_the_golden() {
    let Some(rt) = gpu(fp32()) else { return };
    let (weights, inputs) = tall_tensors(TALL_M);
    for program in [
        linear_relu_unfused(TALL_M, 10, 10, "tall"),
        linear_fused(TALL_M, 10, 10, Epilogue::ReluBias, "tall"),
    ] {
        let out = run_cuda(&rt, &program, &weights, &inputs);
        let sum = sum_f64(&out["y"]);
        println!("{}: relu sum {sum}", program.label);
        assert_eq!(sum, TALL_RELU_SUM, "{}", program.label);
    }
}

/// Programs larger than the CPU differential test's (batch <= 40, widths <= 48); a parallel
/// branch ends in RELU or GELU.
const RANDOM_SHAPE: RandomProgramShape = RandomProgramShape {
    max_batch: 40,
    max_width: 48,
    branch_epilogues: [Epilogue::Relu, Epilogue::Gelu],
};

#[test]
fn planned_no_reuse_and_poisoned_slabs_agree() {
    let Some(planned_rt) = gpu(fp32()) else { return };
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let mut reused = 0;
    for seed in 0..48u64 {
        let (program, desc) = random_program(seed, &RANDOM_SHAPE);
        reused += usize::from(program.plan.slab_bytes < program.plan.naive_bytes);
        let weights = weights_for(&program, seed ^ 0x5EED);
        let inputs = inputs_for(&program, seed ^ 0xD00D);
        let other = inputs_for(&program, seed ^ 0xBEEF);
        let planned = run_cuda(&planned_rt, &program, &weights, &inputs);
        for (mode, rt) in
            [("planned", &planned_rt), ("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)]
        {
            let mut prepared = rt.prepare_cuda(&program, &weights).expect("prepare");
            let first = prepared.execute(&inputs).expect("execute");
            // Same algorithms, same pointer alignment: cuBLASLt is bitwise reproducible.
            assert_eq!(bits(&first), bits(&planned), "{desc}: {mode} differs from planned");
            prepared.execute(&other).expect("execute");
            let again = prepared.execute(&inputs).expect("execute");
            assert_eq!(bits(&again), bits(&first), "{desc}: {mode}, repeated execute differs");
        }
        // Values: against the CPU runtime, relative to max(1, |cpu|); different summation
        // orders, and GELU through cuBLASLt's tanh, bound how close they can be.
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let err = max_rel_diff(&planned, &cpu);
        let tol = if desc.to_lowercase().contains("gelu") { 3e-3 } else { 5e-4 };
        assert!(err <= tol, "{desc}: cuda vs cpu {err}");
    }
    assert!(reused >= 24, "only {reused} of 48 random programs reuse slab bytes");
}

#[test]
fn profile_lines_and_one_synchronize_figures() {
    let Some(rt) = gpu(CudaOptions { profile_recapture: true, ..fp32() }) else { return };
    let program = linear_relu_unfused(64, 256, 64, "linear-relu");
    assert_eq!(program.plan.slab_bytes, 1_196_288);
    let weights = weights_for(&program, 1);
    let inputs = inputs_for(&program, 2);
    let mut prepared: CudaProgram = rt.prepare_cuda(&program, &weights).expect("prepare");
    assert!(prepared.prepare_profile().starts_with("CUDA_PREPARE_PROFILE label=linear-relu"));
    assert!(
        prepared.prepare_profile().contains(" matmul_shapes=1 "),
        "{}",
        prepared.prepare_profile()
    );
    assert_eq!(prepared.slab_bytes(), 1_196_288);
    prepared.execute(&inputs).expect("execute");
    let prof = prepared.last_profile().expect("profile");
    assert_eq!(prof.launches, 3);
    assert_eq!(prof.upload_bytes, 64 * 256 * 4);
    assert_eq!(prof.readback_bytes, 64 * 64 * 4);
    assert!(prepared.last_kernel_ms().is_some_and(|k| k > 0.0));
    let line = prof.line("CUDA", prepared.label(), prepared.prepare_seconds() * 1e3);
    assert!(line.starts_with("CUDA_EXEC_PROFILE label=linear-relu"), "{line}");
}

#[test]
fn tf32_only_when_asked_and_close() {
    let Some(rt) = gpu(CudaOptions { compute: ComputeMode::Tf32, ..fp32() }) else { return };
    assert_eq!(CudaOptions::default().compute, ComputeMode::Fp32);
    let program = linear_fused(64, 256, 64, Epilogue::ReluBias, "tf32");
    let weights = weights_for(&program, 11);
    let inputs = inputs_for(&program, 12);
    let out = run_cuda(&rt, &program, &weights, &inputs);
    let err = max_err_vs_reference(&program, &weights, &inputs, &out);
    println!("TF32 64x256x64 max error {err:.3e}");
    // 10-bit mantissas: each product is off by ~2^-11 relative; 256 of them in [-1, 1).
    assert!(err <= 5e-2, "{err}");
}

#[test]
fn models_and_matmul_forms_match_the_cpu() {
    // The transformer block and the ViT (random weights; scripts/gpu-check.sh also runs the
    // shipped digits ViT through the CLI): FP32 throughout, so within 1e-3 of the CPU and the
    // same argmax.
    let Some(rt) = gpu(fp32()) else { return };
    for program in model_programs().into_iter().chain(matmul_forms()) {
        let weights = weights_for(&program, 7);
        let inputs = inputs_for(&program, 8);
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let out = run_cuda(&rt, &program, &weights, &inputs);
        let err = max_abs_diff(&out, &cpu);
        println!("{}: max |cuda - cpu| = {err:.3e}", program.label);
        assert!(err <= 1e-3, "{}: {err}", program.label);
        if program.label.starts_with("vit") {
            assert_eq!(argmax_rows(&out["y"]), argmax_rows(&cpu["y"]), "{}", program.label);
        }
    }
}

#[test]
fn shipped_transformer_and_vit_match_the_cpu() {
    // The bar: argmax identical, max |cuda - cpu| <= 1e-3 with COMPUTE_32F; the whole
    // digits test split (450 images).
    let Some(rt) = gpu(fp32()) else { return };
    for (program, weights, inputs) in shipped_models(450) {
        let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
        let out = run_cuda(&rt, &program, &weights, &inputs);
        let err = max_abs_diff(&out, &cpu);
        let same = argmax_last(&out["y"]) == argmax_last(&cpu["y"]);
        println!("{}: max |cuda - cpu| = {err:.3e}, argmax identical: {same}", program.label);
        assert!(err <= 1e-3, "{}: {err}", program.label);
        assert!(same, "{}: argmax differs", program.label);
    }
}

#[test]
fn random_programs_over_every_op_match_the_cpu_planned_and_poisoned() {
    let Some(planned_rt) = gpu(fp32()) else { return };
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let cases = random_tensor_programs(0..48);
    for (program, weights, inputs) in &cases {
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let planned = run_cuda(&planned_rt, program, weights, inputs);
        close_to_cpu(&program.label, &planned, &cpu);
        for (mode, rt) in [("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)] {
            let out = run_cuda(rt, program, weights, inputs);
            // Same kernels, same algorithms, same order: bit for bit.
            assert_eq!(
                bits(&out),
                bits(&planned),
                "{}: {mode} differs from planned",
                program.label
            );
        }
    }
    println!("{} random programs over every op: cuda matches the cpu", cases.len());
}

#[test]
fn a_gather_id_out_of_range_is_reported_by_the_device() {
    let Some(rt) = gpu(fp32()) else { return };
    let (program, weights, inputs) = bad_gather();
    let mut prepared = rt.prepare_cuda(&program, &weights).expect("prepare");
    let err = prepared.execute(&inputs).unwrap_err().to_string();
    assert_eq!(err, BAD_GATHER);
    // The record is reset on every execute: good ids run after a bad one.
    let good: Tensors =
        [("ids".to_string(), HostTensor::from_i64([2, 3], vec![0, 1, 1, 2, 3, 0]).unwrap())].into();
    prepared.execute(&good).expect("good ids after a bad execute");
}

#[test]
fn convolutions_and_takes_match_the_cpu_planned_and_poisoned() {
    // Every convolution kind (dense, grouped, depthwise, strided, dilated, padded; 1-D to 3-D;
    // sliced, permuted and transposed operands), every kernel epilogue, and the takes.
    let Some(planned_rt) = gpu(fp32()) else { return };
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let cases = spatial_cases();
    let mut worst = 0.0f64;
    for (program, weights, inputs) in &cases {
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        let planned = run_cuda(&planned_rt, program, weights, inputs);
        worst = worst.max(close_to_cpu(&program.label, &planned, &cpu));
        for (mode, rt) in [("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)] {
            let out = run_cuda(rt, program, weights, inputs);
            assert_eq!(
                bits(&out),
                bits(&planned),
                "{}: {mode} differs from planned",
                program.label
            );
        }
    }
    println!(
        "{} convolution and take programs: cuda matches the cpu (max |diff| {worst:.2e})",
        cases.len()
    );
}

#[test]
fn casts_and_args_match_the_cpu_bit_for_bit_planned_and_poisoned() {
    // Every cast pair at the edges of each conversion (NaN, saturation, negatives, i64 values
    // in both words, transposed and sliced views), argmax/argmin (ties, ±0, NaN, last of
    // equals, strided views), integer outputs read back with their type.
    let Some(planned_rt) = gpu(fp32()) else { return };
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let cases = integers::integer_programs();
    let mut elements = 0;
    for (program, weights, inputs) in &cases {
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        for (mode, rt) in
            [("planned", &planned_rt), ("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)]
        {
            let out = run_cuda(rt, program, weights, inputs);
            elements += assert_bit_identical(&format!("{} {mode}", program.label), &out, &cpu);
        }
    }
    println!(
        "{} cast and arg programs: cuda matches the cpu bit for bit, planned, no-reuse and \
         NaN-poisoned ({elements} elements)",
        cases.len()
    );
}

#[test]
fn a_take_index_out_of_range_is_reported_by_the_device() {
    let Some(rt) = gpu(fp32()) else { return };
    for empty in [false, true] {
        let (program, weights, inputs) = spatial::bad_take(empty);
        let mut prepared = rt.prepare_cuda(&program, &weights).expect("prepare");
        let err = prepared.execute(&inputs).unwrap_err().to_string();
        assert_eq!(err, BAD_TAKE, "empty {empty}");
        // The record is reset on every execute: good indices run after a bad one.
        let mut good = inputs.clone();
        good.insert("ids".into(), HostTensor::from_i64([3], vec![1, 3, -1]).unwrap());
        prepared.execute(&good).expect("good indices after a bad execute");
    }
}

#[test]
fn topk_and_gather_elements_match_the_cpu_bit_for_bit_planned_and_poisoned() {
    // Top-k along every axis with ties, ±0, NaNs and infinities, k = 1 to the axis' length,
    // strided and transposed views; gather_elements with i32/i64 and negative indices, views.
    let Some(planned_rt) = gpu(fp32()) else { return };
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let cases = selection::selection_programs();
    let mut elements = 0;
    for (program, weights, inputs) in &cases {
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        for (mode, rt) in
            [("planned", &planned_rt), ("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)]
        {
            let out = run_cuda(rt, program, weights, inputs);
            elements += assert_bit_identical(&format!("{} {mode}", program.label), &out, &cpu);
        }
    }
    println!(
        "{} top-k and gather_elements programs: cuda matches the cpu bit for bit, planned, \
         no-reuse and NaN-poisoned ({elements} elements)",
        cases.len()
    );
}

#[test]
fn a_gather_elements_index_out_of_range_is_reported_by_the_device() {
    let Some(rt) = gpu(fp32()) else { return };
    for negative in [false, true] {
        let (program, weights, inputs) = selection::bad_gather_elements(negative);
        let mut prepared = rt.prepare_cuda(&program, &weights).expect("prepare");
        let err = prepared.execute(&inputs).unwrap_err().to_string();
        assert_eq!(err, selection::bad_gather_elements_message(negative));
        // The record is reset on every execute: good indices run after a bad one.
        let mut good = inputs.clone();
        good.insert("idx".into(), HostTensor::from_i64([3, 2], vec![0, 1, -6, 5, 2, 3]).unwrap());
        let out = prepared.execute(&good).expect("good indices after a bad execute");
        let cpu = run(&program, CpuOptions::default(), &weights, &good);
        assert_bit_identical("good indices", &out, &cpu);
    }
}

#[test]
fn scatter_elements_match_the_cpu_bit_for_bit_planned_and_poisoned() {
    // Plain scatters to distinct elements, max/min/integer and exact float reductions with
    // several updates per element (order-independent bits), views, rank 3.
    let Some(planned_rt) = gpu(fp32()) else { return };
    let poisoned = gpu(CudaOptions { memory_debug: true, ..fp32() }).expect("device");
    let no_reuse = gpu(CudaOptions { placement: Placement::NoReuse, ..fp32() }).expect("device");
    let cases = scatter::scatter_programs();
    let mut elements = 0;
    for (program, weights, inputs) in &cases {
        let cpu = run(program, CpuOptions::default(), weights, inputs);
        for (mode, rt) in
            [("planned", &planned_rt), ("no-reuse", &no_reuse), ("nan-poisoned", &poisoned)]
        {
            let out = run_cuda(rt, program, weights, inputs);
            elements += assert_bit_identical(&format!("{} {mode}", program.label), &out, &cpu);
        }
    }
    // The order-dependent ones: an inexact float sum within rounding, plain duplicates one of
    // their updates.
    let (program, weights, inputs) = scatter::scatter_duplicates();
    let out = run_cuda(&planned_rt, &program, &weights, &inputs);
    let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
    for name in ["dup_add", "dup_mul", "dup_max", "dup_min"] {
        let pick = |t: &Tensors| -> Tensors { [(name.to_string(), t[name].clone())].into() };
        close_to_cpu(&format!("scatter-duplicates {name}"), &pick(&out), &pick(&cpu));
    }
    let plain = out["dup_none"].data();
    assert!([0.7f32, 1e8].contains(&plain[0]) && [0.2f32, -0.0].contains(&plain[3]), "{plain:?}");
    assert!([1.0f32 / 3.0, 3.0].contains(&plain[5]), "{plain:?}");
    println!(
        "{} scatter programs: cuda matches the cpu bit for bit, planned, no-reuse and \
         NaN-poisoned ({elements} elements)",
        cases.len()
    );
}

#[test]
fn a_scatter_elements_index_out_of_range_is_reported_by_the_device() {
    let Some(rt) = gpu(fp32()) else { return };
    for negative in [false, true] {
        let (program, weights, inputs) = scatter::bad_scatter_elements(negative);
        let mut prepared = rt.prepare_cuda(&program, &weights).expect("prepare");
        let err = prepared.execute(&inputs).unwrap_err().to_string();
        assert_eq!(err, scatter::bad_scatter_elements_message(negative));
        // The record is reset on every execute: good indices run after a bad one.
        let mut good = inputs.clone();
        good.insert("idx".into(), HostTensor::from_i64([3, 2], vec![0, 1, -6, 5, 2, 3]).unwrap());
        let out = prepared.execute(&good).expect("good indices after a bad execute");
        let cpu = run(&program, CpuOptions::default(), &weights, &good);
        assert_bit_identical("good indices", &out, &cpu);
    }
}

// ---------------------------------------------------------------------------------------------
// Benchmark (run with --ignored; scripts/gpu-check.sh does).

fn median(v: Vec<f64>) -> f64 {
    lumen_runtime::search::median(&v).unwrap_or(f64::NAN)
}

#[test]
#[ignore = "benchmark: prints fused vs unfused execute figures on a GPU"]
fn bench_linear_relu_fused_vs_unfused() {
    let Some(rt) = gpu(fp32()) else { return };
    let info = rt.device_info().clone();
    let peak = rt.peak();
    println!(
        "device: {} ({}), peak {:.1} TFLOP/s ({})",
        info.name,
        info.arch(),
        peak.flops / 1e12,
        peak.basis
    );
    println!(
        "{:<18} {:<8} {:>10} {:>11} {:>11} {:>10} {:>8}",
        "shape", "program", "slab B", "execute ms", "kernels ms", "TFLOP/s", "%peak"
    );
    for &(m, k, n, iters) in &[(64, 256, 64, 200), (4096, 4096, 4096, 20)] {
        let unfused = linear_relu_unfused(m, k, n, "linear-relu");
        let fused = linear_fused(m, k, n, Epilogue::ReluBias, "linear-relu");
        let weights = weights_for(&unfused, 5);
        let inputs = inputs_for(&unfused, 6);
        let flops = 2.0 * (m * n * k) as f64;
        for (name, program) in [("unfused", &unfused), ("fused", &fused)] {
            let mut prepared = rt.prepare_cuda(program, &weights).expect("prepare");
            for _ in 0..3 {
                prepared.execute(&inputs).expect("warm-up");
            }
            let mut total = Vec::new();
            let mut kernels = Vec::new();
            for _ in 0..iters {
                prepared.execute(&inputs).expect("execute");
                total.push(prepared.last_profile().map_or(0.0, |p| p.total_ms));
                kernels.push(prepared.last_kernel_ms().unwrap_or(0.0));
            }
            let (t, kms) = (median(total), median(kernels));
            let tflops = flops / (kms * 1e-3) / 1e12;
            println!(
                "{:<18} {:<8} {:>10} {:>11.4} {:>11.4} {:>10.2} {:>7.2}%",
                format!("{m}x{k}x{n}"),
                name,
                prepared.slab_bytes(),
                t,
                kms,
                tflops,
                100.0 * tflops * 1e12 / peak.flops
            );
        }
    }
}

/// Max pools (1-D to 3-D; strides, dilations, asymmetric pads, ceil mode; a channel slice)
/// over inputs full of NaNs of several payloads, both zeros and infinities: the emulated
/// `lumen_max_pool` kernel gives the CPU's bits (the first of equal values, a canonical NaN).
#[test]
fn emulated_max_pools_match_the_cpu_bit_for_bit() {
    let specials = [f32::NAN, f32::from_bits(0xffc0_0001), 0.0, -0.0, f32::INFINITY, -1.0, 0.5];
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 3, 9]);
    a.max_pool(&[3], &[2], &[2], &[(2, 1)], true).output("p1");
    let b = cx.input("b", [1, 4, 7, 6]).slice(1, 1, 4);
    b.max_pool(&[3, 2], &[2, 1], &[1, 2], &[(1, 0), (0, 1)], false).output("p2");
    b.max_pool(&[2, 2], &[2, 2], &[1, 1], &[(0, 0), (0, 0)], true).output("p2_ceil");
    let c = cx.input("c", [1, 2, 4, 5, 5]);
    c.max_pool(&[2, 3, 3], &[1, 2, 1], &[1, 1, 2], &[(1, 1), (0, 1), (2, 2)], false).output("p3");
    let program =
        cx.compile(&CompileOptions { name: "max-pools".into(), ..Default::default() }).unwrap();
    let specs = kernel_specs(&program);
    assert_eq!(specs.iter().filter(|s| **s == cuda::KernelSpec::MaxPool).count(), 4);
    let mut inputs = Tensors::new();
    for (name, shape) in [("a", vec![2, 3, 9]), ("b", vec![1, 4, 7, 6]), ("c", vec![1, 2, 4, 5, 5])]
    {
        let n: usize = shape.iter().product();
        let data = (0..n).map(|i| specials[(i * 7 + i / 3) % specials.len()]).collect();
        inputs.insert(name.into(), HostTensor::new(shape, data).unwrap());
    }
    let weights = Tensors::new();
    let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
    let emulated = cuda::emulate::emulate(&program, &weights, &inputs).unwrap();
    let elements = assert_bit_identical(&program.label, &emulated, &cpu);
    println!("max pools: emulated cuda plans match the cpu bit for bit ({elements} elements)");
}

/// A program over `seq <= 6` with a state `cache [total <= 8, 4]` appended to: a product with
/// a symbolic inner axis, a softmax over it, a fused bias; its weights.
fn symbolic_program() -> (Graph, Tensors) {
    use lumen_compiler::{DType, Dim};
    let mut cx = Graph::new();
    let seq = cx.symbol("seq", 6);
    let total = cx.symbol("total", 8);
    let x = cx.input_dims("x", [seq.into(), Dim::Fixed(4)], DType::F32);
    let mask = cx.input_dims("mask", [seq.into(), total.into()], DType::F32);
    let w = cx.weight("w", [4, 4]);
    let b = cx.weight("b", [4]);
    let cache = cx.state("cache", [total.into(), Dim::Fixed(4)]).append_rows(&x);
    let scores = x.matmul(cache.transpose(0, 1)) + &mask;
    (scores.softmax(-1).matmul(&cache).matmul(&w) + &b).relu().output("y");
    cache.sum(0, false).output("colsum");
    let mut weights = Tensors::new();
    weights.insert("w".into(), HostTensor::new([4, 4], wave(16, 0.3)).unwrap());
    weights.insert("b".into(), HostTensor::new([4], wave(4, 0.9)).unwrap());
    (cx, weights)
}

fn wave(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32) * k).sin()).collect()
}

/// The inputs of [`symbolic_program`] for `n` new rows after `past` written ones.
fn symbolic_inputs(n: usize, past: usize) -> Tensors {
    let mut inputs = Tensors::new();
    inputs.insert("x".into(), HostTensor::new([n, 4], wave(n * 4, 0.7 + past as f32)).unwrap());
    inputs.insert("mask".into(), HostTensor::zeros([n, past + n]).unwrap());
    inputs
}

/// Symbolic dimensions and a state through the launch plans: [`symbolic_program`] emulated at
/// several values against the CPU runtime (one execute each, the state's earlier rows zero on
/// both); an append lands in the state's last live rows.
#[test]
fn emulated_cuda_plans_bind_symbols_and_append_to_states() {
    let (cx, weights) = symbolic_program();
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap();
        for (n, past) in [(3, 0), (1, 3), (6, 2), (2, 5)] {
            let inputs = symbolic_inputs(n, past);
            let cpu = run(&program, CpuOptions::default(), &weights, &inputs);
            let emulated = cuda::emulate::emulate(&program, &weights, &inputs).expect("emulate");
            close_to_cpu(&format!("fuse {fuse} seq {n} past {past}"), &emulated, &cpu);
            assert_eq!(emulated["y"].shape(), [n, 4]);
        }
        let err = cuda::support::check_supported(&program);
        assert!(err.is_ok(), "the launch plans take symbols: {err:?}");
    }
}

/// On a GPU: one prepared program executed at a sequence of bindings (the state's rows kept
/// from one execute to the next, as a KV cache's), against the CPU runtime doing the same.
#[test]
fn cuda_binds_symbols_and_keeps_states_across_executes() {
    let Some(rt) = gpu(fp32()) else { return };
    let (cx, weights) = symbolic_program();
    for fuse in [false, true] {
        let program = cx.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap();
        let mut on_gpu = rt.prepare_cuda(&program, &weights).expect("prepare on CUDA");
        let mut on_cpu =
            CpuRuntime::new(CpuOptions::default()).prepare(&program, &weights).expect("prepare");
        let mut past = 0;
        for n in [3, 1, 1, 2, 1] {
            let inputs = symbolic_inputs(n, past);
            let got = on_gpu.execute(&inputs).expect("execute on CUDA");
            let want = on_cpu.execute(&inputs).expect("execute on the CPU");
            let err = max_rel_diff(&got, &want);
            assert!(err < 1e-4, "fuse {fuse} seq {n} past {past}: {err:.2e}");
            past += n;
        }
    }
}
