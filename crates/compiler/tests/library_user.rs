//! What a graph-compiler engineer met using lumen as a library: figures that overflow, names
//! that escape the dump folder or break the one-line dumps, errors that differ with fusion,
//! and weights the runtime had to upload on every execute.

use lumen_compiler::{
    BufferRole, CompileError, CompileOptions, CompiledProgram, Graph, LlirOp, compile_hlir,
    fusion::{self, FusionConfig},
    programs,
};

fn unfused(name: &str) -> CompileOptions {
    CompileOptions { fuse: false, name: name.to_string(), ..CompileOptions::default() }
}

fn overlaps(p: &CompiledProgram, a: usize, b: usize) -> bool {
    let (oa, ra) = (p.plan.offsets[a], p.plan.reserved[a]);
    let (ob, rb) = (p.plan.offsets[b], p.plan.reserved[b]);
    oa < ob + rb && ob < oa + ra
}

/// Buffers whose reserved bytes the plan also gives to buffer `id`.
fn sharing(p: &CompiledProgram, id: &str) -> Vec<String> {
    let i = p.llir.buffers.iter().position(|b| b.id == id).unwrap();
    (0..p.llir.buffers.len())
        .filter(|&j| j != i && overlaps(p, i, j))
        .map(|j| p.llir.buffers[j].id.clone())
        .collect()
}

// ---- 1. figures that overflow saturate, never panic or wrap ----

#[test]
fn a_huge_matmul_saturates_its_flops() {
    // 2 * m * n * k = 2^64: one past u64::MAX.
    let side = 1usize << 21;
    let g = programs::linear_relu(side, side, side).unwrap();
    for fuse in [false, true] {
        let p = g.compile(&CompileOptions { fuse, ..unfused("huge") }).unwrap();
        assert_eq!(p.figures.flops, u64::MAX, "fuse={fuse}");
        let matmul = p.llir.nodes.iter().find(|n| matches!(n.op, LlirOp::LtMatmul { .. }));
        assert_eq!(matmul.unwrap().op.flops(), u64::MAX);
        // The byte figures are far from the limit and stay exact: x, w, b and the [m, n]
        // tensors are 4 * 2^42 bytes each.
        let t = 4u64 << 42;
        if fuse {
            assert_eq!(p.figures.dram_bytes as u64, 3 * t + (4 << 21));
        } else {
            // matmul reads x, w, writes t0; add reads t0, b (broadcast), writes t1; relu t1 -> y.
            assert_eq!(p.figures.dram_bytes as u64, 7 * t + (4 << 21));
        }
    }
}

#[test]
fn op_flops_saturate_for_every_op() {
    let big = usize::MAX;
    use lumen_compiler::{ElemOp, Epilogue, ReduceOp, UnaryOp};
    let gelu = ElemOp::Unary(UnaryOp::Gelu);
    for op in [
        LlirOp::LtMatmul { batch: 1, m: big, k: big, n: big, epilogue: Epilogue::GeluBias },
        LlirOp::LtMatmul { batch: 1, m: 1 << 40, k: 1, n: 1 << 40, epilogue: Epilogue::Gelu },
        LlirOp::LtMatmul { batch: big, m: 1, k: 1, n: 1, epilogue: Epilogue::Default },
        LlirOp::Map { op: gelu, len: big },
        LlirOp::Reduce { op: ReduceOp::Sum, axis: 0, len: big, extent: 2 },
    ] {
        assert_eq!(op.flops(), u64::MAX, "{op:?}");
    }
    // Small ones stay exact: 2*64*64*256 + 2*64*64 (bias and relu).
    let golden = LlirOp::LtMatmul { batch: 1, m: 64, k: 256, n: 64, epilogue: Epilogue::ReluBias };
    assert_eq!(golden.flops(), 2 * 64 * 64 * 256 + 2 * 64 * 64);
    let batched = LlirOp::LtMatmul { batch: 8, m: 16, k: 16, n: 16, epilogue: Epilogue::Default };
    assert_eq!(batched.flops(), 8 * 2 * 16 * 16 * 16);
    assert_eq!(LlirOp::Map { op: gelu, len: 10 }.flops(), 80);
    let copy = ElemOp::Unary(UnaryOp::Contiguous);
    assert_eq!(LlirOp::Map { op: copy, len: 10 }.flops(), 0);
    assert_eq!(LlirOp::Reduce { op: ReduceOp::Max, axis: 1, len: 4, extent: 16 }.flops(), 64);
}

