//! The `transformer` program against PyTorch: data/transformer_block.safetensors (made by
//! data/make_transformer_block.py with torch.nn.TransformerEncoderLayer, pre-LN, tanh GELU)
//! holds random weights, an input batch and PyTorch's float64 outputs. lumen builds the same
//! network with its DSL, runs it on the CPU runtime, fused and unfused, planned, without reuse
//! and with NaN poisoning, and must agree within 1e-4; the f64 reference interpreter must agree
//! within 1e-9 (it sums in f64 like PyTorch did).

mod common;

use std::path::PathBuf;

use common::transformer_sizes;
use lumen_compiler::programs::{TransformerSizes, transformer};
use lumen_compiler::{CompileOptions, CompiledProgram};
use lumen_runtime::layout::Placement;
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};

struct Fixture {
    sizes: TransformerSizes,
    weights: Tensors,
    x: HostTensor,
    y: Vec<f32>,
}

fn fixture() -> Fixture {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/transformer_block.safetensors");
    let bytes = std::fs::read(&path).expect("data/transformer_block.safetensors");
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("header");
    let meta = meta.metadata().clone().expect("metadata");
    let sizes = transformer_sizes(&meta);
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let tensor = |name: &str| {
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
    for name in st.names() {
        if name != "x" && name != "y" {
            weights.insert(name.to_string(), tensor(name));
        }
    }
    weights.sort_keys();
    Fixture { sizes, weights, x: tensor("x"), y: tensor("y").into_data() }
}

/// With `in_place`, every in-place mark is kept and planned, even where the compiler would drop
/// them (on this small block in-place reuse does not make the slab smaller, and the compiler
/// keeps marks only when they do not make it larger): the runtime must run any marked plan.
fn compile(f: &Fixture, fuse: bool, in_place: bool) -> CompiledProgram {
    let options = CompileOptions { fuse, name: "transformer".into(), ..Default::default() };
    let program = transformer(f.sizes).expect("sizes").compile(&options).expect("compiles");
    if !in_place {
        return program;
    }
    let mut llir = program.llir.clone();
    assert!(llir.mark_in_place() > 0);
    let slab = lumen_planner::SlabOptions::default();
    let plan = lumen_planner::plan_slab(&program.dag, &llir.slab_buffers(), &slab).expect("plans");
    lumen_planner::verify(&program.dag, &llir.slab_buffers(), &plan, &slab).expect("verifies");
    CompiledProgram { llir, plan, ..program }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn the_cpu_runtime_matches_pytorch_within_1e_4() {
    let f = fixture();
    assert_eq!(f.sizes.blocks, 2);
    let inputs: Tensors = [("x".to_string(), f.x.clone())].into();
    for fuse in [false, true] {
        let program = compile(&f, fuse, false);
        let mut outs = Vec::new();
        for (placement, memory_debug) in
            [(Placement::Planned, false), (Placement::NoReuse, false), (Placement::Planned, true)]
        {
            let rt = CpuRuntime::new(CpuOptions { placement, memory_debug, ..Default::default() });
            let mut prepared = rt.prepare(&program, &f.weights).expect("prepare");
            let out = prepared.execute(&inputs).expect("execute");
            let y = out["y"].data().to_vec();
            let err = max_abs_diff(&y, &f.y);
            assert!(
                err <= 1e-4,
                "fuse={fuse} {placement:?} debug={memory_debug}: max error {err:e}"
            );
            println!(
                "fuse={fuse} {placement:?} memory_debug={memory_debug}: max |lumen - PyTorch| = {err:.3e}"
            );
            outs.push(y);
        }
        // Reuse and poisoning change no bit.
        assert_eq!(outs[0], outs[1], "planned vs no reuse, fuse={fuse}");
        assert_eq!(outs[0], outs[2], "NaN poisoning, fuse={fuse}");

        // In-place reuse (elementwise outputs over their dying operands) changes no bit either,
        // planned or NaN-poisoned; the marked pairs really share bytes.
        let in_place = compile(&f, fuse, true);
        let shared = in_place
            .llir
            .buffers
            .iter()
            .enumerate()
            .filter(|(i, b)| {
                b.in_place_of.is_some_and(|a| in_place.plan.offsets[a] == in_place.plan.offsets[*i])
            })
            .count();
        assert!(shared > 0, "fuse={fuse}: no output took its operand's bytes");
        for memory_debug in [false, true] {
            let rt = CpuRuntime::new(CpuOptions { memory_debug, ..Default::default() });
            let mut prepared = rt.prepare(&in_place, &f.weights).expect("prepare");
            let y = prepared.execute(&inputs).expect("execute")["y"].data().to_vec();
            assert_eq!(outs[0], y, "in place, fuse={fuse}, poisoned={memory_debug}");
        }

        let reference = execute_f64(&program.llir, &f.weights, &inputs).expect("reference");
        let worst = reference["y"]
            .data
            .iter()
            .zip(&f.y)
            .map(|(r, y)| (r - f64::from(*y)).abs())
            .fold(0.0, f64::max);
        // PyTorch's f64 result rounded to f32: half an ulp of values below 8.
        assert!(worst <= 1e-6, "reference vs PyTorch: {worst:e}");
        println!("fuse={fuse}: max |f64 reference - PyTorch| = {worst:.3e}");
    }
}
