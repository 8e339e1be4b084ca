//! The tuning cache: a search's choice stored in a JSON file, so a rerun of the same program on
//! the same machine skips the search and runs the same candidate.
//!
//! **The key** is a 128-bit FNV-1a hash ([`fnv1a128`]), in hex, of: the file format, the
//! machine ([`machine`]: CPU model, architecture, OS, cores), the runtime and its options
//! ([`Runtime::tuning_identity`]: for CUDA the device's name, architecture and driver), the
//! search's question (the output tolerance, alpha, the minimum speedup, the memory budget,
//! the candidate limit), and every candidate's label and canonical LLIR text
//! (`lumen_compiler::dump::llir_text`, the same text as the `*.llir.txt` dumps). How long the
//! search measures (trials, budget, warm-up, time limit) is not in the key: it changes how
//! sure a search is, not what it is asked. Each entry also records those parts in words and
//! per-candidate LLIR hashes, and a hit is taken only when they all match the current ones.
//!
//! **The file** is one JSON object, `{"format": "lumen-tuning-cache/1", "entries": {KEY:
//! ENTRY, ...}}`, its entries in key order (a `BTreeMap`), so its bytes depend only on what it
//! holds. An entry records the selected candidate's label, the decision in words, the
//! measured medians and the search time. Writing re-reads the file, keeps every other key's
//! entry, and replaces the file atomically (a temporary file in the same directory, then a
//! rename), so a reader never sees half a file.
//!
//! **A skipped search** (the share rule found the run too short for a search to pay for
//! itself, [`search::payoff`]) is stored like any other choice, with decision kind
//! `too_short`, the run's number of executes ([`Entry::run_executes`]) and the share the rule
//! allowed ([`Entry::run_share`]). Such an entry says only that a run of that many executes was
//! too short at that share; it is taken for a run of at most that many executes under the
//! share rule at most that share, never for a longer run or a search with an explicit
//! budget (no share rule): those search afresh (no warning: nothing is wrong with the file)
//! and replace it with their own choice. An entry of a search that measured is taken for any
//! run: it is a measured answer, and reading it costs less than any search.
//!
//! **Bad files never crash a run or pick a wrong candidate**: a file that cannot be read, is
//! not JSON, is another format, or holds an entry under this key recorded for another
//! machine, runtime or program gives a `warning` (returned as text, for the caller to print)
//! and a fresh search. A file that is not a lumen tuning cache of this format (or cannot be
//! read) is left as it is; a foreign entry is replaced by the fresh search's. A missing file is
//! no warning: the search runs and creates it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lumen_compiler::dump;
use lumen_compiler::fusion::Candidate;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::search::{self, Progress, SearchError, SearchOptions, SearchReport, llir_best_block};
use crate::{PreparedProgram, Runtime, Tensors};

/// The `format` of the files this version reads and writes.
pub const FORMAT: &str = "lumen-tuning-cache/1";

/// The 128-bit FNV-1a hash of `bytes` (offset basis 0x6c62272e07bb014262b821756295c58d,
/// prime 2^88 + 0x13b): a stable hash, the same on every machine and Rust version.
///
/// ```
/// use lumen_runtime::tuning::fnv1a128;
/// assert_eq!(fnv1a128(b""), 0x6c62272e07bb014262b821756295c58d);
/// assert_eq!(fnv1a128(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
/// ```
pub fn fnv1a128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = (1 << 88) + 0x13b;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

/// This machine in words, for the key: the CPU model (`model name` of `/proc/cpuinfo`, or
/// `unknown cpu` where there is none), the architecture and OS (`std::env::consts`) and the
/// cores available to this process: `Intel(R) Xeon(R) Processor; x86_64-linux; 2 cores`.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    machine_words(&cpuinfo, std::env::consts::ARCH, std::env::consts::OS, cores)
}

