//! End-to-end: `lumen run` searches by default (SPEC section 5) on the digits MLP, its JSON and
//! text report the candidates, the rounds, the decision, search time and break-even; the
//! LUMINAL_LOG_LLIR block is the selected candidate's; no progress bar when stderr is not a
//! terminal; `lumen compare --profile` adds measured times; the tuning cache (`--tuning-cache`,
//! `LUMEN_TUNING_CACHE`) makes a rerun skip the search and select the same candidate, and a bad
//! cache file is a warning; two identical runs write byte-identical dumps. Timings are never
//! asserted.

use serde_json::Value;

mod common;

use common::{lumen_env, ok_env as ok};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&ok(args, &[]).stdout).expect("one JSON object on stdout")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The candidates list is well formed, exactly one is selected, and it is the decision's: the
/// cost model's pick when kept, otherwise a winner that passed the sign test.
fn check_candidates(v: &Value) -> &Vec<Value> {
    let list = v["candidates"].as_array().expect("candidates");
    let selected: Vec<&Value> = list.iter().filter(|c| c["selected"] == true).collect();
    assert_eq!(selected.len(), 1, "{list:?}");
    for c in list.iter().filter(|c| c["status"] == "measured") {
        assert!(f(&c["median_ms"]) >= 0.0);
        assert!(c["slab_bytes"].as_u64().unwrap() > 0);
        assert!(c["launches"].as_u64().unwrap() > 0);
    }
    let d = &v["decision"];
    assert_eq!(d["test"], "one-sided sign test");
    assert_eq!((f(&d["alpha"]), f(&d["min_speedup"])), (0.01, 0.03));
    assert_eq!(d["selected"], selected[0]["label"]);
    assert_eq!(d["recorded"], false);
    match d["kind"].as_str() {
        Some("kept") => {
            assert_eq!(d["selected"], d["baseline"]);
            assert!(d["text"].as_str().unwrap().starts_with("kept "), "{d}");
            if d["baseline_is_cost_model_pick"] == true {
                assert_eq!(selected[0]["cost_model_pick"], true);
            }
        }
        Some("measured_winner") => {
            assert_eq!(d["winner"], selected[0]["label"]);
            assert!(f(&d["p_value"]) <= f(&d["alpha_per_comparison"]), "{d}");
            assert!(f(&d["median_speedup"]) >= 0.03, "{d}");
        }
        other => panic!("decision kind {other:?}"),
    }
    assert_eq!(v["label"], selected[0]["program_label"]);
    assert_eq!(v["slab_bytes"], selected[0]["slab_bytes"]);
    assert_eq!(v["launches"], selected[0]["launches"]);
    list
}

