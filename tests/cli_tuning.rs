//! End-to-end: the search's choice is stable and can be cached. Two identical `lumen run`s
//! write byte-identical `LLIR_DUMP_DIR` dumps; with `--tuning-cache FILE` (or
//! `LUMEN_TUNING_CACHE`) the second run says it skipped the search, in text and JSON, and runs
//! the same candidate; a corrupt or foreign cache file is one `warning:` line on stderr and a
//! fresh search, never a failure. Timings are never asserted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

use common::{lumen_env as lumen, ok_env as ok};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// Every file of `dir` by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn identical_runs_write_identical_dumps() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The cost model's pick: a search, where one runs, may select another candidate on
    // another run (the times differ), and dumps the program it selected.
    let args = ["run", DIGITS, "--runs", "1", "--no-search"];
    ok(&args, &[("LLIR_DUMP_DIR", a.path().to_str().unwrap())]);
    ok(&args, &[("LLIR_DUMP_DIR", b.path().to_str().unwrap())]);
    let (fa, fb) = (files(a.path()), files(b.path()));
    assert_eq!(fa.len(), 4, "{:?}", fa.keys());
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (name, bytes) in &fa {
        assert!(bytes == &fb[name], "{name} differs between two identical runs");
    }
}

#[test]
fn a_rerun_with_the_cache_skips_the_search_and_selects_the_same_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tuning.json");
    let cache_arg = cache.to_str().unwrap();
    let (d1, d2) = (dir.path().join("d1"), dir.path().join("d2"));
    // --trials asks for a search that measures (a one-execute run is too short otherwise).
    let args =
        ["run", DIGITS, "--runs", "1", "--trials", "4", "--json", "--tuning-cache", cache_arg];

    let first = ok(&args, &[("LLIR_DUMP_DIR", d1.to_str().unwrap())]);
    assert_eq!(String::from_utf8_lossy(&first.stderr), "");
    let v1 = json(&first);
    assert_eq!(v1["searched"], true);
    assert_eq!(v1["chosen_by"], "search");
    let t1 = &v1["tuning_cache"];
    assert_eq!(t1["status"], "stored");
    assert_eq!(t1["skipped_search"], false);
    assert_eq!(t1["file"], cache_arg);
    let key = t1["key"].as_str().unwrap();
    assert_eq!(key.len(), 32);

    let second = ok(&args, &[("LLIR_DUMP_DIR", d2.to_str().unwrap())]);
    assert_eq!(String::from_utf8_lossy(&second.stderr), "");
    let v2 = json(&second);
    assert_eq!(v2["searched"], false);
    assert_eq!(v2["chosen_by"], "tuning_cache");
    assert_eq!(v2["candidates"], Value::Null);
    assert_eq!(v2["phases"]["search"]["runs"], 1);
    let t2 = &v2["tuning_cache"];
    assert_eq!(
        (&t2["status"], &t2["skipped_search"], &t2["key"]),
        (&"hit".into(), &true.into(), &key.into())
    );
    // The same candidate, the recorded decision, the same checks and dumps.
    assert_eq!(v2["label"], v1["label"]);
    assert_eq!(t2["entry"]["selected"], v1["decision"]["selected"]);
    assert_eq!(v2["decision"]["recorded"], true);
    assert_eq!(v2["decision"]["text"], v1["decision"]["text"]);
    assert_eq!(v2["decision"]["kind"], v1["decision"]["kind"]);
    assert_eq!(v2["correct"], 439);
    assert_eq!(files(&d1), files(&d2));

    // The text says so too, and the environment variable names the same cache.
    let out = ok(&["run", DIGITS, "--runs", "1"], &[("LUMEN_TUNING_CACHE", cache_arg)]);
    let text = String::from_utf8(out.stdout).unwrap();
    let search = text.lines().find(|l| l.starts_with("search ")).unwrap();
    assert!(
        search.starts_with(&format!(
            "search     skipped: the tuning cache {cache_arg} holds this program's choice on this \
             machine (key {key}, read in "
        )),
        "{text}"
    );
    let selected = v1["decision"]["selected"].as_str().unwrap();
    assert!(search.contains(&format!(" ms): {selected}, from a search of ")), "{search}");
    let choice = text.lines().find(|l| l.starts_with("choice ")).unwrap();
    assert!(choice.ends_with(" (recorded)"), "{choice}");
    assert!(!text.contains("candidate  median_ms"), "no table without a search: {text}");
    assert!(text.contains(&format!("program    digits_mlp-{selected} on cpu:")), "{text}");

    // The flag wins over the environment; an empty variable is no cache.
    let other = dir.path().join("other.json");
    let v = json(&ok(
        &["run", DIGITS, "--runs", "1", "--json", "--tuning-cache", other.to_str().unwrap()],
        &[("LUMEN_TUNING_CACHE", cache_arg)],
    ));
    assert_eq!(v["tuning_cache"]["status"], "stored");
    let v = json(&ok(&["run", DIGITS, "--runs", "1", "--json"], &[("LUMEN_TUNING_CACHE", "")]));
    assert_eq!(v["tuning_cache"], Value::Null);
    // Without a search there is no cache: a usage error with the flag, ignored from the env.
    let out = lumen(&["run", DIGITS, "--no-search", "--tuning-cache", cache_arg], &[]);
    assert_eq!(out.status.code(), Some(2));
    let v = json(&ok(
        &["run", DIGITS, "--runs", "1", "--no-search", "--json"],
        &[("LUMEN_TUNING_CACHE", cache_arg)],
    ));
    assert_eq!((&v["chosen_by"], &v["tuning_cache"]), (&"cost_model".into(), &Value::Null));
}