// ---- 2. names ----

#[test]
fn program_names_that_are_not_plain_file_names_are_refused_at_compile_time() {
    let g = programs::linear_relu(4, 8, 4).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for bad in
        ["/tmp/lumen-escaped", "sub/dir", "../x", "..", ".hidden", "", "a b", "a\\b", "a\nb", "é"]
    {
        for fuse in [false, true] {
            let options = CompileOptions {
                fuse,
                name: bad.to_string(),
                dump_dir: Some(dir.path().join("dumps")),
                ..CompileOptions::default()
            };
            let err = g.compile(&options).unwrap_err();
            assert!(
                matches!(&err, CompileError::ProgramName { name, .. } if name == bad),
                "{bad:?} fuse={fuse}: {err}"
            );
            // Without a dump folder too: the name is refused before it is ever a path.
            let options = CompileOptions { dump_dir: None, ..options };
            assert!(matches!(g.compile(&options), Err(CompileError::ProgramName { .. })));
        }
        let hlir = g.hlir();
        let err = compile_hlir(&hlir, bad, &unfused("ok")).unwrap_err();
        assert!(matches!(err, CompileError::ProgramName { .. }), "{bad:?}: {err}");
        let err = fusion::explore(&hlir, bad, &CompileOptions::default(), &FusionConfig::default())
            .unwrap_err();
        assert!(matches!(err, CompileError::ProgramName { .. }), "{bad:?}: {err}");
    }
    // Nothing was written anywhere.
    assert!(!dir.path().join("dumps").exists());
    assert!(!std::path::Path::new("/tmp/lumen-escaped-fused.llir.txt").exists());

    let err = g.compile(&unfused("sub/dir")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "program name \"sub/dir\" cannot label dump files: '/' is not allowed (use ASCII letters, \
         digits, '_', '-' and '.', not starting with '.', at most 200 bytes)"
    );
    let err = g.compile(&unfused("../x")).unwrap_err();
    assert!(err.to_string().contains(": it starts with '.' ("), "{err}");
    let err = g.compile(&unfused("a\tb")).unwrap_err();
    assert!(err.to_string().contains(": '\\t' is not allowed ("), "{err}");
    let long = "a".repeat(201);
    let err = g.compile(&unfused(&long)).unwrap_err();
    assert!(err.to_string().contains("is 201 bytes long"), "{err}");
}

#[test]
fn plain_program_names_compile_and_dump_inside_the_folder() {
    let g = programs::linear_relu(4, 8, 4).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for name in ["linear-relu", "mlp", "digits_mlp", "v1.2", "A-b_c.3", &"a".repeat(200)] {
        let options = CompileOptions {
            name: name.to_string(),
            dump_dir: Some(dir.path().to_path_buf()),
            ..CompileOptions::default()
        };
        let p = g.compile(&options).unwrap();
        assert_eq!(p.label, format!("{name}-fused"));
        assert!(dir.path().join(format!("{name}-fused.llir.txt")).is_file());
    }
}

#[test]
fn sanitized_names_always_compile() {
    use lumen_compiler::compile::{sanitize_program_name, validate_program_name};
    for (raw, clean) in [
        ("digits_mlp", "digits_mlp"),
        ("my model", "my_model"),
        ("../x", "_._x"),
        (".hidden", "_hidden"),
        ("", "program"),
        ("é", "_"),
    ] {
        assert_eq!(sanitize_program_name(raw), clean, "{raw:?}");
        validate_program_name(clean).unwrap();
    }
    assert_eq!(sanitize_program_name(&"x".repeat(500)).len(), 200);
}

