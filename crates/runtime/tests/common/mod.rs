//! Helpers shared by the runtime's integration tests: seeded data, hand-built HLIR (for fused
//! epilogues), runs in every mode, comparisons against the f64 reference.
#![allow(dead_code)]

use lumen_compiler::{
    BinaryOp, BufferRole, CompileOptions, CompiledProgram, DType, ElemOp, Epilogue, Graph, Hlir,
    HlirOp, SourceLocation, UnaryOp, compile_hlir,
};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Placement, Runtime, Tensors};
use petgraph::graph::NodeIndex;

/// The transformer's sizes from a fixture's safetensors metadata (`batch`, `seq`, `width`,
/// `heads`, `ffn`, `blocks`, as `data/make_transformer_block.py` writes them).
///
/// # Panics
/// When a key is missing or not a whole number (a broken fixture).
pub fn transformer_sizes<M>(meta: &M) -> lumen_compiler::programs::TransformerSizes
where
    M: for<'k> std::ops::Index<&'k str, Output = String>,
{
    let size = |k: &str| meta[k].parse::<usize>().expect(k);
    lumen_compiler::programs::TransformerSizes {
        batch: size("batch"),
        seq: size("seq"),
        width: size("width"),
        heads: size("heads"),
        ffn: size("ffn"),
        blocks: size("blocks"),
    }
}

/// splitmix64: a tiny seeded generator, so test data never depends on a crate's algorithm.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

pub fn tensor(shape: &[usize], data: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), data.to_vec()).expect("test tensor")
}

/// Seeded values for every buffer of `role` in `program`.
pub fn tensors_for(program: &CompiledProgram, role: BufferRole, seed: u64) -> Tensors {
    let mut rng = Rng(seed);
    program
        .llir
        .buffers
        .iter()
        .filter(|b| b.role == role)
        .map(|b| {
            let n: usize = b.shape.iter().product();
            let data = (0..n).map(|_| rng.f32()).collect();
            (b.id.clone(), HostTensor::new(b.shape.clone(), data).expect("shape"))
        })
        .collect()
}

pub fn weights_for(program: &CompiledProgram, seed: u64) -> Tensors {
    tensors_for(program, BufferRole::Weight, seed)
}

pub fn inputs_for(program: &CompiledProgram, seed: u64) -> Tensors {
    tensors_for(program, BufferRole::Input, seed)
}

/// The DSL program compiled without fusion.
pub fn compile(graph: &Graph, name: &str) -> CompiledProgram {
    let options =
        CompileOptions { name: name.to_string(), fuse: false, ..CompileOptions::default() };
    graph.compile(&options).expect("compile")
}

/// A hand-built (possibly fused) HLIR compiled as is, labelled `{name}-fused`.
pub fn compile_fused(hlir: &Hlir, name: &str) -> CompiledProgram {
    let options =
        CompileOptions { name: name.to_string(), fuse: true, ..CompileOptions::default() };
    compile_hlir(hlir, name, &options).expect("compile_hlir")
}

/// The three ways the CPU runtime can place a program: they must agree bit for bit.
pub fn modes() -> Vec<(&'static str, CpuOptions)> {
    vec![
        ("planned", CpuOptions::default()),
        ("no-reuse", CpuOptions { placement: Placement::NoReuse, ..CpuOptions::default() }),
        ("nan-poisoned", CpuOptions { memory_debug: true, ..CpuOptions::default() }),
    ]
}

/// Prepares and executes once.
pub fn run(
    program: &CompiledProgram,
    options: CpuOptions,
    weights: &Tensors,
    inputs: &Tensors,
) -> Tensors {
    let mut prepared = CpuRuntime::new(options).prepare(program, weights).expect("prepare");
    prepared.execute(inputs).expect("execute")
}

/// Outputs as raw bits, for bit-identity checks (NaN-safe).
pub fn bits(outputs: &Tensors) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    outputs
        .iter()
        .map(|(k, t)| {
            (k.clone(), t.shape().to_vec(), t.data().iter().map(|v| v.to_bits()).collect())
        })
        .collect()
}

/// Largest |got - want| over all outputs, against the f64 reference; the output names and
/// shapes must match exactly.
pub fn max_err_vs_reference(
    program: &CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
    got: &Tensors,
) -> f64 {
    let want = execute_f64(&program.llir, weights, inputs).expect("reference");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "output names and order"
    );
    let mut worst = 0.0f64;
    for (name, w) in &want {
        let g = &got[name];
        assert_eq!(g.shape(), w.shape.as_slice(), "shape of {name}");
        for (a, b) in g.data().iter().zip(&w.data) {
            let e = (f64::from(*a) - b).abs();
            assert!(e.is_finite(), "{name}: {a} vs {b}");
            worst = worst.max(e);
        }
    }
    worst
}

/// Builds HLIR directly, for programs the DSL cannot express before fusion exists (matmul
/// nodes with epilogues).
#[derive(Default)]
pub struct HlirBuilder {
    pub hlir: Hlir,
}

