//! `lumen plan-slab --algorithm` and `--compare`, run as a user runs them.

use std::path::Path;
use std::process::Output;

mod common;

use common::plan_slab as lumen;

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Six intervals (alignment 1) where every greedy reaches 9 while the lower bound is 7 (at
/// time 5, `a`, `d`, `e` and `f` are live: 1 + 1 + 3 + 2).
const SIX: &str = "id,lower,upper,size\na,3,7,1\nb,3,5,2\nc,0,4,4\nd,4,6,1\ne,5,9,3\nf,4,7,2\n";

fn six(dir: &Path) -> String {
    let path = dir.join("six.csv");
    std::fs::write(&path, SIX).unwrap();
    path.display().to_string()
}

#[test]
fn algorithm_flag_picks_the_planner() {
    let dir = tempfile::tempdir().unwrap();
    let csv = six(dir.path());
    let ff = json(&lumen(&[&csv, "--json", "--alignment", "1"]));
    assert_eq!(ff["algorithm"], "first-fit");
    assert_eq!(ff["slab_bytes"], 9);
    assert_eq!(ff["lower_bound"], 7);
    let best = json(&lumen(&[&csv, "--json", "--alignment", "1", "--algorithm", "best"]));
    assert_eq!(best["algorithm"], "best");
    assert_eq!(best["slab_bytes"], 7);
    // A time budget only changes how long `best` may search.
    let timed = json(&lumen(&[
        &csv,
        "--json",
        "--alignment",
        "1",
        "--algorithm",
        "best",
        "--time-budget",
        "0.5",
    ]));
    assert_eq!(timed["slab_bytes"], 7);
    // The seed table: `best` keeps the golden slab, which is the lower bound.
    let seed = json(&lumen(&["examples/plans/seed_unfused.json", "--json", "--algorithm", "best"]));
    assert_eq!(seed["slab_bytes"], 1_196_288);
}

#[test]
fn help_lists_every_algorithm() {
    let out = lumen(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["first-fit", "first-fit-size", "best-fit-size", "lifetime", "best"] {
        assert!(text.contains(&format!("- {name}:")), "{name} missing from:\n{text}");
    }
    let bad = lumen(&["examples/plans/seed_unfused.json", "--algorithm", "worst-fit"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("[possible values: first-fit,"));
}

#[test]
fn compare_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let csv = six(dir.path());
    let out = lumen(&["--compare", &csv, "examples/plans/seed_unfused.json", "--alignment", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines[0], "slab / lower_bound (planning time) per algorithm");
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        ["file", "first-fit", "first-fit-size", "best-fit-size", "lifetime", "best"]
    );
    assert!(lines[2].starts_with(&csv) && lines[2].contains("1.2857 ("), "{}", lines[2]);
    assert!(lines[2].trim_end().ends_with("s)") && lines[2].contains("1.0000 ("));
    // Geometric mean of 9/7 and 1 for first fit; 1 for best.
    let geo: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(geo, ["geomean", "1.1339", "1.1339", "1.1339", "1.1339", "1.0000"]);

    let v = json(&lumen(&[
        "--compare",
        &csv,
        "examples/plans/seed_unfused.json",
        "--alignment",
        "1",
        "--json",
    ]));
    assert_eq!(v["algorithms"][4], "best");
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["lower_bound"], 7);
    assert_eq!(files[0]["results"]["first-fit"]["slab_bytes"], 9);
    assert_eq!(files[0]["results"]["best"]["slab_bytes"], 7);
    assert_eq!(files[0]["results"]["best"]["ratio"], 1.0);
    assert!(files[0]["results"]["best"]["seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(files[1]["results"]["best"]["slab_bytes"], 1_196_288);
    let geo = v["geomean"]["first-fit"].as_f64().unwrap();
    assert!((geo - (9.0f64 / 7.0).sqrt()).abs() < 1e-12, "{geo}");
    assert_eq!(v["geomean"]["best"], 1.0);
}

#[test]
fn compare_errors() {
    // A missing file: one error line, status 1.
    let out = lumen(&["--compare", "no/such.csv"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: cannot read no/such.csv"), "{err}");
    // A capacity no algorithm meets: the table (every cell refused), then one error line
    // naming the file, status 1.
    let dir = tempfile::tempdir().unwrap();
    let csv = six(dir.path());
    let out = lumen(&["--compare", &csv, "--alignment", "1", "--capacity", "6"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        err.trim_end(),
        format!("error: no algorithm fits the capacity of {csv} (1 of 1 files)")
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with(&csv)).unwrap();
    assert_eq!(row.matches("refused (").count(), 5, "{table}");
    // --compare takes the files itself; a positional FILE too is a usage error.
    let out = lumen(&["examples/plans/seed_unfused.json", "--compare", &csv]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn compare_marks_an_algorithm_the_capacity_refuses() {
    // Capacity 7 = the lower bound: every greedy needs 9 and is refused (first fit when it
    // places f, request 5, above e at 7); `best` reaches 7.
    // One algorithm's refusal is a result of the comparison, not its failure: status 0.
    let dir = tempfile::tempdir().unwrap();
    let csv = six(dir.path());
    let args = ["--compare", csv.as_str(), "--alignment", "1", "--capacity", "7"];
    let v = json(&lumen(&[&args[..], &["--json"]].concat()));
    let results = &v["files"][0]["results"];
    assert_eq!(
        results["first-fit"]["refused"],
        "slab capacity 7 exceeded while placing request 5 (2 bytes)"
    );
    assert!(results["first-fit"]["slab_bytes"].is_null());
    assert_eq!(results["best"]["slab_bytes"], 7);
    assert_eq!(results["best"]["ratio"], 1.0);
    assert_eq!(v["files"][0]["lower_bound"], 7);
    // A refused algorithm has no geometric mean; the others keep theirs.
    assert!(v["geomean"]["first-fit"].is_null());
    assert_eq!(v["geomean"]["best"], 1.0);
    let out = lumen(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with(&csv)).unwrap();
    assert!(row.contains("refused (") && row.contains("1.0000 ("), "{table}");
}