/// [`machine`] from its parts: the first `model name` (or `Hardware`, `cpu model`) line of a
/// `/proc/cpuinfo` text.
fn machine_words(cpuinfo: &str, arch: &str, os: &str, cores: usize) -> String {
    let model = cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| ["model name", "Hardware", "cpu model"].contains(&k.trim()))
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "unknown cpu".to_string());
    format!("{model}; {arch}-{os}; {cores} core{}", if cores == 1 { "" } else { "s" })
}

/// One candidate as an entry records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryCandidate {
    /// Its label (`unfused`, `bias`, `fused`, ...).
    pub label: String,
    /// [`fnv1a128`] of its canonical LLIR text, 32 hex digits.
    pub llir_hash: String,
    /// What the search did with it (`measured`, `mismatch`, ...); `-` before a search.
    pub status: String,
    /// Its median round, ms; `None` when not measured.
    pub median_ms: Option<f64>,
}

/// One stored choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The machine it was measured on ([`machine`]).
    pub machine: String,
    /// The runtime and its options ([`Runtime::tuning_identity`]).
    pub runtime: String,
    /// The search's question in words (tolerance, alpha, minimum speedup, limits).
    pub question: String,
    /// Every candidate, in candidate order.
    pub candidates: Vec<EntryCandidate>,
    /// The selected candidate's label.
    pub selected: String,
    /// `kept` or `measured_winner` ([`search::stats::Decision::kind`]).
    pub decision_kind: String,
    /// The decision in words ([`search::stats::Decision`]'s text).
    pub decision: String,
    /// Timed rounds the search ran.
    pub rounds: usize,
    /// The search's wall time, ms.
    pub search_ms: f64,
    /// For a search the share rule skipped (`decision_kind` `too_short`), the executes of the
    /// run it was too short for: the entry is taken only for runs of at most as many. `None`
    /// (absent from the file) for a search that measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_executes: Option<u64>,
    /// For a skipped search, the largest share of the run the rule allowed it
    /// ([`SearchOptions::share`], a fraction): the entry is taken only for searches allowed at
    /// most as much. `None` (absent from the file; entries written before it was recorded) is
    /// read as [`search::SEARCH_SHARE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_share: Option<f64>,
}

impl Entry {
    /// Whether this entry may choose for a search with `options`: always for a search that
    /// measured; for a skipped one (`too_short`) only under the share rule with a run of at
    /// most [`Entry::run_executes`] executes and a share of at most [`Entry::run_share`] (a
    /// run too short at one share is too short at any smaller one).
    pub fn answers(&self, options: &SearchOptions) -> bool {
        if self.decision_kind != "too_short" {
            return true;
        }
        let share = self.run_share.unwrap_or(search::SEARCH_SHARE);
        match (search::payoff::applies(options), self.run_executes) {
            (Some(plan), Some(recorded)) => plan.executes <= recorded && options.share <= share,
            _ => false,
        }
    }
}

/// The file's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CacheFile {
    format: String,
    entries: BTreeMap<String, Entry>,
}

/// Why the cache file could not be used or written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TuningError {
    /// Reading failed (other than the file not existing).
    #[error("cannot read the tuning cache {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the cache's shape.
    #[error("the tuning cache {} is not a lumen tuning cache ({reason})", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// serde_json's message.
        reason: String,
    },
    /// The file is a lumen tuning cache of another format version.
    #[error("the tuning cache {} has format `{found}`, this lumen reads `{FORMAT}`", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// The format it declares.
        found: String,
    },
    /// Writing the temporary file or renaming it over the cache failed.
    #[error("cannot write the tuning cache {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What the key is made of, for one search of some candidates on a runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningKey {
    /// [`fnv1a128`] of the parts below, 32 hex digits.
    pub key: String,
    /// [`machine`].
    pub machine: String,
    /// [`Runtime::tuning_identity`].
    pub runtime: String,
    /// The search's question in words.
    pub question: String,
    /// Every candidate's label and LLIR hash, in candidate order.
    pub candidates: Vec<(String, String)>,
}

