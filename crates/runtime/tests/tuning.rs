//! The tuning cache (`lumen_runtime::tuning`) on the CPU runtime: a search's choice stored and
//! found again (the rerun skips the search and selects the same candidate), other keys'
//! entries kept, the key changing with the LLIR, the runtime's options and the search's
//! question; a corrupt, foreign-format, unreadable or foreign-machine file is a warning and a
//! fresh search, never an error or another candidate. No timing is asserted.

use std::path::Path;

use lumen_compiler::fusion::{self, Candidate};
use lumen_compiler::{BufferRole, CompileOptions, programs};
use lumen_runtime::search::{Progress, SearchOptions, random_tensors};
use lumen_runtime::tuning::{self, CacheStatus, FORMAT, Tuned, TuningKey, tuned_search};
use lumen_runtime::{CpuOptions, CpuRuntime, Placement, Tensors};

fn candidates(m: usize, k: usize, n: usize) -> Vec<Candidate> {
    let graph = programs::linear_relu(m, k, n).unwrap();
    let options = CompileOptions { name: "small".to_string(), ..CompileOptions::default() };
    fusion::candidates(&graph.hlir(), &options).expect("candidates")
}

fn data(c: &[Candidate]) -> (Tensors, Tensors) {
    let p = &c[0].program;
    (
        random_tensors(p, BufferRole::Weight, 1).unwrap(),
        random_tensors(p, BufferRole::Input, 2).unwrap(),
    )
}

fn options() -> SearchOptions {
    SearchOptions { trials: 4, ..SearchOptions::default() }
}

fn tuned(c: &[Candidate], cache: &Path) -> Tuned {
    let (w, x) = data(c);
    let cpu = CpuRuntime::default();
    tuned_search(&cpu, c, &w, &x, &options(), Progress::Hidden, Some(cache)).expect("search")
}

fn file_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_stored_choice_is_found_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let c = candidates(8, 16, 4);
    let first = tuned(&c, &path);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    let report = first.report.as_ref().expect("a search ran");
    let cache = first.cache.as_ref().unwrap();
    assert_eq!(cache.status, CacheStatus::Stored);
    assert_eq!(cache.key.len(), 32);
    // The file: the format and one entry under the key, recording the search.
    let v = file_json(&path);
    assert_eq!(v["format"], FORMAT);
    let entries = v["entries"].as_object().unwrap();
    assert_eq!(entries.keys().collect::<Vec<_>>(), [&cache.key]);
    let entry = &entries[&cache.key];
    assert_eq!(entry["machine"], tuning::machine());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        entry["runtime"],
        format!("cpu placement=Planned memory_debug=false profile_recapture=false threads={cores}")
    );
    assert_eq!(entry["selected"], report.candidates[report.selected].label);
    assert_eq!(entry["decision"], report.decision.to_string());
    assert_eq!(entry["rounds"], report.rounds);
    let labels: Vec<&str> = entry["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["tuning.json"]);

    // The rerun: a hit, no search, the same candidate, the file unchanged.
    let before = std::fs::read(&path).unwrap();
    let second = tuned(&c, &path);
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    assert!(second.report.is_none(), "the search was skipped");
    let hit = second.cache.as_ref().unwrap();
    assert_eq!((hit.status.clone(), hit.key.as_str()), (CacheStatus::Hit, cache.key.as_str()));
    assert_eq!(second.selected, report.selected);
    assert_eq!(hit.entry.as_ref().unwrap().selected, report.candidates[report.selected].label);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn other_keys_entries_are_kept_and_the_key_follows_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let small = candidates(8, 16, 4);
    let other = candidates(8, 16, 8);
    let a = tuned(&small, &path).cache.unwrap().key;
    let b = tuned(&other, &path).cache.unwrap().key;
    assert_ne!(a, b, "another program, another key");
    let v = file_json(&path);
    let mut keys: Vec<&String> = v["entries"].as_object().unwrap().keys().collect();
    let mut want = vec![&a, &b];
    want.sort();
    keys.sort();
    assert_eq!(keys, want);
    // Both are hits now.
    assert_eq!(tuned(&small, &path).cache.unwrap().status, CacheStatus::Hit);
    assert_eq!(tuned(&other, &path).cache.unwrap().status, CacheStatus::Hit);

    // The key: same inputs, same key; another runtime option, tolerance or machine: another.
    let cpu = CpuRuntime::default();
    let o = SearchOptions::default();
    let key = |rt: &CpuRuntime, o: &SearchOptions, m: &str| TuningKey::new(rt, &small, o, m).key;
    assert_eq!(key(&cpu, &o, "m"), key(&cpu, &o, "m"));
    // How long the search measures is not part of the question.
    assert_eq!(key(&cpu, &o, "m"), key(&cpu, &SearchOptions { trials: 99, ..o.clone() }, "m"));
    assert_ne!(key(&cpu, &o, "m"), key(&cpu, &o, "n"));
    let debug = CpuRuntime::new(CpuOptions { memory_debug: true, ..CpuOptions::default() });
    assert_ne!(key(&cpu, &o, "m"), key(&debug, &o, "m"));
    let no_reuse =
        CpuRuntime::new(CpuOptions { placement: Placement::NoReuse, ..CpuOptions::default() });
    assert_ne!(key(&cpu, &o, "m"), key(&no_reuse, &o, "m"));
    let loose = SearchOptions { min_speedup: 0.1, ..o.clone() };
    assert_ne!(key(&cpu, &o, "m"), key(&cpu, &loose, "m"));
    let budget = SearchOptions { memory_budget: Some(1 << 20), ..o.clone() };
    assert_ne!(key(&cpu, &o, "m"), key(&cpu, &budget, "m"));
}