#[test]
fn tensor_names_are_identifier_like() {
    for bad in ["a b", "a,b", "w[0]", "\"w\"", "'w'", "k=v", "a\nb", "tab\t", "x/y", "é", "a;b"] {
        for kind in ["input", "weight", "output"] {
            let mut cx = Graph::new();
            let (x_name, w_name, y_name) = match kind {
                "input" => (bad, "w", "y"),
                "weight" => ("x", bad, "y"),
                _ => ("x", "w", bad),
            };
            let line = line!() + 1;
            let x = cx.input(x_name, [2, 3]);
            let w = cx.weight(w_name, [3, 4]);
            x.matmul(w).relu().output(y_name);
            for fuse in [false, true] {
                let err = cx.compile(&CompileOptions { fuse, ..unfused("p") }).unwrap_err();
                let CompileError::BadName { kind: got, name, location, .. } = &err else {
                    panic!("{bad:?} as {kind}: {err}");
                };
                assert_eq!((*got, name.as_str()), (kind, bad));
                // The user's line: the call that named the tensor.
                let want = match kind {
                    "input" => line,
                    "weight" => line + 1,
                    _ => line + 2,
                };
                assert_eq!(location.line(), want, "{err}");
                assert!(location.file().ends_with("library_user.rs"));
            }
        }
    }
    let mut cx = Graph::new();
    let x = cx.input("x y", [2, 3]);
    let w = cx.weight("w", [3, 4]);
    x.matmul(w).relu().output("y");
    let err = cx.compile(&unfused("p")).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "input name \"x y\" is not identifier-like: ' ' is not allowed (a tensor name \
             uses ASCII letters, digits, '_', '.' and '-': dumps print one entry per line) (at "
        ),
        "{err}"
    );
}

#[test]
fn identifier_like_tensor_names_still_compile() {
    let mut cx = Graph::new();
    let x = cx.input("layers.0.input", [2, 3]);
    let w = cx.weight("model.w-1_a", [3, 4]);
    let b = cx.weight("B1", [4]);
    (x.matmul(w) + b).relu().output("logits");
    let p = cx.compile(&unfused("p")).unwrap();
    let ids: Vec<&str> = p.llir.buffers.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["layers.0.input", "model.w-1_a", "B1", "workspace", "t0", "t1", "logits"]);
    // The built-in programs (x, w, b, y, w1, b1, ...) are unaffected.
    programs::linear_relu(64, 256, 64).unwrap().compile(&CompileOptions::default()).unwrap();
    programs::mlp(&[64, 128, 64, 10], 32).unwrap().compile(&CompileOptions::default()).unwrap();
}

// ---- 3. an oversized program fails the same way with and without fusion ----

#[test]
fn an_oversized_program_reports_the_planner_error_with_fusion_too() {
    let mut cx = Graph::new();
    let x = cx.input("x", [1usize << 61]);
    x.relu().gelu().output("y");
    let plain = cx.compile(&unfused("big")).unwrap_err();
    assert_eq!(plain.to_string(), "planning failed: slab naive_bytes overflows usize");
    let fused = cx.compile(&CompileOptions { fuse: true, ..unfused("big") }).unwrap_err();
    assert_eq!(fused, plain);
    let explored =
        fusion::explore(&cx.hlir(), "big", &CompileOptions::default(), &FusionConfig::default())
            .unwrap_err();
    assert_eq!(explored, plain);

    // A fusible program as large: the matmul reads 2^63 + 2^63 bytes, so its e-graph cost
    // saturates as well.
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 1usize << 61]);
    let w = cx.weight("w", [1usize << 61, 1]);
    let b = cx.weight("b", [1]);
    (x.matmul(w) + b).relu().output("y");
    let plain = cx.compile(&unfused("big")).unwrap_err();
    assert!(matches!(plain, CompileError::Plan(_)), "{plain}");
    let fused = cx.compile(&CompileOptions { fuse: true, ..unfused("big") }).unwrap_err();
    assert_eq!(fused, plain);
}

// ---- 4. resident weights ----