impl TuningKey {
    /// The key of searching `candidates` on `runtime` with `options`, on `machine` (normally
    /// [`machine()`]).
    pub fn new(
        runtime: &dyn Runtime,
        candidates: &[Candidate],
        options: &SearchOptions,
        machine: &str,
    ) -> Self {
        let question = format!(
            "tolerance {}; alpha {}; min_speedup {}; memory_budget {}; max_candidates {}",
            options.tolerance,
            options.alpha,
            options.min_speedup,
            options.memory_budget.map_or("none".to_string(), |b| b.to_string()),
            options.max_candidates.map_or("none".to_string(), |n| n.to_string()),
        );
        let candidates: Vec<(String, String)> = candidates
            .iter()
            .map(|c| {
                let text = dump::llir_text(&c.program);
                (c.label.clone(), format!("{:032x}", fnv1a128(text.as_bytes())))
            })
            .collect();
        let runtime = runtime.tuning_identity();
        let mut material = String::new();
        let _ = write!(material, "{FORMAT}\0{machine}\0{runtime}\0{question}\0");
        for (label, hash) in &candidates {
            let _ = write!(material, "{label}\0{hash}\0");
        }
        Self {
            key: format!("{:032x}", fnv1a128(material.as_bytes())),
            machine: machine.to_string(),
            runtime,
            question,
            candidates,
        }
    }

    /// Why `entry` (found under this key) does not belong to it, or `None` when it does: another
    /// machine, runtime, question or candidate list, a selected label that is no candidate, or
    /// a decision lumen never writes (an unknown kind, a skipped search without its run or with
    /// a share outside (0, 1): a hand-edited file).
    fn mismatch(&self, entry: &Entry) -> Option<String> {
        if entry.machine != self.machine {
            return Some(format!("machine `{}`, this one `{}`", entry.machine, self.machine));
        }
        if entry.runtime != self.runtime {
            return Some(format!("runtime `{}`, this one `{}`", entry.runtime, self.runtime));
        }
        if entry.question != self.question {
            return Some(format!("search `{}`, this one `{}`", entry.question, self.question));
        }
        let recorded: Vec<(&str, &str)> =
            entry.candidates.iter().map(|c| (c.label.as_str(), c.llir_hash.as_str())).collect();
        let current: Vec<(&str, &str)> =
            self.candidates.iter().map(|(l, h)| (l.as_str(), h.as_str())).collect();
        if recorded != current {
            return Some("other candidates or LLIR".to_string());
        }
        if !current.iter().any(|(l, _)| *l == entry.selected) {
            return Some(format!("selected `{}` is no candidate", entry.selected));
        }
        match (entry.decision_kind.as_str(), entry.run_executes, entry.run_share) {
            ("kept" | "measured_winner", None, None) => None,
            ("too_short", Some(_), None) => None,
            ("too_short", Some(_), Some(share)) if share > 0.0 && share < 1.0 => None,
            ("too_short", None, _) => Some("a skipped search without run_executes".to_string()),
            ("too_short", _, Some(share)) => {
                Some(format!("run_share {share} is not a fraction strictly between 0 and 1"))
            }
            ("kept" | "measured_winner", _, _) => {
                Some("a measured search with a skipped search's run_executes or run_share".into())
            }
            (kind, _, _) => Some(format!("decision_kind `{kind}` is none lumen writes")),
        }
    }

    /// The entry recording `report`'s choice under this key.
    pub fn entry(&self, report: &SearchReport) -> Entry {
        let candidates = self
            .candidates
            .iter()
            .zip(&report.candidates)
            .map(|((label, hash), row)| EntryCandidate {
                label: label.clone(),
                llir_hash: hash.clone(),
                status: row.status.word().to_string(),
                median_ms: row.median_ms,
            })
            .collect();
        Entry {
            machine: self.machine.clone(),
            runtime: self.runtime.clone(),
            question: self.question.clone(),
            candidates,
            selected: report.winner().map(|w| w.label.clone()).unwrap_or_default(),
            decision_kind: report.decision_kind().to_string(),
            decision: report.decision_text(),
            rounds: report.rounds,
            search_ms: report.search_ms,
            run_executes: report.payoff.as_ref().filter(|p| !p.fits).map(|p| p.run_executes),
            run_share: report.payoff.as_ref().filter(|p| !p.fits).map(|p| p.share),
        }
    }
}