#[test]
fn digits_run_searches_by_default() {
    let v = json(&["run", DIGITS, "--json", "--runs", "2", "--trials", "3"]);
    assert_eq!(v["searched"], true);
    let list = check_candidates(&v);
    let labels: Vec<&str> = list.iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    assert!(list.iter().all(|c| c["status"] == "measured"));
    // Interleaved rounds: every candidate timed once per round, 3 rounds (no early stop
    // before 3).
    assert!(list.iter().all(|c| c["trials_ms"].as_array().unwrap().len() == 3));
    assert_eq!(v["decision"]["rounds"], 3);
    let launches: Vec<u64> = list.iter().map(|c| c["launches"].as_u64().unwrap()).collect();
    assert_eq!(launches, [8, 5, 3]);
    // Whatever wins computes the same MLP: every candidate within the search's tolerance of
    // the unfused reference, which is lumen run's own default budget.
    assert_eq!(v["correct"], 439);
    assert!(f(&v["max_abs_err"]) <= 1e-4);
    let references: Vec<bool> = list.iter().map(|c| c["reference"] == true).collect();
    assert_eq!(references, [true, false, false]);
    assert_eq!(list[0]["max_abs_diff"], 0.0);
    assert!(list.iter().all(|c| f(&c["max_abs_diff"]) <= 1e-4), "{list:?}");
    assert_eq!(v["search_tolerance"], serde_json::json!({"abs": 1e-4, "rel": 1e-4}));
    assert_eq!(lumen_runtime::search::DEFAULT_TOLERANCE.abs, lumen::model::DEFAULT_TOLERANCE);

    // An explicit --trials asks for a search: no share rule.
    assert_eq!(v["decision"]["payoff"], Value::Null);

    // Phases: the search is its own phase, with the search time less the selected candidate's
    // prepare, which the search hands to the run (the prepare phase).
    let phases = v["phases"].as_object().unwrap();
    assert_eq!(phases["search"]["runs"], 1);
    let search_ms = f(&v["search_ms"]);
    assert!(search_ms > 0.0);
    let kept = f(&v["search_kept_prepare_ms"]);
    let winner = list.iter().find(|c| c["selected"] == true).unwrap();
    assert_eq!(kept, f(&winner["prepare_ms"]));
    assert!((f(&phases["search"]["seconds"]) * 1e3 - (search_ms - kept)).abs() < 1e-6);
    assert!((f(&phases["prepare"]["seconds"]) * 1e3 - kept).abs() < 1e-6);
    assert_eq!(phases["prepare"]["runs"], 1);
    assert!(f(&phases["search"]["share"]) > 0.0);
    let shares: f64 = phases.values().map(|p| f(&p["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-9);

    // Break-even: search_ms / (unfused - winner), or "never" when unfused wins or the kept
    // pick measured no faster than unfused (timing noise on a busy machine can do that).
    let unfused = f(&list[0]["median_ms"]);
    if winner["label"] == "unfused" || f(&winner["median_ms"]) >= unfused {
        assert_eq!(v["break_even"], "never");
    } else {
        let expected = search_ms / (unfused - f(&winner["median_ms"]));
        assert!((f(&v["break_even"]) - expected).abs() <= 1e-9 * expected, "{}", v["break_even"]);
    }
}

#[test]
fn digits_text_shows_candidates_and_break_even() {
    let out = ok(&["run", DIGITS, "--runs", "1", "--trials", "2"], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let header = text
        .lines()
        .position(|l| l == "candidate  median_ms  slab_bytes  launches  max_abs_diff  status")
        .unwrap_or_else(|| panic!("no candidate table: {text}"));
    let rows: Vec<&str> = text.lines().skip(header + 1).take(3).collect();
    for (row, label) in rows.iter().zip(["unfused", "bias", "fused"]) {
        assert!(row.starts_with(label) && row.contains("  measured"), "{row}");
    }
    assert!(rows[0].contains("  measured  reference"), "{text}");
    assert_eq!(rows.iter().filter(|r| r.contains("selected")).count(), 1, "{text}");
    assert!(text.lines().any(|l| l.starts_with("search ")
        && l.contains(
            " ms on cpu: 3 of 3 candidates measured in 2 interleaved rounds (2 planned)"
        )));
    assert!(
        text.lines().any(|l| l.starts_with("choice     kept the cost model's pick (fused): ")
            || l.starts_with("choice     measured winner: ")),
        "{text}"
    );
    let be = text.lines().find(|l| l.starts_with("break-even: ")).expect("break-even line");
    assert!(be.ends_with("against unfused)") || be.ends_with("no faster than unfused)"), "{be}");
    for phase in ["graph_compile ", "search ", "prepare ", "execute "] {
        assert!(text.lines().any(|l| l.starts_with(phase) && l.ends_with('%')), "{phase}: {text}");
    }
    // Not a terminal: no progress bar, nothing at all on stderr.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn no_search_runs_the_cost_models_pick() {
    let v = json(&["run", DIGITS, "--json", "--runs", "1", "--no-search"]);
    assert_eq!(v["searched"], false);
    assert_eq!(v["candidates"], Value::Null);
    assert_eq!(v["break_even"], Value::Null);
    assert_eq!(v["label"], "digits_mlp-fused");
    assert_eq!(v["launches"], 3);
    assert_eq!(v["phases"]["search"]["runs"], 0);
    assert_eq!(v["correct"], 439);
    // --no-fuse chooses directly too.
    let v = json(&["run", DIGITS, "--json", "--runs", "1", "--no-fuse"]);
    assert_eq!(v["searched"], false);
    assert_eq!(v["label"], "digits_mlp-unfused");
    // Search flags make no sense without a search: a usage error.
    let out = lumen_env(&["run", DIGITS, "--no-search", "--trials", "2"], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn limits_and_budget() {
    let v =
        json(&["run", DIGITS, "--json", "--runs", "1", "--trials", "1", "--max-candidates", "1"]);
    let list = check_candidates(&v);
    assert_eq!(list[0]["selected"], true);
    assert_eq!(list[1]["status"], "skipped");
    assert_eq!(list[1]["detail"], "skipped: candidate limit of 1 reached");
    // Only unfused was measured: unknown (null), not "never".
    assert_eq!(v["break_even"], Value::Null);
    for limit in [&["--max-candidates", "1"], &["--search-time-ms", "0"]] {
        let args = [&["run", DIGITS, "--runs", "1", "--trials", "1"][..], limit].concat();
        let text = String::from_utf8(ok(&args, &[]).stdout).unwrap();
        let be = text.lines().find(|l| l.starts_with("break-even: ")).expect("break-even line");
        assert_eq!(
            be, "break-even: unknown (only the unfused candidate was measured)",
            "{limit:?}"
        );
    }

    // Compiled for the CPU (no cuBLASLt workspace, weights resident), without in-place reuse
    // the unfused slab (645,120 B) is over 500 kB; the fused one (414,720 B) fits. (In place,
    // unfused also plans 414,720 B.)
    let v = json(&[
        "run",
        DIGITS,
        "--json",
        "--runs",
        "1",
        "--trials",
        "1",
        "--no-in-place",
        "--memory-budget",
        "500000",
    ]);
    let list = check_candidates(&v);
    assert_eq!(list[0]["status"], "over budget");
    assert_eq!(
        list[0]["detail"],
        "skipped: slab 645,120 bytes over the memory budget of 500,000 bytes"
    );
    assert_eq!(list[0]["median_ms"], Value::Null);
    assert_ne!(list[0]["selected"], true);
    assert_eq!(v["break_even"], Value::Null);

    let out = lumen_env(&["run", DIGITS, "--memory-budget", "1000"], &[]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: every candidate's slab exceeds the memory budget of 1,000 bytes (smallest: \
         414,720 bytes)\n"
    );
    let v =
        json(&["run", DIGITS, "--json", "--runs", "1", "--trials", "1", "--search-time-ms", "0"]);
    let list = check_candidates(&v);
    assert_eq!(list[0]["selected"], true);
    assert_eq!(list[2]["detail"], "skipped: time limit of 0.000 ms reached");
}

/// The LLIR_BEST blocks of stderr: (first line, lines between, as one string).
fn llir_best_blocks(stderr: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in stderr.lines() {
        if line.starts_with("LLIR_BEST ") {
            assert!(current.is_none(), "nested LLIR_BEST");
            current = Some((line.to_string(), String::new()));
        } else if line == "LLIR_BEST_END" {
            blocks.push(current.take().expect("LLIR_BEST_END without LLIR_BEST"));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    assert!(current.is_none(), "unterminated block");
    blocks
}

fn field<'a>(first_line: &'a str, key: &str) -> &'a str {
    first_line
        .split(' ')
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {first_line}"))
}

#[test]
fn log_llir_prints_the_selected_candidates_block() {
    let args = ["run", DIGITS, "--json", "--runs", "1", "--trials", "2"];
    let env = [("LUMINAL_LOG_LLIR", "1")];
    let out = ok(&args, &env);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let blocks = llir_best_blocks(&String::from_utf8(out.stderr).unwrap());
    // One block: the selected candidate's, with its median and canonical LLIR.
    assert_eq!(blocks.len(), 1);
    let (first, body) = &blocks[0];
    let list = v["candidates"].as_array().unwrap();
    let i = list.iter().position(|c| c["selected"] == true).unwrap();
    assert_eq!(field(first, "candidate"), i.to_string());
    let label = field(first, "label");
    assert_eq!(Some(label), list[i]["label"].as_str());
    let ms: f64 = field(first, "median_ms").parse().unwrap();
    assert!((ms - f(&list[i]["median_ms"])).abs() < 1e-6, "{first}");
    assert!(body.starts_with(&format!("# lumen LLIR: digits_mlp-{label}\n")), "{body}");

    // With one candidate the block is fixed: identical apart from its first line.
    let one = ["run", DIGITS, "--runs", "1", "--trials", "1", "--max-candidates", "1"];
    let a = llir_best_blocks(&String::from_utf8(ok(&one, &env).stderr).unwrap());
    let b = llir_best_blocks(&String::from_utf8(ok(&one, &env).stderr).unwrap());
    assert_eq!(a.len(), 1);
    assert_eq!(
        a.iter().map(|x| &x.1).collect::<Vec<_>>(),
        b.iter().map(|x| &x.1).collect::<Vec<_>>()
    );
}

#[test]
fn dump_dir_holds_the_selected_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        &["run", DIGITS, "--json", "--runs", "1", "--trials", "1"],
        &[("LLIR_DUMP_DIR", dir.path().to_str().unwrap())],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let label = v["label"].as_str().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["llir.dot", "llir.txt", "plan.svg", "plan.txt"].map(|ext| format!("{label}.{ext}"))
    );
}

#[test]
fn compare_profile_adds_measured_times() {
    let out = ok(&["compare", "linear-relu", "--profile", "--trials", "2"], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if cores == 1 { "1 thread".to_string() } else { format!("{cores} threads") };
    assert!(
        text.contains(&format!(
            "measured on cpu ({threads}) with random inputs and weights (seeded), medians of \
             interleaved rounds:"
        )),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("search selects: ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("choice     ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("break-even: ")), "{text}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");

    for (m, k, n) in [("64", "256", "64"), ("512", "2048", "512")] {
        let v = json(&[
            "compare",
            "linear-relu",
            "--m",
            m,
            "--k",
            k,
            "--n",
            n,
            "--profile",
            "--trials",
            "2",
            "--json",
        ]);
        let list = v["candidates"].as_array().unwrap();
        assert_eq!(list.len(), 3);
        let chosen: Vec<usize> = (0..3).filter(|&i| list[i]["selected"] == true).collect();
        assert_eq!(chosen.len(), 1);
        assert_eq!(v["measured"]["selected"], list[chosen[0]]["label"]);
        assert_eq!(v["measured"]["fastest"], list[chosen[0]]["label"]);
        assert_eq!(v["decision"]["selected"], list[chosen[0]]["label"]);
        assert_eq!(v["measured"]["from_tuning_cache"], false);
        assert_eq!(v["tuning_cache"], Value::Null);
        assert_eq!(v["measured"]["runtime"], "cpu");
        assert!(f(&v["measured"]["search_ms"]) > 0.0);
        // Measured against the unfused reference: the same values on the CPU.
        assert_eq!(v["measured"]["reference"], "unfused");
        assert_eq!(v["measured"]["tolerance"], serde_json::json!({"abs": 1e-4, "rel": 1e-4}));
        for c in list {
            assert_eq!(c["measured_status"], "measured", "{c}");
            assert!(f(&c["max_abs_diff"]) <= 1e-4, "{c}");
        }
    }
    // Without --profile nothing is measured; --trials needs --profile.
    let v = json(&["compare", "linear-relu", "--json"]);
    assert_eq!(v["candidates"][0].get("median_ms"), None);
    assert_eq!(lumen_env(&["compare", "linear-relu", "--trials", "2"], &[]).status.code(), Some(2));
}

#[test]
fn one_trial_is_singular_and_a_small_saving_keeps_its_digits() {
    let out = ok(&["run", DIGITS, "--runs", "1", "--trials", "1", "--max-candidates", "1"], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let search = text.lines().find(|l| l.starts_with("search ")).unwrap();
    assert!(
        search.contains(
            " ms on cpu: 1 of 3 candidates measured in 1 interleaved round (1 planned); "
        ) && search.ends_with(" ms of it the selected candidate's prepare, kept for the run"),
        "{text}"
    );
    assert!(text.contains("\nrepeats    1 execute, "), "{text}");
    let out = ok(&["compare", "linear-relu", "--profile", "--trials", "1"], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(seeded), medians of interleaved rounds:\n"), "{text}");
    // The saving per execute is printed with three significant digits, never as 0.000.
    let be = text.lines().find(|l| l.starts_with("break-even: ")).expect("break-even line");
    if let Some(saved) = be.split(" ms / ").nth(1).and_then(|r| r.split(' ').next()) {
        let digits = saved.trim_start_matches(['0', '.']);
        assert!(digits.len() >= 3, "{be}");
    }
}

#[test]
fn search_tolerance_is_a_flag_of_run_and_compare_profile() {
    // Zero tolerance: the CPU candidates agree exactly, so all three are still measured.
    let v = json(&[
        "run",
        DIGITS,
        "--json",
        "--runs",
        "1",
        "--trials",
        "1",
        "--search-tolerance",
        "0,0",
    ]);
    assert_eq!(v["search_tolerance"], serde_json::json!({"abs": 0.0, "rel": 0.0}));
    let list = check_candidates(&v);
    assert!(list.iter().all(|c| c["status"] == "measured"), "{list:?}");
    // ABS alone keeps the default relative part.
    let v = json(&[
        "compare",
        "linear-relu",
        "--profile",
        "--trials",
        "1",
        "--search-tolerance",
        "3e-3",
        "--json",
    ]);
    assert_eq!(v["measured"]["tolerance"], serde_json::json!({"abs": 3e-3, "rel": 1e-4}));
    // Bad values and combinations are usage errors (one line, status 2).
    for args in [
        &["run", DIGITS, "--search-tolerance=-1"][..],
        &["run", DIGITS, "--search-tolerance", "1,2,3"],
        &["run", DIGITS, "--search-tolerance", "nan"],
        &["run", DIGITS, "--no-search", "--search-tolerance", "1"],
        &["compare", "linear-relu", "--search-tolerance", "1"],
    ] {
        let out = lumen_env(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

#[test]
fn a_default_run_searches_only_when_it_can_pay_for_itself() {
    // No explicit budget: the share rule, by default at most 25% of the run (a third of the
    // run without the search). Whether one execute pays for a search depends on how long
    // loading and compiling took against one execute (a slow start on a busy machine can
    // make it fit), so only the arithmetic is checked here.
    let check = |p: &Value, share: f64| {
        assert_eq!(
            (&p["share"], &p["run_executes"], &p["rounds"]),
            (&share.into(), &1.into(), &8.into())
        );
        assert_eq!((&p["challengers"], &p["reuses_prepare"]), (&2.into(), &true.into()));
        let run_ms = f(&p["spent_ms"]) + f(&p["prepare_ms"]) + f(&p["execute_ms"]);
        assert!((f(&p["run_ms"]) - run_ms).abs() < 1e-9 * run_ms.max(1.0), "{p}");
        let budget = share / (1.0 - share) * run_ms;
        assert!((f(&p["budget_ms"]) - budget).abs() < 1e-9 * run_ms.max(1.0), "{p}");
        let needs = f(&p["execute_ms"]) * (1.0 + 2.0 + 8.0 * 3.0) + 2.0 * f(&p["prepare_ms"]);
        assert!((f(&p["needs_ms"]) - needs).abs() < 1e-9 * needs.max(1.0), "{p}");
        assert_eq!(p["fits"], needs <= budget, "{p}");
    };
    check(&json(&["run", DIGITS, "--json", "--runs", "1"])["decision"]["payoff"], 0.25);
    // At 0.1% of the run one execute is too short on any machine: a useful search (two more
    // prepares and 8 rounds of three candidates) would need load and compile to take 999
    // times as long as all that.
    let v = json(&["run", DIGITS, "--json", "--runs", "1", "--search-share", "0.001"]);
    let d = &v["decision"];
    let p = &d["payoff"];
    check(p, 0.001);
    assert_eq!(p["fits"], false, "{p}");
    assert_eq!(
        (&d["kind"], &v["searched"], &v["chosen_by"]),
        (&"too_short".into(), &false.into(), &"search".into())
    );
    assert_eq!((&d["selected"], &d["rounds"]), (&"fused".into(), &0.into()));
    assert_eq!(v["label"], "digits_mlp-fused");
    assert_eq!(v["correct"], 439);
    let list = v["candidates"].as_array().unwrap();
    for c in &list[..2] {
        assert_eq!(c["status"], "skipped", "{c}");
        assert_eq!(c["detail"], "skipped: the run is too short for a search to pay for itself");
        assert_eq!(c["prepare_ms"], Value::Null);
    }
    assert_eq!((&list[2]["status"], &list[2]["selected"]), (&"measured".into(), &true.into()));
    assert_eq!(v["break_even"], Value::Null);
    // The pick's prepare, done by the search, is the run's only prepare.
    let kept = f(&v["search_kept_prepare_ms"]);
    assert_eq!(kept, f(&list[2]["prepare_ms"]));
    assert!((f(&v["phases"]["prepare"]["seconds"]) * 1e3 - kept).abs() < 1e-6);
    assert!(d["text"].as_str().unwrap().starts_with("the run (1 execute of "), "{d}");

    let out = ok(&["run", DIGITS, "--runs", "1", "--search-share", "0.001"], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let search = text.lines().find(|l| l.starts_with("search ")).unwrap();
    assert!(search.starts_with("search     skipped: the run (1 execute of "), "{text}");
    assert!(
        search.ends_with(", 0.1% of the run with it); kept the cost model's pick (fused)"),
        "{search}"
    );
    assert!(!text.contains("candidate  median_ms"), "no table for a skipped search: {text}");
    assert!(text.contains("program    digits_mlp-fused on cpu:"), "{text}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");

    // Any explicit budget asks for a search, however short the run.
    for flag in [&["--trials", "2"][..], &["--search-time-ms", "60000"], &["--max-candidates", "3"]]
    {
        let args = [&["run", DIGITS, "--json", "--runs", "1"][..], flag].concat();
        let v = json(&args);
        assert_eq!(
            (&v["searched"], &v["decision"]["payoff"]),
            (&true.into(), &Value::Null),
            "{flag:?}"
        );
        assert!(check_candidates(&v).iter().all(|c| c["status"] == "measured"), "{flag:?}");
        // ... so a share for the rule alongside one is a usage error.
        let args = [&["run", DIGITS, "--search-share", "0.5"][..], flag].concat();
        assert_eq!(lumen_env(&args, &[]).status.code(), Some(2), "{flag:?}");
    }
    // A share is a fraction strictly between 0 and 1 (a negative one is a value, not a flag).
    let out = lumen_env(&["run", DIGITS, "--search-share", "-0.5"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`-0.5` is not a fraction strictly between 0 and 1"), "{err}");
    for bad in ["0", "1", "25", "-0.1", "nan", "a quarter"] {
        let out = lumen_env(&["run", DIGITS, &format!("--search-share={bad}")], &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not a fraction strictly between 0 and 1"), "{bad}: {err}");
    }
}

/// `compare` compiles for CUDA (the golden plans) unless it measures: `--profile` on the CPU
/// compiles for the CPU (no cuBLASLt workspace), and `--target` overrides either default.
/// `--threads` reaches the measuring runtime and the JSON; without `--profile` it is a usage
/// error, as is 0.
#[test]
fn compare_profile_compiles_for_the_cpu_and_takes_threads() {
    let slabs = |v: &Value| -> Vec<u64> {
        v["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["slab_bytes"].as_u64().unwrap())
            .collect()
    };
    let plain = json(&["compare", "linear-relu", "--json"]);
    assert_eq!(slabs(&plain), [1_196_288; 3]);
    let args = ["compare", "linear-relu", "--json", "--profile", "--trials", "1", "--threads", "1"];
    let profiled = json(&args);
    assert_eq!(slabs(&profiled), [147_712; 3]);
    assert_eq!(profiled["threads"], 1);
    let cuda = json(&[&args[..], &["--target", "cuda"]].concat());
    assert_eq!(slabs(&cuda), [1_196_288; 3]);
    let cpu = json(&["compare", "linear-relu", "--json", "--target", "cpu"]);
    assert_eq!(slabs(&cpu), [147_712; 3]);

    let out = lumen_env(&["compare", "linear-relu", "--threads", "2"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--profile"), "{err}");
    let out = lumen_env(&["compare", "linear-relu", "--profile", "--threads", "0"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 threads cannot run anything"), "{err}");
}