#[test]
fn resident_weights_keep_their_bytes_until_readback() {
    let g = programs::mlp(&[64, 128, 64, 10], 32).unwrap();
    for fuse in [false, true] {
        let base = CompileOptions { fuse, ..unfused("mlp") };
        let reused = g.compile(&base).unwrap();
        assert!(!sharing(&reused, "w1").is_empty(), "fuse={fuse}: w1 is not reused");
        let resident =
            g.compile(&CompileOptions { resident_weights: true, ..base.clone() }).unwrap();
        let readback = resident.llir.nodes.len() - 1;
        for (i, b) in resident.llir.buffers.iter().enumerate() {
            if b.role == BufferRole::Weight {
                assert_eq!(b.uses.last(), Some(&readback), "{}", b.id);
                assert!(sharing(&resident, &b.id).is_empty(), "{} shares its bytes", b.id);
                // Only the uses change: every other buffer keeps its uses.
                let mut plain = reused.llir.buffers[i].uses.clone();
                plain.push(readback);
                assert_eq!(b.uses, plain);
            } else {
                assert_eq!(b.uses, reused.llir.buffers[i].uses, "{}", b.id);
            }
        }
        // The price here: 16,384 bytes unfused (t1 could sit where x was, t2 no longer where
        // w1 was); nothing fused, where only y reused w1's bytes. The lower bound is the same:
        // the peak is at the first matmul, when every weight is live anyway.
        let slab = (reused.figures.slab_bytes, resident.figures.slab_bytes);
        assert_eq!(slab, if fuse { (1_142_272, 1_142_272) } else { (1_142_272, 1_158_656) });
        assert_eq!(resident.figures.lower_bound, reused.figures.lower_bound);
        // Weights all live at once: at least their sum plus the workspace of the live matmul.
        let weights: usize = resident
            .llir
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.role == BufferRole::Weight)
            .map(|(i, _)| resident.plan.reserved[i])
            .sum();
        assert!(resident.figures.slab_bytes >= weights + (1 << 20));
        // The LLIR itself is the same program: same nodes, same figures other than memory.
        assert_eq!(resident.llir.nodes, reused.llir.nodes);
        assert_eq!(resident.figures.flops, reused.figures.flops);
        assert_eq!(resident.figures.dram_bytes, reused.figures.dram_bytes);
        assert_eq!(resident.figures.launches, reused.figures.launches);
    }
}

#[test]
fn resident_weights_are_off_by_default_and_keep_the_golden_plan() {
    assert!(!CompileOptions::default().resident_weights);
    let g = programs::linear_relu(64, 256, 64).unwrap();
    for fuse in [false, true] {
        let p = g.compile(&CompileOptions { fuse, ..unfused("linear-relu") }).unwrap();
        assert_eq!(p.figures.slab_bytes, 1_196_288);
        assert_eq!(p.figures.naive_bytes, if fuse { 1_196_288 } else { 1_229_056 });
        let w = p.llir.buffer("w").unwrap();
        assert_eq!(w.uses, [0, 1]);
    }
    // In the golden program nothing reuses the weights' bytes anyway: the same slab.
    let p =
        g.compile(&CompileOptions { resident_weights: true, ..unfused("linear-relu") }).unwrap();
    assert_eq!(p.figures.slab_bytes, 1_196_288);
    assert_eq!(p.llir.buffer("w").unwrap().uses, [0, 1, 4]);
}

// ---- 5. "unfused" is the program as written; the e-graph candidates share equal subterms ----

#[test]
fn unfused_computes_a_repeated_matmul_twice_and_the_candidates_once() {
    let mut cx = Graph::new();
    let x = cx.input("x", [8, 16]);
    let w = cx.weight("w", [16, 4]);
    x.matmul(&w).relu().output("a");
    x.matmul(&w).gelu().output("c");
    let matmuls = |p: &CompiledProgram| {
        p.llir.nodes.iter().filter(|n| matches!(n.op, LlirOp::LtMatmul { .. })).count()
    };
    let plain = cx.compile(&unfused("twice")).unwrap();
    assert_eq!((matmuls(&plain), plain.figures.launches), (2, 4));
    let e =
        fusion::explore(&cx.hlir(), "twice", &unfused("twice"), &FusionConfig::default()).unwrap();
    let seen: Vec<(&str, usize, usize)> = e
        .candidates
        .iter()
        .map(|c| (c.label.as_str(), matmuls(&c.program), c.program.figures.launches))
        .collect();
    // Every extraction builds the shared product once; fusing either activation would
    // recompute it, so no epilogue is chosen and the policies other than unfused coincide.
    assert_eq!(seen, [("unfused", 2, 4), ("bias", 1, 3)]);
    let fused = cx.compile(&CompileOptions { fuse: true, ..unfused("twice") }).unwrap();
    assert_eq!((matmuls(&fused), fused.figures.launches), (1, 3));
}