/// Reads the cache file at `path`: `Ok(None)` when it does not exist.
///
/// # Errors
/// [`TuningError::Read`], [`TuningError::Corrupt`], [`TuningError::Format`].
fn read_file(path: &Path) -> Result<Option<CacheFile>, TuningError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(TuningError::Read { path: path.to_path_buf(), source }),
    };
    let corrupt = |e: serde_json::Error| TuningError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    // The format first, so another version's file is named as such, not as corrupt.
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(corrupt)?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(found) => {
            return Err(TuningError::Format { path: path.to_path_buf(), found: found.to_string() });
        }
        None => {
            return Err(TuningError::Corrupt {
                path: path.to_path_buf(),
                reason: "no `format` string".to_string(),
            });
        }
    }
    serde_json::from_value(value).map(Some).map_err(corrupt)
}

/// Stores `entry` under `key` in the cache file at `path`: re-reads the file (keeping every
/// other key's entry), then writes the whole file to a temporary file beside it and renames
/// that over it. A symbolic link is followed, so the file it names is updated and the link
/// stays a link. Two processes storing at the same moment may lose one entry (the last rename
/// wins); the cache is then only colder, never wrong.
///
/// # Errors
/// [`TuningError::Read`], [`TuningError::Corrupt`] or [`TuningError::Format`] for a file that
/// exists but cannot be read or is not a cache of this format (it is then left as it is);
/// [`TuningError::Write`] when the temporary file cannot be written or renamed.
pub fn store(path: &Path, key: &str, entry: Entry) -> Result<(), TuningError> {
    // The link's target, even one that does not exist yet (a relative target is relative to
    // the link's folder).
    let resolved = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_symlink())
        .and_then(|_| {
            std::fs::canonicalize(path).ok().or_else(|| {
                let target = std::fs::read_link(path).ok()?;
                Some(path.parent().map_or(target.clone(), |dir| dir.join(&target)))
            })
        });
    let path = resolved.as_deref().unwrap_or(path);
    let mut file = read_file(path)?
        .unwrap_or_else(|| CacheFile { format: FORMAT.to_string(), entries: BTreeMap::new() });
    file.entries.insert(key.to_string(), entry);
    let write_error = |source| TuningError::Write { path: path.to_path_buf(), source };
    let mut text =
        serde_json::to_string_pretty(&file).map_err(|e| write_error(std::io::Error::other(e)))?;
    text.push('\n');
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if let Err(source) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_error(source));
    }
    Ok(())
}

/// What the tuning cache did for one search.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// The file held this key's choice: the search was skipped.
    Hit,
    /// No usable entry: the search ran and its choice was stored.
    Stored,
    /// No usable entry: the search ran, and its choice could not be stored (a warning says
    /// why).
    NotStored,
}

/// The tuning cache's part in a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheUse {
    /// The cache file.
    pub file: PathBuf,
    /// The key, 32 hex digits.
    pub key: String,
    /// What happened.
    pub status: CacheStatus,
    /// On a hit, the entry that chose.
    pub entry: Option<Entry>,
    /// Wall time of reading (and, after a search, writing) the file, ms.
    pub ms: f64,
}

/// A search, or the choice a tuning cache recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuned {
    /// The selected candidate's index.
    pub selected: usize,
    /// The search's report; `None` when the cache chose.
    pub report: Option<SearchReport>,
    /// The cache's part; `None` without a cache.
    pub cache: Option<CacheUse>,
    /// Warning lines (without the `warning: ` prefix) about the cache file, for stderr.
    pub warnings: Vec<String>,
}

impl Tuned {
    /// Wall time of the search, or of reading the cache on a hit, ms.
    pub fn search_ms(&self) -> f64 {
        match (&self.report, &self.cache) {
            (Some(r), c) => r.search_ms + c.as_ref().map_or(0.0, |c| c.ms),
            (None, Some(c)) => c.ms,
            (None, None) => 0.0,
        }
    }
}