/// A cache file that cannot be used: the search runs, the choice is the search's, one warning
/// says why, and the file is left as it was.
fn unusable(contents: &[u8], warning_starts: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    std::fs::write(&path, contents).unwrap();
    let c = candidates(8, 16, 4);
    let t = tuned(&c, &path);
    let report = t.report.as_ref().expect("a fresh search");
    assert_eq!(t.selected, report.selected);
    assert_eq!(t.cache.as_ref().unwrap().status, CacheStatus::NotStored);
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    let w = &t.warnings[0];
    assert!(w.starts_with(warning_starts), "{w}");
    assert!(w.ends_with(": searching afresh, the file is left as it is"), "{w}");
    assert_eq!(std::fs::read(&path).unwrap(), contents);
}

#[test]
fn corrupt_and_foreign_format_files_are_warnings() {
    unusable(b"{\"format\": \"lumen-tuning-cache/1\", \"entries\": {", "the tuning cache ");
    unusable(b"\x00\x01 not json", "the tuning cache ");
    unusable(b"[1, 2, 3]", "the tuning cache ");
    unusable(b"{\"entries\": {}}", "the tuning cache ");
    unusable(
        b"{\"format\": \"lumen-tuning-cache/1\", \"entries\": {\"k\": {\"machine\": 3}}}",
        "the tuning cache ",
    );
    // Reasons, in words.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let c = candidates(8, 16, 4);
    for (contents, says) in [
        (&b"{oops"[..], "is not a lumen tuning cache (key must be a string at line 1 column 2)"),
        (b"{\"entries\": {}}", "is not a lumen tuning cache (no `format` string)"),
        (
            b"{\"format\": \"lumen-tuning-cache/0\", \"entries\": {}}",
            "has format `lumen-tuning-cache/0`, this lumen reads `lumen-tuning-cache/1`",
        ),
    ] {
        std::fs::write(&path, contents).unwrap();
        let t = tuned(&c, &path);
        assert_eq!(
            t.warnings,
            [format!(
                "the tuning cache {} {says}: searching afresh, the file is left as it is",
                path.display()
            )]
        );
    }
}

#[test]
fn an_unreadable_file_is_a_warning() {
    // A directory where the file should be: reading fails (EISDIR), whoever runs the test.
    let dir = tempfile::tempdir().unwrap();
    let c = candidates(8, 16, 4);
    let t = tuned(&c, dir.path());
    assert!(t.report.is_some());
    assert_eq!(t.warnings.len(), 1);
    assert!(
        t.warnings[0]
            .starts_with(&format!("cannot read the tuning cache {}: ", dir.path().display())),
        "{:?}",
        t.warnings
    );
}

#[test]
fn a_foreign_entry_is_a_warning_and_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let c = candidates(8, 16, 4);
    let key = tuned(&c, &path).cache.unwrap().key;
    // The entry under this key now claims another machine, and selects a candidate that does
    // not exist: never taken.
    let mut v = file_json(&path);
    v["entries"][&key]["machine"] = "Other CPU; riscv64-linux; 64 cores".into();
    v["entries"][&key]["selected"] = "nonsense".into();
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let t = tuned(&c, &path);
    assert!(t.report.is_some(), "searched afresh");
    assert_eq!(t.warnings.len(), 1);
    assert!(
        t.warnings[0].contains(
            "holds an entry under this key that does not match this search (machine `Other CPU; \
             riscv64-linux; 64 cores`, this one `"
        ),
        "{}",
        t.warnings[0]
    );
    assert_eq!(t.cache.as_ref().unwrap().status, CacheStatus::Stored);
    let v = file_json(&path);
    assert_eq!(v["entries"][&key]["machine"], tuning::machine());
    // Another candidate list under the key (a stale LLIR): the same.
    let mut v = v;
    v["entries"][&key]["candidates"][1]["llir_hash"] = "0".repeat(32).into();
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let t = tuned(&c, &path);
    assert!(t.warnings[0].contains("(other candidates or LLIR)"), "{:?}", t.warnings);
    assert_eq!(tuned(&c, &path).cache.unwrap().status, CacheStatus::Hit);
}

