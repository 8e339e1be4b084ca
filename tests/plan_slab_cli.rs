//! `lumen plan-slab`, run as a user runs it.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::{plan_slab as lumen, root};

fn seed() -> PathBuf {
    root().join("examples/plans/seed_unfused.json")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a failing command: exit status 1, nothing on stdout, exactly one `error: ` line.
fn fails(args: &[&str]) -> String {
    fails_with(1, args)
}

/// As [`fails`], with exit status `code` (2 for a usage error).
fn fails_with(code: i32, args: &[&str]) -> String {
    let out = lumen(args);
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err.trim_end().to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn seed_table() {
    let out = lumen(&["examples/plans/seed_unfused.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("slab_bytes          1,196,288"));
    assert!(text.contains("lower_bound         1,196,288"));
    settings().bind(|| insta::assert_snapshot!("cli_plan_slab_seed_table", text));
}

#[test]
fn seed_json() {
    let out = lumen(&[seed().to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["offsets"],
        serde_json::json!({"x": 0, "w": 65536, "b": 131072, "workspace": 131328,
                           "t0": 1179904, "t1": 0, "y": 16384})
    );
    assert_eq!(v["slab_bytes"], 1_196_288);
    assert_eq!(v["naive_bytes"], 1_229_056);
    assert_eq!(v["lower_bound"], 1_196_288);
    assert_eq!(v["ratio"], 1.0);
    assert_eq!(v["algorithm"], "first-fit");
    // Keys in SPEC order.
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).take(4).collect();
    assert_eq!(keys, ["offsets", "slab_bytes", "naive_bytes", "lower_bound"]);
}

#[test]
fn capacity_and_alignment_override_the_file() {
    let out = lumen(&["examples/plans/seed_unfused.json", "--json", "--capacity", "1196288"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = fails(&["examples/plans/seed_unfused.json", "--capacity", "1196287"]);
    assert_eq!(
        err,
        "error: examples/plans/seed_unfused.json: slab capacity 1196287 exceeded while placing request 4 (16384 bytes)"
    );
    let out = lumen(&["examples/plans/seed_unfused.json", "--json", "--alignment", "1024"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reserved"]["b"], 1024);
    assert_eq!(v["alignment"], 1024);
    let err = fails(&["examples/plans/seed_unfused.json", "--alignment", "0"]);
    assert!(err.ends_with(": slab alignment must be positive"), "{err}");
}

#[test]
fn minimalloc_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(
        dir.path(),
        "input.12.csv",
        "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n",
    );
    let out = lumen(&[&csv, "--json", "--alignment", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offsets"], serde_json::json!({"b1": 0, "b2": 0, "b3": 4, "b4": 0, "b5": 8}));
    assert_eq!(v["slab_bytes"], 12);
    assert_eq!(v["lower_bound"], 12);
}

#[test]
fn svg_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("seed.svg");
    let out = lumen(&["examples/plans/seed_unfused.json", "--svg", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg "));
    assert!(text.ends_with("</svg>\n"));
    assert_eq!(text.matches("<title>").count(), 7);
    // Only the picture is left in the folder: the temporary file was renamed.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("never.svg");
    let svg = svg.to_str().unwrap();

    let err = fails(&["no/such/plan.json"]);
    assert!(err.starts_with("error: cannot read no/such/plan.json: "), "{err}");

    let bad =
        write(dir.path(), "neg.json", r#"{"buffers": [{"id": "x", "bytes": -1, "uses": []}]}"#);
    let err = fails(&[&bad, "--svg", svg]);
    assert!(
        err.contains("neg.json: buffer bytes must be a non-negative integer, got -1 at line 1")
    );

    let cyc = write(dir.path(), "cyc.json", r#"{"nodes": ["a"], "edges": [["a", "a"]]}"#);
    assert!(
        fails(&[&cyc, "--svg", svg]).ends_with("cyc.json: slab lifetime graph must be acyclic")
    );

    let csv = write(dir.path(), "bad.csv", "id,lower,upper,size\na,4,2,8\n");
    assert!(fails(&[&csv]).ends_with("bad.csv: line 2: buffer a has an empty lifetime [4, 2)"));

    let err = fails(&["examples/plans/seed_unfused.json", "--svg", "/no/such/dir/x.svg"]);
    assert!(err.starts_with("error: cannot write /no/such/dir/x.svg: "), "{err}");

    // Nothing was drawn for the failures.
    assert!(!Path::new(svg).exists());
}

/// What a new user met: each message names what the file form wants, not serde's internals.
#[test]
fn messages_a_new_user_met() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, text: &str| write(dir.path(), name, text);

    let edge = p("edge.json", r#"{"nodes": ["a","b","c"], "edges": [["a","b","c"]]}"#);
    let err = fails(&[&edge]);
    assert!(
        err.contains("edge.json: an edge is a pair [from, to] of node names, got 3 or more items"),
        "{err}"
    );
    let align = p("align.json", r#"{"alignment": 256.0}"#);
    let err = fails(&[&align]);
    assert!(
        err.contains("align.json: alignment must be a non-negative integer, got 256.0"),
        "{err}"
    );
    let null = p("null.json", "null");
    let err = fails(&[&null]);
    assert!(
        err.ends_with("null.json: invalid type: null, expected a JSON object with nodes, edges, buffers at line 1 column 4"),
        "{err}"
    );
    // A MiniMalloc CSV under another name is read as CSV.
    let txt = p("trace.txt", "id,lower,upper,size\na,0,3,4\nb,3,9,4\n");
    let out = lumen(&[&txt, "--json", "--alignment", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offsets"], serde_json::json!({"a": 0, "b": 0}));
    let no_id = p("no_id.csv", "ident,lower,upper,size\na,0,3,4\n");
    assert!(
        fails(&[&no_id])
            .ends_with("CSV header lacks an id column (header: ident,lower,upper,size)")
    );
}

/// An id with a newline or a control character is escaped in the table, so every buffer stays
/// one row; JSON keeps the id as it is.
#[test]
fn ids_with_control_characters_stay_on_one_row() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "ids.json",
        r#"{"nodes": ["a"], "buffers": [{"id": "x\ny", "bytes": 4, "uses": ["a"]},
            {"id": "t\tab\u0007", "bytes": 4, "uses": ["a"]}, {"id": "z", "bytes": 4, "uses": ["a"]}]}"#,
    );
    let out = lumen(&[&file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("id ")).skip(1).take(3).collect();
    assert_eq!(rows[0].split_whitespace().collect::<Vec<_>>(), ["x\\ny", "4", "256", "0", "256"]);
    assert_eq!(
        rows[1].split_whitespace().collect::<Vec<_>>(),
        ["t\\tab\\u{7}", "4", "256", "256", "512"]
    );
    assert!(rows[2].starts_with("z "), "{text}");
    // Columns line up: every row as wide as the header.
    let header = text.lines().find(|l| l.starts_with("id ")).unwrap();
    assert!(rows.iter().all(|r| r.chars().count() == header.chars().count()), "{text}");
    let out = lumen(&[&file, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offsets"]["x\ny"], 0);
}

/// `--time-budget` only limits `best`'s search; with any other algorithm it would do nothing,
/// so it is refused, as a usage error (status 2).
#[test]
fn time_budget_needs_best() {
    let err = fails_with(2, &["examples/plans/seed_unfused.json", "--time-budget", "5"]);
    assert_eq!(
        err,
        "error: --time-budget applies to the best algorithm only, and \
         examples/plans/seed_unfused.json is planned with first-fit (add --algorithm best)"
    );
    let err = fails_with(
        2,
        &["examples/plans/seed_unfused.json", "--time-budget", "5", "--algorithm", "lifetime"],
    );
    assert!(err.contains("planned with lifetime"), "{err}");
    let out = lumen(&[
        "examples/plans/seed_unfused.json",
        "--time-budget",
        "5",
        "--algorithm",
        "best",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&lumen(&["--help"]));
    assert!(help.contains("Only `best` searches"), "{help}");
}

/// Every bad input of SPEC section 2, from a file: one `error:` line with the planner's message
/// after the file name, exit status 1, never a panic.
#[test]
fn every_spec_bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, text: &str| write(dir.path(), name, text);
    let cases = [
        (
            p(
                "dup.json",
                r#"{"nodes": ["a", "b"], "edges": [["a", "b"]], "buffers": [
                    {"id": "x", "bytes": 4, "uses": ["a"]},
                    {"id": "x", "bytes": 4, "uses": ["b"]}]}"#,
            ),
            "duplicate slab buffer ID: x",
        ),
        (
            p(
                "nouses.json",
                r#"{"nodes": ["a"], "buffers": [{"id": "x", "bytes": 4, "uses": []}]}"#,
            ),
            "slab buffer has no lifetime nodes: x",
        ),
        (
            p(
                "absent.json",
                r#"{"nodes": ["a"], "buffers": [{"id": "x", "bytes": 4, "uses": ["a", "ghost"]}]}"#,
            ),
            "slab lifetime references an absent DAG node: buffer x uses \"ghost\" \
             (buffers[0].uses[1])",
        ),
        (
            p(
                "huge.json",
                r#"{"nodes": ["a"], "buffers": [
                    {"id": "huge", "bytes": 18446744073709551615, "uses": ["a"]}]}"#,
            ),
            "slab alignment overflow",
        ),
        (
            p(
                "cycle.json",
                r#"{"nodes": ["a", "b"], "edges": [["a", "b"], ["b", "a"]],
                    "buffers": [{"id": "x", "bytes": 4, "uses": ["a"]}]}"#,
            ),
            "slab lifetime graph must be acyclic",
        ),
        (
            p(
                "gaps.json",
                r#"{"nodes": ["start", "middle", "end"],
                    "edges": [["start", "middle"], ["middle", "end"]],
                    "alignment": 16, "capacity": 31, "buffers": [
                    {"id": "0", "bytes": 16, "uses": ["start", "end"]},
                    {"id": "1", "bytes": 16, "uses": ["middle"]},
                    {"id": "2", "bytes": 16, "uses": ["end"]}]}"#,
            ),
            "slab capacity 31 exceeded while placing request 1 (16 bytes)",
        ),
    ];
    for (path, message) in &cases {
        assert_eq!(fails(&[path]), format!("error: {path}: {message}"));
    }
}

/// `--svg` never replaces the problem file (by any name), a link, a FIFO, a device or a folder:
/// each is a usage error before planning, and the problem file is left as it was.
#[test]
fn svg_refuses_everything_but_a_new_path_or_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(seed()).unwrap();
    let p = write(dir.path(), "p.json", &text);
    let err = fails_with(2, &[&p, "--svg", &p]);
    assert!(err.ends_with("is the problem file itself; give another path"), "{err}");
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&p, &hard).unwrap();
    let err = fails_with(2, &[&p, "--svg", hard.to_str().unwrap()]);
    assert!(err.ends_with("is the problem file itself; give another path"), "{err}");
    #[cfg(unix)]
    {
        let link = dir.path().join("link.svg");
        std::os::unix::fs::symlink(dir.path().join("elsewhere.svg"), &link).unwrap();
        let err = fails_with(2, &[&p, "--svg", link.to_str().unwrap()]);
        assert!(err.ends_with("is a symbolic link; give a new path or a regular file"), "{err}");
        let err = fails_with(2, &[&p, "--svg", "/dev/null"]);
        assert!(err.ends_with("is not a regular file; give a new path or a regular file"), "{err}");
    }
    let err = fails_with(2, &[&p, "--svg", dir.path().to_str().unwrap()]);
    assert!(err.ends_with("is a folder; give a new path or a regular file"), "{err}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    // An existing regular file is replaced.
    let old = write(dir.path(), "old.svg", "old");
    assert!(lumen(&[&p, "--svg", &old]).status.success());
    assert!(std::fs::read_to_string(&old).unwrap().starts_with("<svg"));
}

/// A JSON array is not a problem, nor a buffer written as an array of its fields.
#[test]
fn arrays_are_not_problems() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.json", "[]");
    assert_eq!(
        fails(&[&p]),
        format!("error: {p}: expected a JSON object with nodes, edges, buffers, found an array")
    );
    let p = write(dir.path(), "b.json", r#"{"nodes": ["a"], "buffers": [["x", 4, ["a"]]]}"#);
    assert_eq!(
        fails(&[&p]),
        format!(
            "error: {p}: buffers[0]: expected a buffer object with id, bytes, uses, found an array"
        )
    );
}

/// A very long id (65,536 characters) prints in full on its row; the column stays capped.
#[test]
fn a_very_long_id_prints() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(65_536);
    let p = write(
        dir.path(),
        "long.json",
        &format!(
            r#"{{"nodes": ["a"], "buffers": [{{"id": "{long}", "bytes": 4, "uses": ["a"]}},
                {{"id": "y", "bytes": 8, "uses": ["a"]}}]}}"#
        ),
    );
    let out = lumen(&[&p]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().any(|l| l.starts_with(&long) && l.ends_with("256")), "long row");
    let y = text.lines().find(|l| l.starts_with("y ")).unwrap();
    assert_eq!(y.find(" 8 ").map(|at| at < 100), Some(true), "{y}");
}

/// The JSON form carries in-place marks by id; an unknown id is one error line.
#[test]
fn in_place_marks_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "chain.json",
        r#"{"nodes": ["upload", "relu", "readback"],
            "edges": [["upload", "relu"], ["relu", "readback"]],
            "buffers": [{"id": "x", "bytes": 4096, "uses": ["upload", "relu"]},
                        {"id": "y", "bytes": 4096, "uses": ["relu", "readback"],
                         "in_place_of": "x"}]}"#,
    );
    let out = lumen(&[&p, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offsets"], serde_json::json!({"x": 0, "y": 0}));
    assert_eq!(v["in_place"], serde_json::json!({"y": {"of": "x", "taken": true}}));
    let text = stdout(&lumen(&[&p]));
    assert!(text.lines().any(|l| l.starts_with("y ") && l.ends_with("  in place of x")), "{text}");
    assert_eq!((v["slab_bytes"].as_u64(), v["lower_bound"].as_u64()), (Some(4096), Some(4096)));
    let bad = write(
        dir.path(),
        "bad.json",
        r#"{"nodes": ["a"], "buffers": [{"id": "y", "bytes": 4, "uses": ["a"], "in_place_of": "z"}]}"#,
    );
    assert_eq!(
        fails(&[&bad]),
        format!("error: {bad}: buffers[0] (y): in_place_of names no buffer: \"z\"")
    );
}