/// [`search::search`] through the tuning cache at `cache` (none: a plain search). A usable
/// entry under this search's key ([`Entry::answers`]) selects its candidate without a search
/// (the selected candidate's dumps still go to [`SearchOptions::dump_dir`], and its
/// `LLIR_BEST` block, with the recorded median, to stderr under [`SearchOptions::log_llir`]);
/// otherwise the search runs and its choice is stored. Problems with the file are warnings,
/// never errors.
///
/// # Errors
/// The search's ([`SearchError`]); on a hit, [`SearchError::Dump`] when the dumps cannot be
/// written.
pub fn tuned_search(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
    cache: Option<&Path>,
) -> Result<Tuned, SearchError> {
    tuned_impl(runtime, candidates, weights, inputs, options, progress, cache, false)
        .map(|(tuned, _)| tuned)
}

/// [`tuned_search`], with the selected candidate still prepared when a search ran
/// ([`search::search_prepared`]); `None` on a cache hit (nothing was prepared).
///
/// # Errors
/// As [`tuned_search`].
pub fn tuned_search_prepared(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
    cache: Option<&Path>,
) -> Result<(Tuned, Option<Box<dyn PreparedProgram>>), SearchError> {
    tuned_impl(runtime, candidates, weights, inputs, options, progress, cache, true)
}