impl HlirBuilder {
    #[track_caller]
    fn add(&mut self, op: HlirOp, operands: &[NodeIndex]) -> NodeIndex {
        self.hlir.add_op(op, operands, SourceLocation::caller())
    }

    pub fn input(&mut self, name: &str, shape: &[usize]) -> NodeIndex {
        self.add(HlirOp::Input { name: name.into(), shape: shape.to_vec(), dtype: DType::F32 }, &[])
    }

    pub fn weight(&mut self, name: &str, shape: &[usize]) -> NodeIndex {
        self.add(
            HlirOp::Weight { name: name.into(), shape: shape.to_vec(), dtype: DType::F32 },
            &[],
        )
    }

    /// `matmul(a, b)` with `epilogue`; `bias` must be given exactly when the epilogue has one.
    pub fn matmul(
        &mut self,
        a: NodeIndex,
        b: NodeIndex,
        bias: Option<NodeIndex>,
        epilogue: Epilogue,
    ) -> NodeIndex {
        let mut ops = vec![a, b];
        ops.extend(bias);
        self.add(HlirOp::Matmul { epilogue }, &ops)
    }

    pub fn add_op(&mut self, a: NodeIndex, b: NodeIndex) -> NodeIndex {
        self.add(HlirOp::Map(ElemOp::Binary(BinaryOp::Add)), &[a, b])
    }

    pub fn relu(&mut self, a: NodeIndex) -> NodeIndex {
        self.add(HlirOp::Map(ElemOp::Unary(UnaryOp::Relu)), &[a])
    }

    pub fn gelu(&mut self, a: NodeIndex) -> NodeIndex {
        self.add(HlirOp::Map(ElemOp::Unary(UnaryOp::Gelu)), &[a])
    }

    pub fn output(&mut self, a: NodeIndex, name: &str) -> NodeIndex {
        self.add(HlirOp::Output { name: name.into() }, &[a]);
        a
    }
}

/// The size limits and parallel-branch epilogues of a [`random_program`].
pub struct RandomProgramShape {
    /// The batch is in `1..=max_batch`.
    pub max_batch: usize,
    /// Every layer's width is in `1..=max_width`.
    pub max_width: usize,
    /// A parallel branch's matmul takes the first or the second, at random.
    pub branch_epilogues: [Epilogue; 2],
}

/// A random program from `seed`: 1 to 4 MLP layers, fused or not, parallel branches from one
/// input, residual adds, several outputs declared in random order. Returns it with a one-line
/// description for failure messages (it names every epilogue).
pub fn random_program(seed: u64, shape: &RandomProgramShape) -> (CompiledProgram, String) {
    let mut rng = Rng(seed);
    let mut h = HlirBuilder::default();
    let batch = 1 + rng.below(shape.max_batch);
    let mut width = 1 + rng.below(shape.max_width);
    let mut desc = format!("x[{batch},{width}]");
    let mut cur = h.input("x", &[batch, width]);
    let mut tensors: Vec<NodeIndex> = Vec::new();
    let depth = 1 + rng.below(4);
    for l in 1..=depth {
        let out_w = if rng.below(3) == 0 { width } else { 1 + rng.below(shape.max_width) };
        let w = h.weight(&format!("w{l}"), &[width, out_w]);
        let b = h.weight(&format!("b{l}"), &[out_w]);
        let act = rng.below(3);
        let mut t = if rng.below(2) == 0 {
            let epilogue = [Epilogue::Bias, Epilogue::ReluBias, Epilogue::GeluBias][act];
            desc += &format!(" L{l}:{}", epilogue.name());
            h.matmul(cur, w, Some(b), epilogue)
        } else {
            desc += &format!(" L{l}:mm+b{}", ["", "+relu", "+gelu"][act]);
            let mm = h.matmul(cur, w, None, Epilogue::Default);
            let t = h.add_op(mm, b);
            match act {
                1 => h.relu(t),
                2 => h.gelu(t),
                _ => t,
            }
        };
        if rng.below(3) == 0 {
            // A parallel branch from the same input: its matmul may run before or after the
            // main one, so the planner must keep both outputs apart.
            let v = h.weight(&format!("v{l}"), &[width, out_w]);
            let epilogue = shape.branch_epilogues[rng.below(2)];
            let p = h.matmul(cur, v, None, epilogue);
            t = h.add_op(t, p);
            desc += &format!("+branch:{}", epilogue.name());
        }
        if out_w == width && rng.below(2) == 0 {
            t = h.add_op(t, cur);
            desc += "+residual";
        }
        tensors.push(t);
        cur = t;
        width = out_w;
    }
    // The last tensor and a random subset of the others are outputs, declared in random order.
    let mut outs: Vec<usize> = (0..tensors.len() - 1).filter(|_| rng.below(3) == 0).collect();
    outs.push(tensors.len() - 1);
    for i in (1..outs.len()).rev() {
        outs.swap(i, rng.below(i + 1));
    }
    for &i in &outs {
        h.output(tensors[i], &format!("y{i}"));
    }
    desc += &format!(" outputs {outs:?}");
    (compile_fused(&h.hlir, &format!("random-{seed}")), desc)
}