#[test]
fn a_text_run_says_it_stored_the_choice() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c.json");
    let out = ok(&["run", DIGITS, "--runs", "1", "--tuning-cache", cache.to_str().unwrap()], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let key = json(&ok(
        &["run", DIGITS, "--runs", "1", "--json", "--tuning-cache", cache.to_str().unwrap()],
        &[],
    ))["tuning_cache"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains(&format!(
            "\ntuning     stored this choice in {} (key {key})\n",
            cache.display()
        )),
        "{text}"
    );
}

#[test]
fn a_corrupt_or_foreign_cache_is_a_warning_and_a_fresh_search() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tuning.json");
    let arg = cache.to_str().unwrap();
    let args = ["run", DIGITS, "--runs", "1", "--trials", "4", "--json", "--tuning-cache", arg];
    // Half a file (as a crash in the middle of a non-atomic write would leave).
    std::fs::write(&cache, b"{\"format\": \"lumen-tuning-cache/1\", \"entr").unwrap();
    let out = ok(&args, &[]);
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr
            .starts_with(&format!("warning: the tuning cache {arg} is not a lumen tuning cache (")),
        "{stderr}"
    );
    assert!(stderr.ends_with("): searching afresh, the file is left as it is\n"), "{stderr}");
    let v = json(&out);
    assert_eq!(
        (&v["searched"], &v["tuning_cache"]["status"]),
        (&true.into(), &"not_stored".into())
    );
    assert_eq!(v["correct"], 439);
    assert_eq!(std::fs::read(&cache).unwrap(), b"{\"format\": \"lumen-tuning-cache/1\", \"entr");

    // A cache written on another machine: a warning, a search, and this machine's entry added.
    std::fs::remove_file(&cache).unwrap();
    let key = json(&ok(&args, &[]))["tuning_cache"]["key"].as_str().unwrap().to_string();
    let mut file: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    let mut entry = file["entries"][&key].clone();
    entry["machine"] = "Some Other CPU; aarch64-macos; 12 cores".into();
    file["entries"] = serde_json::json!({ "0".repeat(32): entry });
    std::fs::write(&cache, serde_json::to_vec(&file).unwrap()).unwrap();
    let out = ok(&args, &[]);
    assert_eq!(
        String::from_utf8(out.stderr.clone()).unwrap(),
        format!(
            "warning: the tuning cache {arg} holds no entry for this machine (its 1 entry was \
             measured on: Some Other CPU; aarch64-macos; 12 cores): searching afresh\n"
        )
    );
    let v = json(&out);
    assert_eq!((&v["searched"], &v["tuning_cache"]["status"]), (&true.into(), &"stored".into()));
    let file: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(file["entries"].as_object().unwrap().len(), 2);
    // And now a hit, quietly.
    let out = ok(&args, &[]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(json(&out)["tuning_cache"]["status"], "hit");
}

#[test]
fn compare_profile_uses_the_cache_too() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tuning.json");
    let arg = cache.to_str().unwrap();
    let args = ["compare", "linear-relu", "--profile", "--json", "--tuning-cache", arg];
    let first = json(&ok(&args, &[]));
    assert_eq!(first["tuning_cache"]["status"], "stored");
    assert_eq!(first["measured"]["from_tuning_cache"], false);
    let second = json(&ok(&args, &[]));
    assert_eq!(second["tuning_cache"]["status"], "hit");
    assert_eq!(second["measured"]["from_tuning_cache"], true);
    assert_eq!(second["measured"]["selected"], first["measured"]["selected"]);
    assert_eq!(second["candidates"][0].get("median_ms"), None);
    let text = String::from_utf8(
        ok(&["compare", "linear-relu", "--profile", "--tuning-cache", arg], &[]).stdout,
    )
    .unwrap();
    assert!(text.contains("\nsearch     skipped: the tuning cache "), "{text}");
    let selected = first["measured"]["selected"].as_str().unwrap();
    assert!(
        text.contains(&format!("\nsearch selects: {selected} (linear-relu-{selected})\n")),
        "{text}"
    );
    // --tuning-cache needs --profile.
    assert_eq!(
        lumen(&["compare", "linear-relu", "--tuning-cache", arg], &[]).status.code(),
        Some(2)
    );
}