#[test]
fn a_file_from_another_machine_is_a_warning_and_gains_an_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let c = candidates(8, 16, 4);
    let key = tuned(&c, &path).cache.unwrap().key;
    // Move the entry to another key and machine: the file now only knows another machine.
    let mut v = file_json(&path);
    let mut entry = v["entries"][&key].clone();
    entry["machine"] = "Other CPU; riscv64-linux; 64 cores".into();
    v["entries"] = serde_json::json!({ "f".repeat(32): entry });
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let t = tuned(&c, &path);
    assert!(t.report.is_some());
    assert_eq!(
        t.warnings,
        [format!(
            "the tuning cache {} holds no entry for this machine (its 1 entry was measured on: \
             Other CPU; riscv64-linux; 64 cores): searching afresh",
            path.display()
        )]
    );
    // Stored beside the other machine's entry, which is kept.
    let v = file_json(&path);
    let keys: Vec<&String> = v["entries"].as_object().unwrap().keys().collect();
    let other = "f".repeat(32);
    let mut want = vec![&key, &other];
    want.sort();
    assert_eq!(keys, want);
    // Entries in key order: the file's bytes depend only on what it holds.
    let text = std::fs::read_to_string(&path).unwrap();
    let at = |k: &str| text.find(&format!("\"{k}\": {{")).unwrap();
    assert!(at(want[0]) < at(want[1]), "{text}");
    assert!(text.ends_with("}\n"));
}

#[test]
fn a_skipped_search_is_cached_for_runs_no_longer_than_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let c = candidates(8, 16, 4);
    let (w, x) = data(&c);
    let cpu = CpuRuntime::default();
    let run = |executes: Option<u64>| {
        let opts = SearchOptions {
            run: executes.map(|executes| lumen_runtime::search::RunPlan {
                executes,
                spent: std::time::Duration::ZERO,
            }),
            ..options()
        };
        tuned_search(&cpu, &c, &w, &x, &opts, Progress::Hidden, Some(&path)).expect("search")
    };
    // Two executes: too short; the skip is stored with the run's executes.
    let first = run(Some(2));
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    assert!(first.report.as_ref().unwrap().too_short());
    assert_eq!(first.cache.as_ref().unwrap().status, CacheStatus::Stored);
    let key = first.cache.as_ref().unwrap().key.clone();
    let entry = &file_json(&path)["entries"][&key];
    assert_eq!((&entry["decision_kind"], &entry["run_executes"]), (&"too_short".into(), &2.into()));
    assert_eq!(entry["selected"], "fused");
    // A run of as many executes or fewer takes it.
    for executes in [1, 2] {
        let hit = run(Some(executes));
        assert_eq!(hit.cache.as_ref().unwrap().status, CacheStatus::Hit, "{executes}");
        assert!(hit.report.is_none() && hit.warnings.is_empty());
    }
    // A longer run is not stuck with it: a fresh decision (still too short here) replaces it,
    // quietly, under the same key.
    let longer = run(Some(3));
    assert!(longer.warnings.is_empty(), "{:?}", longer.warnings);
    assert_eq!(longer.cache.as_ref().unwrap().status, CacheStatus::Stored);
    assert_eq!(file_json(&path)["entries"][&key]["run_executes"], 3);
    // An explicit budget (no share rule) asks for a search: it measures, and its entry then
    // answers every run (a measured entry records no run).
    let searched = run(None);
    assert!(!searched.report.as_ref().unwrap().too_short());
    assert_eq!(searched.cache.as_ref().unwrap().status, CacheStatus::Stored);
    assert_eq!(file_json(&path)["entries"][&key].get("run_executes"), None);
    assert_eq!(run(Some(1_000_000)).cache.unwrap().status, CacheStatus::Hit);
}

/// A cache path that is a symbolic link (even to a file not made yet) stays a link: the file it
/// names is written, and a second search finds the choice through the link.
#[cfg(unix)]
#[test]
fn a_linked_cache_file_is_written_through_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let c = candidates(8, 16, 4);
    let first = tuned(&c, &link);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(dir.path().join("real.json").is_file());
    let again = tuned(&c, &link);
    assert_eq!(again.selected, first.selected);
    assert!(matches!(again.cache.map(|c| c.status), Some(CacheStatus::Hit)), "a hit");
}
