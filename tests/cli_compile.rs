//! End-to-end: the built `lumen` binary's `compile` subcommand.

use std::process::Command;

use serde_json::Value;

mod common;

use common::{entries, error_line_no_panic as error_line, json, lumen};

#[test]
fn linear_relu_no_fuse_json_is_the_golden_table() {
    let v = json(&["compile", "linear-relu", "--no-fuse", "--json"]);
    let nodes = v["nodes"].as_array().unwrap();
    let op_of = |id: &Value| nodes[id.as_u64().unwrap() as usize]["op"].as_str().unwrap();
    let ops: Vec<&str> = nodes.iter().map(|n| n["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["upload", "lt_matmul", "add", "relu", "readback"]);
    assert_eq!(nodes[1]["epilogue"], "DEFAULT");
    // The bias is read broadcast over the rows: stride 0 along them.
    assert_eq!(nodes[2]["reads"], serde_json::json!(["t0", "b"]));
    assert_eq!(
        nodes[2]["views"][1],
        serde_json::json!({"shape": [64, 64], "strides": [0, 1], "offset": 0})
    );
    let table: [(&str, u64, &[&str], u64); 7] = [
        ("x", 65_536, &["upload", "lt_matmul"], 0),
        ("w", 65_536, &["upload", "lt_matmul"], 65_536),
        ("b", 256, &["upload", "add"], 131_072),
        ("workspace", 1_048_576, &["lt_matmul"], 131_328),
        ("t0", 16_384, &["lt_matmul", "add"], 1_179_904),
        ("t1", 16_384, &["add", "relu"], 0),
        ("y", 16_384, &["relu", "readback"], 16_384),
    ];
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers.len(), table.len());
    for (b, (id, bytes, uses, offset)) in buffers.iter().zip(table) {
        assert_eq!(b["id"], id);
        assert_eq!(b["bytes"], bytes, "{id}");
        assert_eq!(b["offset"], offset, "{id}");
        let names: Vec<&str> = b["uses"].as_array().unwrap().iter().map(op_of).collect();
        assert_eq!(names, uses, "{id}");
    }
    assert_eq!(v["slab_bytes"], 1_196_288);
    assert_eq!(v["naive_bytes"], 1_229_056);
    assert_eq!(v["lower_bound"], 1_196_288);
    assert_eq!(v["launches"], 3);
    assert_eq!(v["dram_bytes"], 213_248);
}

#[test]
fn text_output_has_llir_plan_and_figures() {
    let out = lumen(&["compile", "mlp", "--no-fuse", "--layers", "64,128,64,10", "--batch", "32"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# lumen LLIR: mlp-unfused\n"), "{text}");
    assert!(text.contains("\n# lumen plan: mlp-unfused\n"), "{text}");
    assert!(text.contains("\nlaunches     8\n"), "{text}");
    assert!(text.contains("\nslab_bytes   1142272\n"), "{text}");
}

#[test]
fn sizes_and_workspace_flags_reach_the_plan() {
    let v = json(&[
        "compile",
        "linear-relu",
        "--m",
        "8",
        "--k",
        "16",
        "--n",
        "4",
        "--json",
        "--workspace-bytes",
        "0",
    ]);
    // No workspace bytes: the matmul has no workspace buffer at all (a zero-byte one would
    // still reserve 256 bytes of the slab).
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers[0]["bytes"], 8 * 16 * 4);
    let ids: Vec<&str> = buffers.iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["x", "w", "b", "y"]);
    assert!(v["nodes"].as_array().unwrap().iter().all(|n| n.get("workspace").is_none()));
    assert_eq!(v["options"]["workspace_bytes"], 0);
    // --workspace-bytes overrides the target's.
    let v =
        json(&["compile", "linear-relu", "--target", "cpu", "--workspace-bytes", "4096", "--json"]);
    assert_eq!(v["target"], "cpu");
    assert_eq!(v["buffers"][3]["id"], "workspace");
    assert_eq!(v["buffers"][3]["bytes"], 4096);
}

/// `--target cpu` compiles for the CPU runtime: no cuBLASLt workspace, the same LLIR
/// otherwise; the default (and `--target cuda`) keeps the 1 MiB workspace of every golden plan.
#[test]
fn target_sets_the_workspace() {
    let cuda = json(&["compile", "linear-relu", "--json"]);
    assert_eq!(cuda["target"], "cuda");
    assert_eq!(cuda["slab_bytes"], 1_196_288);
    assert_eq!(cuda["options"]["workspace_bytes"], 1 << 20);
    assert_eq!(json(&["compile", "linear-relu", "--target", "cuda", "--json"]), cuda);
    let cpu = json(&["compile", "linear-relu", "--target", "cpu", "--json"]);
    assert_eq!(cpu["target"], "cpu");
    assert_eq!(cpu["options"]["workspace_bytes"], 0);
    assert_eq!(cpu["options"]["alignment"], 256);
    // x [64, 256], w [256, 64], b [64], y [64, 64]: 65536 + 65536 + 256 + 16384 bytes.
    assert_eq!(cpu["slab_bytes"], 147_712);
    assert_eq!(cpu["launches"], cuda["launches"]);
    assert_eq!(cpu["flops"], cuda["flops"]);
    // The digits-sized MLP: 1 MiB per matmul is gone.
    let mlp = |t: &str| json(&["compile", "mlp", "--target", t, "--json"])["slab_bytes"].clone();
    assert!(mlp("cpu").as_u64().unwrap() < 100_000, "{}", mlp("cpu"));
    assert!(mlp("cuda").as_u64().unwrap() > 1 << 20, "{}", mlp("cuda"));
    // An unknown target is a usage error naming the choices.
    let out = lumen(&["compile", "mlp", "--target", "tpu"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'tpu' for '--target <TARGET>'"), "{err}");
    assert!(err.contains("[possible values: cpu, cuda]"), "{err}");
}

#[test]
fn dump_dir_and_env_write_files() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("flag");
    let out = lumen(&["compile", "linear-relu", "--no-fuse", "--dump-dir", flag.to_str().unwrap()]);
    assert!(out.status.success());
    let txt = std::fs::read_to_string(flag.join("linear-relu-unfused.llir.txt")).unwrap();
    assert!(txt.contains("node 1 lt_matmul m=64 k=256 n=64 epilogue=DEFAULT"), "{txt}");
    assert!(flag.join("linear-relu-unfused.plan.txt").exists());
    assert!(flag.join("linear-relu-unfused.llir.dot").exists());
    assert!(flag.join("linear-relu-unfused.plan.svg").exists());

    let env_dir = dir.path().join("env");
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["compile", "mlp", "--no-fuse", "--json"])
        .env("LLIR_DUMP_DIR", &env_dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let plan = std::fs::read_to_string(env_dir.join("mlp-unfused.plan.txt")).unwrap();
    assert!(plan.contains("slab_bytes   1142272"), "{plan}");
}

#[test]
fn a_dump_set_that_cannot_be_written_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    // An earlier dump, and a directory where the plan text would go.
    std::fs::write(dumps.join("linear-relu-unfused.llir.txt"), "old").unwrap();
    std::fs::create_dir(dumps.join("linear-relu-unfused.plan.txt")).unwrap();
    let args = ["compile", "linear-relu", "--no-fuse", "--dump-dir", dumps.to_str().unwrap()];
    let e = error_line(&args);
    assert_eq!(
        e,
        format!(
            "error: cannot write dump {}: is a directory\n",
            dumps.join("linear-relu-unfused.plan.txt").display()
        )
    );
    // No temporary file left, nothing renamed: the old text is still there.
    assert_eq!(entries(&dumps), ["linear-relu-unfused.llir.txt", "linear-relu-unfused.plan.txt"]);
    let old = std::fs::read_to_string(dumps.join("linear-relu-unfused.llir.txt")).unwrap();
    assert_eq!(old, "old");
    assert!(!lumen(&args).status.success());
    assert_eq!(entries(&dumps).len(), 2);

    // The directory gone, the whole set lands.
    std::fs::remove_dir(dumps.join("linear-relu-unfused.plan.txt")).unwrap();
    assert!(lumen(&args).status.success());
    assert_eq!(
        entries(&dumps),
        [
            "linear-relu-unfused.llir.dot",
            "linear-relu-unfused.llir.txt",
            "linear-relu-unfused.plan.svg",
            "linear-relu-unfused.plan.txt"
        ]
    );
    let text = std::fs::read_to_string(dumps.join("linear-relu-unfused.llir.txt")).unwrap();
    assert!(text.starts_with("# lumen LLIR: linear-relu-unfused\n"), "{text}");
}

#[test]
fn a_dump_dir_that_is_a_file_is_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dumps");
    std::fs::write(&file, "a file").unwrap();
    let e = error_line(&["compile", "linear-relu", "--dump-dir", file.to_str().unwrap()]);
    assert_eq!(e, format!("error: cannot write dump {}: not a directory\n", file.display()));
    // The same through LLIR_DUMP_DIR, and nothing written beside the file.
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["compile", "linear-relu"])
        .env("LLIR_DUMP_DIR", &file)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stderr).unwrap(), e);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(entries(dir.path()), ["dumps"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a file");
}

#[test]
fn bad_input_is_one_error_line() {
    let e = error_line(&["compile", "resnet"]);
    assert!(e.contains("unknown program \"resnet\""), "{e}");
    let e = error_line(&["compile", "mlp", "--layers", "64,x,10"]);
    assert!(e.contains("layer size \"x\""), "{e}");
    let e = error_line(&["compile", "mlp", "--layers", "64"]);
    assert!(e.contains("at least two layer sizes"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "0"]);
    assert!(e.contains("sizes must be positive"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--alignment", "0"]);
    assert!(e.contains("slab alignment must be positive"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "4611686018427387904"]);
    assert!(e.contains("too large"), "{e}");
}

#[test]
fn algorithm_flag_reaches_the_planner_and_bad_names_are_one_line() {
    // 4096x64x4096 unfused: first fit is 137,379,840 B against a lower bound of 134,234,112 B;
    // `best` must never be worse than first fit, and both must keep the same lower bound.
    let args = ["compile", "linear-relu", "--m", "4096", "--k", "64", "--n", "4096", "--no-fuse"];
    let ff = json(&[&args[..], &["--json"]].concat());
    let best = json(&[&args[..], &["--algorithm", "best", "--json"]].concat());
    assert_eq!(ff["slab_bytes"], 137_379_840u64);
    assert_eq!(ff["lower_bound"], best["lower_bound"]);
    assert!(best["slab_bytes"].as_u64() <= ff["slab_bytes"].as_u64());
    let err = error_line(&["compile", "linear-relu", "--algorithm", "nope"]);
    assert!(err.contains("first-fit") && err.contains("best"), "{err}");
}

/// An alignment that would split f32 elements is refused by the compiler, before any plan.
#[test]
fn alignment_must_be_a_power_of_two_of_at_least_4() {
    let e = error_line(&["compile", "linear-relu", "--alignment", "3", "--no-fuse"]);
    assert_eq!(
        e.trim_end(),
        "error: slab alignment 3 bytes does not suit f32 buffers: it must be a power of two of \
         at least 4 (4, 8, 16, ..., 256 for cuBLASLt)"
    );
    for a in ["2", "12"] {
        let e = error_line(&["compile", "linear-relu", "--alignment", a]);
        assert!(e.contains(&format!("slab alignment {a} bytes does not suit f32")), "{e}");
    }
    let v = json(&["compile", "linear-relu", "--alignment", "4", "--no-fuse", "--json"]);
    assert_eq!(v["buffers"][2]["id"], "b");
    assert_eq!(v["buffers"][2]["reserved"], 256);
    assert_eq!(v["buffers"][1]["offset"], 65_536);
    // The plan says what it was made under.
    assert_eq!(
        v["options"],
        serde_json::json!({
            "alignment": 4,
            "capacity": null,
            "algorithm": "first-fit",
            "workspace_bytes": 1_048_576,
            "resident_weights": false,
        })
    );
    let v = json(&[
        "compile",
        "mlp",
        "--algorithm",
        "best",
        "--resident-weights",
        "--workspace-bytes",
        "0",
        "--json",
    ]);
    assert_eq!(v["options"]["algorithm"], "best");
    assert_eq!(v["options"]["resident_weights"], true);
    assert_eq!(v["options"]["workspace_bytes"], 0);
    assert_eq!(v["options"]["alignment"], 256);
}

/// The messages a new user met: positions and limits in words, no lumen source lines.
#[test]
fn size_messages_say_what_is_wrong() {
    let e = error_line(&["compile", "mlp", "--layers", "5,0,3"]);
    assert_eq!(
        e.trim_end(),
        "error: mlp: layer 1 of [5, 0, 3] has size 0 (layer 0 is the input; every size must be \
         positive)"
    );
    let e = error_line(&["compile", "mlp", "--layers", "99999999999999999999,3"]);
    assert!(e.contains("is too large (at most 18446744073709551615)"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "18446744073709551615"]);
    assert_eq!(
        e.trim_end(),
        "error: linear-relu: x is [m, k] = [18446744073709551615, 256]: too large (its byte size \
         overflows usize)"
    );
    assert!(!e.contains(".rs:"), "{e}");
}

/// A size of the other program is an error, not silently ignored; defaults still apply and
/// `--help` still shows them.
#[test]
fn sizes_of_the_other_program_are_refused() {
    let e = error_line(&["compile", "linear-relu", "--layers", "5,3"]);
    assert_eq!(e.trim_end(), "error: --layers applies to mlp and transformer, not linear-relu");
    // About the flag, even when its text would not parse.
    let e = error_line(&["compile", "linear-relu", "--layers", "x"]);
    assert_eq!(e.trim_end(), "error: --layers applies to mlp and transformer, not linear-relu");
    let e = error_line(&["compile", "mlp", "--m", "5"]);
    assert_eq!(e.trim_end(), "error: --m applies to linear-relu, not mlp");
    let e = error_line(&["compare", "linear-relu", "--batch", "5"]);
    assert_eq!(e.trim_end(), "error: --batch applies to mlp and transformer, not linear-relu");
    let e = error_line(&["compile", "resnet", "--m", "5"]);
    assert!(e.contains("unknown program \"resnet\""), "{e}");

    let v = json(&["compile", "mlp", "--batch", "2", "--json"]);
    assert_eq!(v["buffers"][0]["id"], "x");
    assert_eq!(v["buffers"][0]["bytes"], 2 * 64 * 4);

    let out = lumen(&["compile", "--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for default in ["[default: 64]", "[default: 256]", "[default: 64,128,64,10]", "[default: 32]"] {
        assert!(help.contains(default), "{default} missing from:\n{help}");
    }
}

/// `--resident-weights`: every weight lives until readback, so no buffer reuses its bytes; the
/// digits-sized MLP pays 16,384 slab bytes for it at the default batch 32, 512 at batch 1 and
/// nothing at the digits file's batch 450 (the README's figures); the golden program nothing.
#[test]
fn resident_weights_flag_keeps_weights_to_themselves() {
    let uses_readback = |v: &Value, id: &str| {
        let last = v["nodes"].as_array().unwrap().len() as u64 - 1;
        let b = v["buffers"].as_array().unwrap().iter().find(|b| b["id"] == id).unwrap();
        b["uses"].as_array().unwrap().last().unwrap().as_u64() == Some(last)
    };
    let plain = json(&["compile", "mlp", "--no-fuse", "--json"]);
    let resident = json(&["compile", "mlp", "--no-fuse", "--resident-weights", "--json"]);
    assert_eq!(plain["slab_bytes"], 1_142_272);
    assert_eq!(resident["slab_bytes"], 1_158_656);
    assert_eq!(plain["nodes"], resident["nodes"]);
    for w in ["w1", "b1", "w2", "b2", "w3", "b3"] {
        assert!(!uses_readback(&plain, w), "{w}");
        assert!(uses_readback(&resident, w), "{w}");
    }
    assert!(!uses_readback(&resident, "x"));
    // (batch, plain slab, resident slab): the cost depends on the sizes.
    for (batch, plain, resident) in [("1", 1_118_464, 1_118_976), ("450", 1_693_696, 1_693_696)] {
        let args = ["compile", "mlp", "--no-fuse", "--batch", batch, "--json"];
        assert_eq!(json(&args)["slab_bytes"], plain, "batch {batch}");
        let v = json(&[&args[..], &["--resident-weights"]].concat());
        assert_eq!(v["slab_bytes"], resident, "batch {batch}");
    }
    // The golden program: unchanged by default, and no bigger resident.
    let golden = json(&["compile", "linear-relu", "--no-fuse", "--json"]);
    assert_eq!(golden["slab_bytes"], 1_196_288);
    let golden = json(&["compile", "linear-relu", "--no-fuse", "--resident-weights", "--json"]);
    assert_eq!(golden["slab_bytes"], 1_196_288);
}

/// Library use: with resident weights the CPU runtime uploads every weight once at prepare,
/// and the outputs are the same as with the reused plan.
#[test]
fn resident_weights_are_uploaded_once_by_the_cpu_runtime() {
    use lumen::compiler::{BufferRole, CompileOptions, programs};
    use lumen::runtime::{CpuRuntime, HostTensor, PreparedProgram, Tensors};

    let graph = programs::mlp(&[64, 128, 64, 10], 32).unwrap();
    let mut outputs = Vec::new();
    for (fuse, resident) in [(false, false), (false, true), (true, false), (true, true)] {
        let options = CompileOptions {
            fuse,
            resident_weights: resident,
            name: "mlp".into(),
            ..CompileOptions::default()
        };
        let program = graph.compile(&options).unwrap();
        let mut weights = Tensors::new();
        let mut inputs = Tensors::new();
        for (i, b) in program.llir.buffers.iter().enumerate() {
            let into = match b.role {
                BufferRole::Weight => &mut weights,
                BufferRole::Input => &mut inputs,
                _ => continue,
            };
            let n = b.bytes / 4;
            let data = (0..n).map(|j| ((i * 31 + j * 7) % 17) as f32 / 17.0 - 0.5).collect();
            into.insert(b.id.clone(), HostTensor::new(b.shape.clone(), data).unwrap());
        }
        let mut prepared = CpuRuntime::default().prepare_cpu(&program, &weights).unwrap();
        // Unfused, first fit reuses w1's bytes for t2; fused, for y.
        let want = if resident { 0 } else { 1 };
        assert_eq!(prepared.reuploaded_weights(), want, "fuse={fuse} resident={resident}");
        let first = prepared.execute(&inputs).unwrap();
        assert_eq!(prepared.execute(&inputs).unwrap(), first);
        outputs.push(first);
    }
    // Residency moves bytes, never the arithmetic: bit-identical outputs.
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[2], outputs[3]);
}

/// A program name or a tensor name that cannot appear in a dump is refused at compile time.
#[test]
fn library_names_are_checked_when_compiling() {
    use lumen::compiler::{CompileError, CompileOptions, Graph, programs};
    let graph = programs::linear_relu(4, 8, 4).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = CompileOptions {
        name: "/tmp/lumen-escaped".into(),
        dump_dir: Some(dir.path().join("dumps")),
        ..CompileOptions::default()
    };
    let err = graph.compile(&options).unwrap_err();
    assert!(matches!(err, CompileError::ProgramName { .. }), "{err}");
    assert!(!dir.path().join("dumps").exists());

    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w, b", [3, 4]);
    x.matmul(w).relu().output("y");
    let err = cx.compile(&CompileOptions::default()).unwrap_err().to_string();
    assert!(err.starts_with("weight name \"w, b\" is not identifier-like: ',' is not"), "{err}");
    assert!(err.contains("cli_compile.rs:"), "{err}");
}

#[allow(dead_code)]
#[path = "../examples/library.rs"]
mod library;

/// The guide's library example (`docs/src/library.md`, once the README's) is
/// `examples/library.rs`, and it runs (its asserts check y). The block's hidden lines (`# ...`,
/// which mdBook and rustdoc compile but do not show: `# extern crate lumen;` for `mdbook
/// test`) are not part of the example.
#[test]
fn the_library_example_runs_and_is_the_readme_section() {
    library::main().unwrap();
    let example = include_str!("../examples/library.rs");
    let code = &example[example.find("\nuse ").unwrap() + 1..];
    let page = include_str!("../docs/src/library.md");
    let section = &page[page.find("# Using lumen as a library\n").unwrap()..];
    let start = section.find("```rust\n").unwrap() + "```rust\n".len();
    let end = start + section[start..].find("```\n").unwrap();
    let shown: String = section[start..end]
        .lines()
        .filter(|line| *line != "#" && !line.starts_with("# "))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(shown, code, "docs/src/library.md and examples/library.rs differ");
}

/// `lumen run` labels its program with the file's stem: a stem that is not a valid program
/// name (a space, a leading dot) is cleaned, not refused.
#[test]
fn run_cleans_a_file_stem_into_a_program_name() {
    let dir = tempfile::tempdir().unwrap();
    let digits = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");
    let file = dir.path().join(".my digits.safetensors");
    std::fs::copy(digits, &file).unwrap();
    let dumps = dir.path().join("dumps");
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["run", file.to_str().unwrap(), "--runs", "1", "--no-search", "--no-fuse"])
        .env("LLIR_DUMP_DIR", &dumps)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dumps.join("_my_digits-unfused.llir.txt").is_file());
}

/// The JSON shapes the README describes: in `compile --json` `nodes` is the LLIR node list and
/// `node_count` its length (the text's `nodes` total); in `run --json` and each `compare
/// --json` candidate `nodes` is the count.
#[test]
fn nodes_is_a_list_in_compile_json_and_a_count_elsewhere() {
    let v = json(&["compile", "linear-relu", "--no-fuse", "--json"]);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = [
        "verified",
        "label",
        "nodes",
        "buffers",
        "slab_bytes",
        "naive_bytes",
        "lower_bound",
        "launches",
        "dram_bytes",
        "flops",
        "node_count",
        "options",
        "target",
    ];
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(v["node_count"], 5);
    assert_eq!(nodes.len(), 5);
    let mut matmul: Vec<&str> = nodes[1].as_object().unwrap().keys().map(String::as_str).collect();
    matmul.sort_unstable();
    assert_eq!(
        matmul,
        [
            "batch",
            "epilogue",
            "id",
            "inputs",
            "k",
            "m",
            "n",
            "op",
            "reads",
            "views",
            "workspace",
            "writes"
        ]
    );
    assert_eq!(nodes[3]["op"], "relu");
    assert_eq!(nodes[3]["len"], 64 * 64);
    let text = String::from_utf8(lumen(&["compile", "linear-relu", "--no-fuse"]).stdout).unwrap();
    assert!(text.lines().any(|l| l == "nodes        5"), "{text}");

    let digits = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");
    let run = json(&["run", digits, "--runs", "1", "--no-search", "--no-fuse", "--json"]);
    assert_eq!(run["nodes"], 10);
    let compare = json(&["compare", "linear-relu", "--json"]);
    assert_eq!(compare["candidates"][0]["nodes"], 5);
}

/// `lumen compile transformer --json`: the plan verified, the projections fused, and the
/// sizes taken from the flags.
#[test]
fn the_transformer_compiles_fused_and_unfused() {
    let fused = json(&["compile", "transformer", "--json"]);
    assert_eq!(fused["verified"], true);
    assert_eq!(fused["launches"], 82);
    let epilogues: Vec<&str> = fused["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.get("epilogue").and_then(Value::as_str))
        .collect();
    assert_eq!(epilogues.iter().filter(|e| **e == "GELU_BIAS").count(), 2, "{epilogues:?}");
    assert_eq!(epilogues.iter().filter(|e| **e == "BIAS").count(), 10, "{epilogues:?}");
    let unfused = json(&["compile", "transformer", "--no-fuse", "--json"]);
    assert_eq!(unfused["launches"], 96);
    assert!(unfused["dram_bytes"].as_u64() > fused["dram_bytes"].as_u64());
    let small = json(&[
        "compile",
        "transformer",
        "--json",
        "--batch",
        "1",
        "--seq",
        "4",
        "--width",
        "8",
        "--heads",
        "2",
        "--ffn",
        "16",
        "--layers",
        "1",
    ]);
    let x = small["buffers"].as_array().unwrap().iter().find(|b| b["id"] == "x").unwrap();
    assert_eq!(x["shape"], serde_json::json!([1, 4, 8]));
    assert_eq!(small["launches"], 41);
}