#[test]
fn a_skipped_search_is_cached_but_a_longer_run_decides_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tuning.json");
    let arg = cache.to_str().unwrap();
    // At 0.1% of the run a run of one or two executes is too short on any machine (a useful
    // search would need load and compile to take 999 times as long as itself); the default
    // share (25%) may search such a run when loading and compiling were slow.
    let run = |runs: &str, share: &str| {
        let mut args = vec!["run", DIGITS, "--runs", runs, "--json", "--tuning-cache", arg];
        if !share.is_empty() {
            args.extend(["--search-share", share]);
        }
        ok(&args, &[])
    };
    let entry = |key: &str| -> Value {
        let file: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
        file["entries"][key].clone()
    };
    // One execute: too short for a search; the skip is stored with its run's executes and
    // share.
    let first = json(&run("1", "0.001"));
    assert_eq!(
        (&first["decision"]["kind"], &first["tuning_cache"]["status"]),
        (&"too_short".into(), &"stored".into())
    );
    let key = first["tuning_cache"]["key"].as_str().unwrap().to_string();
    let recorded = entry(&key);
    assert_eq!(
        (&recorded["decision_kind"], &recorded["run_executes"], &recorded["rounds"]),
        (&"too_short".into(), &1.into(), &0.into())
    );
    assert_eq!(recorded["run_share"], 0.001);
    // The same run: a hit, which says what it reuses.
    let again = json(&run("1", "0.001"));
    assert_eq!(again["tuning_cache"]["status"], "hit");
    assert_eq!(
        (&again["decision"]["kind"], &again["label"]),
        (&"too_short".into(), &"digits_mlp-fused".into())
    );
    let out =
        ok(&["run", DIGITS, "--runs", "1", "--search-share", "0.001", "--tuning-cache", arg], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            " ms): fused, from a search skipped as too short for a run of 1 execute at a 0.1% \
             share in "
        ),
        "{text}"
    );
    // A longer run is not held to it: it decides afresh (and records its own run), quietly.
    let longer = run("2", "0.001");
    assert_eq!(String::from_utf8_lossy(&longer.stderr), "");
    let longer = json(&longer);
    assert_eq!(
        (&longer["tuning_cache"]["status"], &longer["decision"]["kind"]),
        (&"stored".into(), &"too_short".into())
    );
    assert_eq!(longer["tuning_cache"]["key"], key.as_str());
    assert_eq!(entry(&key)["run_executes"], 2);
    // Nor is a run allowed a larger share (too short at 0.1% says nothing of 25%).
    let wider = run("1", "");
    assert_eq!(String::from_utf8_lossy(&wider.stderr), "");
    let wider = json(&wider);
    assert_eq!(wider["tuning_cache"]["status"], "stored");
    let recorded = entry(&key);
    match wider["decision"]["kind"].as_str() {
        Some("too_short") => {
            assert_eq!(
                (&recorded["run_executes"], &recorded["run_share"]),
                (&1.into(), &0.25.into())
            )
        }
        _ => assert_eq!((recorded.get("run_executes"), recorded.get("run_share")), (None, None)),
    }
    // A hand-edited entry lumen would never write is a warning and a fresh search, which
    // replaces it.
    let edits: [(&str, Value, &str); 3] = [
        ("run_share", 1.5.into(), "run_share 1.5 is not a fraction strictly between 0 and 1"),
        ("run_share", (-0.5).into(), "run_share -0.5 is not a fraction strictly between 0 and 1"),
        ("decision_kind", "bogus".into(), "decision_kind `bogus` is none lumen writes"),
    ];
    for (field, value, why) in edits {
        let good = json(&run("1", "0.001"));
        assert_eq!(good["decision"]["kind"], "too_short");
        let mut file: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
        file["entries"][&key][field] = value;
        std::fs::write(&cache, serde_json::to_vec(&file).unwrap()).unwrap();
        let out = run("1", "0.001");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr,
            format!(
                "warning: the tuning cache {arg} holds an entry under this key that does not \
                 match this search ({why}): searching afresh\n"
            )
        );
        assert_eq!(json(&out)["tuning_cache"]["status"], "stored", "{field}");
        assert_eq!(entry(&key)["decision_kind"], "too_short", "{field}");
    }
}
