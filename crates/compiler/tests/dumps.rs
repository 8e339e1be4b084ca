//! Dump files, the Graphviz form, the JSON form and the HLIR text.

use lumen_compiler::dump::{compiled_json, llir_dot, llir_text, plan_text, write_dumps};
use lumen_compiler::{CompileError, CompileOptions, Graph, programs};

fn linear_relu() -> Graph {
    programs::linear_relu(64, 256, 64).unwrap()
}

#[test]
fn dump_dir_option_writes_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("nested/dumps");
    let options = CompileOptions {
        name: "linear-relu".into(),
        dump_dir: Some(target.clone()),
        fuse: false,
        ..Default::default()
    };
    let p = linear_relu().compile(&options).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    // Exactly the four dumps: no temporary file is left behind.
    let expected = [
        "linear-relu-unfused.llir.dot",
        "linear-relu-unfused.llir.txt",
        "linear-relu-unfused.plan.svg",
        "linear-relu-unfused.plan.txt",
    ];
    assert_eq!(files, expected);
    let read = |f: &str| std::fs::read_to_string(target.join(f)).unwrap();
    assert_eq!(read("linear-relu-unfused.llir.txt"), llir_text(&p));
    assert_eq!(read("linear-relu-unfused.plan.txt"), plan_text(&p));
    assert_eq!(read("linear-relu-unfused.llir.dot"), llir_dot(&p));
    let svg = read("linear-relu-unfused.plan.svg");
    assert_eq!(svg, lumen_compiler::dump::plan_svg(&p));
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
    assert!(svg.contains("1 lt_matmul"), "steps are labelled with node id and op");
}

#[test]
fn write_dumps_returns_the_paths_it_wrote() {
    let p = linear_relu().compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let written = write_dumps(dir.path(), &p).unwrap();
    let names: Vec<&str> =
        written.iter().map(|w| w.file_name().unwrap().to_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "program-unfused.llir.txt",
            "program-unfused.llir.dot",
            "program-unfused.plan.txt",
            "program-unfused.plan.svg"
        ]
    );
    // Rewriting replaces the files in place.
    assert_eq!(write_dumps(dir.path(), &p).unwrap(), written);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
}

#[test]
fn an_unwritable_dump_dir_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let options =
        CompileOptions { dump_dir: Some(file.join("sub")), fuse: false, ..Default::default() };
    let err = linear_relu().compile(&options).unwrap_err();
    assert!(matches!(err, CompileError::Dump { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cannot write dump "), "{err}");
}

#[test]
fn dot_has_one_box_per_node_and_labelled_edges() {
    let p = linear_relu()
        .compile(&CompileOptions { name: "linear-relu".into(), fuse: false, ..Default::default() })
        .unwrap();
    let dot = llir_dot(&p);
    assert!(dot.starts_with("digraph \"linear-relu-unfused\" {\n"), "{dot}");
    assert!(
        dot.contains("  n1 [label=\"1 lt_matmul\\nm=64 k=256 n=64 epilogue=DEFAULT\"];\n"),
        "{dot}"
    );
    assert!(dot.contains("  n0 -> n1 [label=\"x, w\"];\n"), "{dot}");
    assert!(dot.contains("  n0 -> n2 [label=\"b\"];\n"), "{dot}");
    assert!(dot.contains("  n3 -> n4 [label=\"y\"];\n"), "{dot}");
    assert_eq!(dot.matches("[label=").count(), 5 + 5);
    assert!(dot.ends_with("}\n"));
}

#[test]
fn json_has_the_documented_shape() {
    let p = linear_relu().compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let v = compiled_json(&p);
    assert_eq!(v["slab_bytes"], 1_196_288);
    assert_eq!(v["naive_bytes"], 1_229_056);
    assert_eq!(v["launches"], 3);
    assert_eq!(v["dram_bytes"], 213_248);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    assert_eq!(nodes[1]["op"], "lt_matmul");
    assert_eq!(nodes[1]["epilogue"], "DEFAULT");
    assert_eq!(nodes[1]["inputs"], serde_json::json!([0]));
    assert_eq!(nodes[1]["reads"], serde_json::json!(["x", "w"]));
    assert_eq!(nodes[1]["writes"], serde_json::json!(["t0"]));
    assert!(nodes[2].get("epilogue").is_none());
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers[3]["id"], "workspace");
    assert_eq!(buffers[3]["reserved"], 1_048_576);
    assert_eq!(buffers[3]["offset"], 131_328);
    assert_eq!(buffers[6]["uses"], serde_json::json!([3, 4]));
}

#[test]
fn hlir_prints_one_line_per_node_with_shapes() {
    let text = linear_relu().hlir().to_string();
    assert_eq!(
        text,
        "%0 = input x : [64, 256]\n\
         %1 = weight w : [256, 64]\n\
         %2 = weight b : [64]\n\
         %3 = matmul[DEFAULT] %0, %1 : [64, 64]\n\
         %4 = add %3, %2 : [64, 64]\n\
         %5 = relu %4 : [64, 64]\n\
         %6 = output y %5 : [64, 64]\n"
    );
}