/// [`tuned_search`] and [`tuned_search_prepared`].
#[allow(clippy::too_many_arguments)]
fn tuned_impl(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
    cache: Option<&Path>,
    keep: bool,
) -> Result<(Tuned, Option<Box<dyn PreparedProgram>>), SearchError> {
    let Some(path) = cache else {
        let searched =
            search::search_impl(runtime, candidates, weights, inputs, options, progress, keep)?;
        let report = searched.report;
        let tuned = Tuned {
            selected: report.selected,
            report: Some(report),
            cache: None,
            warnings: vec![],
        };
        return Ok((tuned, searched.prepared));
    };
    let start = Instant::now();
    let key = TuningKey::new(runtime, candidates, options, &machine());
    let mut warnings = Vec::new();
    // Whether the file may be written: not when it is something other than a cache.
    let mut writable = true;
    match read_file(path) {
        Ok(None) => {}
        Ok(Some(file)) => match file.entries.get(&key.key) {
            // A skipped search's entry for a shorter run: searched afresh, quietly.
            Some(entry) if key.mismatch(entry).is_none() && !entry.answers(options) => {}
            Some(entry) => match key.mismatch(entry) {
                None => {
                    let index =
                        key.candidates.iter().position(|(l, _)| *l == entry.selected).unwrap_or(0);
                    if let Some(c) = candidates.get(index) {
                        if options.log_llir {
                            let median = entry.candidates.get(index).and_then(|e| e.median_ms);
                            let block =
                                llir_best_block(index, median.unwrap_or(0.0), &c.program, &c.label);
                            let _ = std::io::stderr().lock().write_all(block.as_bytes());
                        }
                        if let Some(dir) = &options.dump_dir {
                            dump::write_dumps(dir, &c.program)?;
                        }
                    }
                    let cache = CacheUse {
                        file: path.to_path_buf(),
                        key: key.key,
                        status: CacheStatus::Hit,
                        entry: Some(entry.clone()),
                        ms: start.elapsed().as_secs_f64() * 1e3,
                    };
                    let tuned =
                        Tuned { selected: index, report: None, cache: Some(cache), warnings };
                    return Ok((tuned, None));
                }
                Some(why) => warnings.push(format!(
                    "the tuning cache {} holds an entry under this key that does not match this \
                     search ({why}): searching afresh",
                    path.display()
                )),
            },
            None => {
                let others: Vec<&str> = file
                    .entries
                    .values()
                    .map(|e| e.machine.as_str())
                    .filter(|m| *m != key.machine)
                    .collect();
                if !file.entries.is_empty() && others.len() == file.entries.len() {
                    let mut machines = others.clone();
                    machines.sort_unstable();
                    machines.dedup();
                    warnings.push(format!(
                        "the tuning cache {} holds no entry for this machine (its {} {} \
                         measured on: {}): searching afresh",
                        path.display(),
                        file.entries.len(),
                        if file.entries.len() == 1 { "entry was" } else { "entries were" },
                        machines.join(" | ")
                    ));
                }
            }
        },
        Err(err) => {
            writable = false;
            warnings.push(format!("{err}: searching afresh, the file is left as it is"));
        }
    }
    let read_ms = start.elapsed().as_secs_f64() * 1e3;
    let searched =
        search::search_impl(runtime, candidates, weights, inputs, options, progress, keep)?;
    let report = searched.report;
    let write_start = Instant::now();
    let status = if writable {
        match store(path, &key.key, key.entry(&report)) {
            Ok(()) => CacheStatus::Stored,
            Err(err) => {
                warnings.push(format!("{err}: the choice was not stored"));
                CacheStatus::NotStored
            }
        }
    } else {
        CacheStatus::NotStored
    };
    let cache = CacheUse {
        file: path.to_path_buf(),
        key: key.key,
        status,
        entry: None,
        ms: read_ms + write_start.elapsed().as_secs_f64() * 1e3,
    };
    let tuned =
        Tuned { selected: report.selected, report: Some(report), cache: Some(cache), warnings };
    Ok((tuned, searched.prepared))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_published_function() {
        // FNV-1a 128 test vectors (the reference implementation's "a" and "foobar").
        assert_eq!(fnv1a128(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
        assert_eq!(fnv1a128(b"foobar"), 0x343e1662793c64bf6f0d3597ba446f18);
    }

    #[test]
    fn machine_words_read_cpuinfo() {
        let info = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R)  Xeon(R) \
                    Processor\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n";
        assert_eq!(
            machine_words(info, "x86_64", "linux", 2),
            "Intel(R) Xeon(R) Processor; x86_64-linux; 2 cores"
        );
        assert_eq!(machine_words("", "aarch64", "macos", 1), "unknown cpu; aarch64-macos; 1 core");
        assert_eq!(
            machine_words("Hardware\t: BCM2835\n", "arm", "linux", 4),
            "BCM2835; arm-linux; 4 cores"
        );
    }

    /// A skipped search's entry answers only runs as short under as small a share; a
    /// measured one answers any search.
    #[test]
    fn a_skip_answers_no_longer_run_and_no_larger_share() {
        let skip = |executes, share| Entry {
            machine: String::new(),
            runtime: String::new(),
            question: String::new(),
            candidates: Vec::new(),
            selected: "fused".into(),
            decision_kind: "too_short".into(),
            decision: String::new(),
            rounds: 0,
            search_ms: 0.0,
            run_executes: Some(executes),
            run_share: share,
        };
        let plan = |executes| search::RunPlan { executes, spent: std::time::Duration::ZERO };
        let ask = |executes, share| SearchOptions {
            run: Some(plan(executes)),
            share,
            ..SearchOptions::default()
        };
        let e = skip(10, Some(0.1));
        assert!(e.answers(&ask(10, 0.1)) && e.answers(&ask(3, 0.05)));
        assert!(!e.answers(&ask(11, 0.1)) && !e.answers(&ask(10, 0.25)));
        // No share rule (an explicit budget, or no plan): a search, whatever the entry says.
        assert!(!e.answers(&SearchOptions { max_candidates: Some(3), ..ask(1, 0.1) }));
        assert!(!e.answers(&SearchOptions { run: None, ..ask(1, 0.1) }));
        // An entry from before the share was recorded was written at the default share.
        let old = skip(10, None);
        assert!(old.answers(&ask(10, search::SEARCH_SHARE)) && !old.answers(&ask(10, 0.3)));
        let measured = Entry { decision_kind: "kept".into(), run_executes: None, ..skip(1, None) };
        assert!(measured.answers(&ask(1000, 0.5)) && measured.answers(&SearchOptions::default()));
    }
}
