//! A planning problem read from a file: the planner's JSON form or a MiniMalloc interval CSV.
//! This is what `lumen plan-slab FILE` reads.
//!
//! The JSON form names nodes and buffers by strings:
//!
//! ```json
//! {"nodes": ["upload", "lt_matmul"], "edges": [["upload", "lt_matmul"]],
//!  "alignment": 256, "capacity": null, "algorithm": "first-fit",
//!  "buffers": [{"id": "x", "bytes": 65536, "uses": ["upload", "lt_matmul"]}]}
//! ```
//!
//! `capacity` null or absent = unbounded; `alignment` absent = 256; `algorithm` absent =
//! first-fit. A buffer may carry `"in_place_of": "t1"`, the id of an operand whose bytes it may
//! take ([`crate::SlabBuffer::in_place_of`]). Unknown keys are refused so a misspelt `capacity` cannot be silently ignored.
//!
//! MiniMalloc's CSV (google/minimalloc, `benchmarks/`): header `id,lower,upper,size`, each
//! lifetime half-open `[lower, upper)`. The upstream alternatives `start` or `begin` for `lower`
//! and `end` (INCLUSIVE, so `upper = end + 1`) for `upper` are accepted; `hint` and `offset`
//! (solver hints and outputs) are ignored; `gaps` and per-buffer `alignment` other than 1 are
//! refused, since a chain-DAG lifetime cannot express them. Each buffer's uses are the time
//! points `lower` and `upper - 1` on a chain DAG over the distinct time points, so one buffer
//! precedes another exactly when `upper_a <= lower_b`.
//!
//! Semantic errors (zero alignment, duplicate ids, empty uses, cycles) are left to
//! [`crate::plan_slab`], so they carry the planner's messages.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use indexmap::IndexMap;
use petgraph::graph::NodeIndex;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::{Dag, PlanError, SlabAlgorithm, SlabBuffer, SlabOptions, SlabPlan, plan_slab};

/// A DAG with named nodes, buffer requests over it, and the planner options.
#[derive(Debug, Clone)]
pub struct SlabProblem {
    /// The lifetime DAG; each node's weight is its name (unique).
    pub dag: Dag<String>,
    /// Requests in request order; `uses` index `dag`'s nodes.
    pub buffers: Vec<SlabBuffer>,
    /// Capacity, alignment (bytes) and algorithm.
    pub options: SlabOptions,
}

/// Why a problem file could not be read. Messages name the line (CSV, JSON syntax) or the field
/// path (`buffers[3].uses[1]`) at fault.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProblemError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The JSON is malformed or a value has the wrong type (serde_json's message, which ends
    /// with `at line L column C`).
    #[error("{0}")]
    Json(String),
    /// Two entries of `nodes` share a name.
    #[error("nodes[{index}]: duplicate node name {name:?}")]
    DuplicateNode {
        /// Position in `nodes`.
        index: usize,
        /// The repeated name.
        name: String,
    },
    /// An edge names a node that is not in `nodes`.
    #[error("edges[{index}]: unknown node {name:?}")]
    UnknownEdgeNode {
        /// Position in `edges`.
        index: usize,
        /// The unknown name.
        name: String,
    },
    /// A buffer's `in_place_of` names no buffer of the problem.
    #[error("buffers[{index}] ({id}): in_place_of names no buffer: {name:?}")]
    UnknownInPlace {
        /// The marked buffer's id.
        id: String,
        /// Its position in `buffers`.
        index: usize,
        /// The unknown id.
        name: String,
    },
    /// A buffer's use names a node that is not in `nodes` (the planner's absent-node error).
    #[error(
        "slab lifetime references an absent DAG node: buffer {id} uses {name:?} (buffers[{index}].uses[{use_index}])"
    )]
    UnknownUseNode {
        /// The buffer's id.
        id: String,
        /// Position of the buffer in `buffers`.
        index: usize,
        /// Position of the use in its `uses`.
        use_index: usize,
        /// The unknown name.
        name: String,
    },
    /// `algorithm` is not one this planner knows.
    #[error("unknown slab algorithm {name:?} (known: {known})")]
    UnknownAlgorithm {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// The CSV reader failed (unequal field counts, bad UTF-8...).
    #[error("line {line}: {message}")]
    Csv {
        /// 1-based line in the file (0 when unknown).
        line: u64,
        /// The reader's message.
        message: String,
    },
    /// The CSV header lacks a required column.
    #[error("CSV header lacks {} {column} column (header: {header})", article(column))]
    MissingColumn {
        /// The column wanted, with its accepted aliases.
        column: &'static str,
        /// The header as read.
        header: String,
    },
    /// A CSV field is not what its column needs.
    #[error("line {line}, column {column}: {message}")]
    CsvField {
        /// 1-based line in the file.
        line: u64,
        /// The column's header name.
        column: String,
        /// What is wrong, with the value.
        message: String,
    },
    /// A CSV buffer's lifetime is empty (`lower >= upper`).
    #[error("line {line}: buffer {id} has an empty lifetime [{lower}, {upper})")]
    EmptyLifetime {
        /// 1-based line in the file.
        line: u64,
        /// The buffer's id.
        id: String,
        /// Its `lower`.
        lower: u64,
        /// Its `upper` (exclusive).
        upper: u64,
    },
}

/// `an` before a vowel (`an id column`), `a` otherwise.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

impl SlabProblem {
    /// Reads a problem file: MiniMalloc CSV when the name ends in `.csv` (any case) or the first
    /// line is a CSV header with an `id` column (MiniMalloc's `id,lower,upper,size`, whatever the
    /// file is called), the JSON form otherwise.
    ///
    /// # Errors
    /// [`ProblemError::Io`] when the file cannot be read; otherwise as [`SlabProblem::from_json_str`]
    /// or [`SlabProblem::from_csv_str`]. When the text is not JSON from its first character, the
    /// JSON error says so and how a CSV is recognised.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ProblemError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|error| ProblemError::Io { path: path.display().to_string(), error })?;
        let is_csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        if is_csv || looks_like_csv(&text) {
            return Self::from_csv_str(&text);
        }
        Self::from_json_str(&text).map_err(|e| match e {
            ProblemError::Json(message) if message.ends_with(" at line 1 column 1") => {
                ProblemError::Json(format!(
                    "{message} (not JSON; a MiniMalloc CSV needs a .csv name or an \
                     id,lower,upper,size header)"
                ))
            }
            other => other,
        })
    }

    /// Parses the planner's JSON form (see the module docs). Nodes are added to the DAG in the
    /// order of `nodes`, edges in the order of `edges`, buffers keep their order.
    ///
    /// # Errors
    /// [`ProblemError::Json`] for malformed JSON, unknown keys, wrong types, and negative,
    /// fractional or oversized `bytes`, `alignment` or `capacity` (with line and column);
    /// [`ProblemError::DuplicateNode`], [`ProblemError::UnknownEdgeNode`],
    /// [`ProblemError::UnknownUseNode`], [`ProblemError::UnknownAlgorithm`].
    pub fn from_json_str(text: &str) -> Result<Self, ProblemError> {
        objects_only(text)?;
        let raw: RawProblem =
            serde_json::from_str(text).map_err(|e| ProblemError::Json(e.to_string()))?;
        let mut dag: Dag<String> = Dag::new();
        let mut index: BTreeMap<&str, NodeIndex> = BTreeMap::new();
        for (i, name) in raw.nodes.iter().enumerate() {
            if index.insert(name.as_str(), dag.add_node(name.clone())).is_some() {
                return Err(ProblemError::DuplicateNode { index: i, name: name.clone() });
            }
        }
        for (i, Edge(from, to)) in raw.edges.iter().enumerate() {
            let lookup = |name: &String| {
                index
                    .get(name.as_str())
                    .copied()
                    .ok_or_else(|| ProblemError::UnknownEdgeNode { index: i, name: name.clone() })
            };
            let (a, b) = (lookup(from)?, lookup(to)?);
            dag.add_edge(a, b, ());
        }
        let mut buffers = Vec::with_capacity(raw.buffers.len());
        let mut marks: Vec<Option<String>> = Vec::with_capacity(raw.buffers.len());
        for (i, b) in raw.buffers.into_iter().enumerate() {
            let mut uses = Vec::with_capacity(b.uses.len());
            for (k, name) in b.uses.iter().enumerate() {
                let node = index.get(name.as_str()).copied().ok_or_else(|| {
                    ProblemError::UnknownUseNode {
                        id: b.id.clone(),
                        index: i,
                        use_index: k,
                        name: name.clone(),
                    }
                })?;
                uses.push(node);
            }
            buffers.push(SlabBuffer { id: b.id, bytes: b.bytes, uses, in_place_of: None });
            marks.push(b.in_place_of);
        }
        // Marks name buffers by id, earlier or later in the list.
        let by_id: BTreeMap<&str, usize> =
            buffers.iter().enumerate().map(|(i, b)| (b.id.as_str(), i)).collect();
        let mut resolved = Vec::with_capacity(marks.len());
        for (i, mark) in marks.iter().enumerate() {
            resolved.push(match mark {
                None => None,
                Some(name) => Some(by_id.get(name.as_str()).copied().ok_or_else(|| {
                    ProblemError::UnknownInPlace {
                        id: buffers[i].id.clone(),
                        index: i,
                        name: name.clone(),
                    }
                })?),
            });
        }
        for (b, mark) in buffers.iter_mut().zip(resolved) {
            b.in_place_of = mark;
        }
        let algorithm = match raw.algorithm {
            None => SlabAlgorithm::default(),
            Some(name) => SlabAlgorithm::from_name(&name).ok_or_else(|| {
                ProblemError::UnknownAlgorithm { name, known: known_algorithms() }
            })?,
        };
        // The update keeps options this form does not carry at their defaults.
        #[allow(clippy::needless_update)]
        let options = SlabOptions {
            capacity: raw.capacity,
            alignment: raw.alignment.unwrap_or(SlabOptions::default().alignment),
            algorithm,
            ..SlabOptions::default()
        };
        Ok(Self { dag, buffers, options })
    }

    /// Parses a MiniMalloc interval CSV (see the module docs). Alignment defaults to 256 bytes,
    /// capacity to unbounded (the capacity in upstream file names is not applied), algorithm to
    /// first fit. Node `k` of the chain DAG is the `k`-th distinct time point, named by its value.
    ///
    /// # Errors
    /// [`ProblemError::Csv`] for reader errors, [`ProblemError::MissingColumn`],
    /// [`ProblemError::CsvField`] for a time or size that is not a non-negative integer, an
    /// `end` of `u64::MAX`, non-empty `gaps` or an `alignment` other than 1, and
    /// [`ProblemError::EmptyLifetime`] for `lower >= upper`.
    pub fn from_csv_str(text: &str) -> Result<Self, ProblemError> {
        Self::from_csv_reader(text.as_bytes())
    }

    /// As [`SlabProblem::from_csv_str`], from any reader.
    ///
    /// # Errors
    /// As [`SlabProblem::from_csv_str`].
    pub fn from_csv_reader(reader: impl std::io::Read) -> Result<Self, ProblemError> {
        let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader);
        let header = rdr.headers().map_err(csv_error)?.clone();
        let names: Vec<String> = header.iter().map(|h| h.to_ascii_lowercase()).collect();
        let header_text = header.iter().collect::<Vec<_>>().join(",");
        let find = |aliases: &[&str]| names.iter().position(|h| aliases.contains(&h.as_str()));
        let missing = |column| ProblemError::MissingColumn { column, header: header_text.clone() };
        let id_col = find(&["id"]).ok_or_else(|| missing("id"))?;
        let size_col = find(&["size"]).ok_or_else(|| missing("size"))?;
        let lower_col =
            find(&["lower", "start", "begin"]).ok_or_else(|| missing("lower (or start, begin)"))?;
        let (upper_col, inclusive) = match (find(&["upper"]), find(&["end"])) {
            (Some(c), _) => (c, false),
            (None, Some(c)) => (c, true),
            (None, None) => return Err(missing("upper (or end)")),
        };
        let gaps_col = find(&["gaps"]);
        let align_col = find(&["alignment"]);

        struct Row {
            id: String,
            lower: u64,
            last: u64,
            size: usize,
        }
        let mut rows = Vec::new();
        for record in rdr.records() {
            let record = record.map_err(csv_error)?;
            let line = record.position().map_or(0, |p| p.line());
            let field = |col: usize| record.get(col).unwrap_or("");
            let column = |col: usize| header.get(col).unwrap_or("?").to_string();
            let number = |col: usize| -> Result<u64, ProblemError> {
                let text = field(col);
                text.parse::<u64>().map_err(|_| ProblemError::CsvField {
                    line,
                    column: column(col),
                    message: format!("expected a non-negative integer, got {text:?}"),
                })
            };
            if let Some(col) = gaps_col.filter(|&c| !field(c).is_empty()) {
                return Err(ProblemError::CsvField {
                    line,
                    column: column(col),
                    message: "lifetime gaps are not supported by a chain-DAG lifetime".into(),
                });
            }
            if let Some(col) = align_col.filter(|&c| !field(c).is_empty() && field(c) != "1") {
                return Err(ProblemError::CsvField {
                    line,
                    column: column(col),
                    message: format!(
                        "per-buffer alignment {:?} is not supported; set the slab alignment instead",
                        field(col)
                    ),
                });
            }
            let id = field(id_col).to_string();
            let lower = number(lower_col)?;
            let upper = if inclusive {
                number(upper_col)?.checked_add(1).ok_or_else(|| ProblemError::CsvField {
                    line,
                    column: column(upper_col),
                    message: "inclusive end overflows".into(),
                })?
            } else {
                number(upper_col)?
            };
            let size = usize::try_from(number(size_col)?).map_err(|_| ProblemError::CsvField {
                line,
                column: column(size_col),
                message: "size does not fit in this machine's address space".into(),
            })?;
            if lower >= upper {
                return Err(ProblemError::EmptyLifetime { line, id, lower, upper });
            }
            rows.push(Row { id, lower, last: upper - 1, size });
        }

        let times: BTreeSet<u64> = rows.iter().flat_map(|r| [r.lower, r.last]).collect();
        let mut dag: Dag<String> = Dag::with_capacity(times.len(), times.len().saturating_sub(1));
        let mut node_of: BTreeMap<u64, NodeIndex> = BTreeMap::new();
        let mut prev: Option<NodeIndex> = None;
        for &t in &times {
            let node = dag.add_node(t.to_string());
            if let Some(p) = prev {
                dag.add_edge(p, node, ());
            }
            node_of.insert(t, node);
            prev = Some(node);
        }
        let buffers = rows
            .into_iter()
            .map(|r| {
                let mut uses: Vec<NodeIndex> =
                    [r.lower, r.last].iter().filter_map(|t| node_of.get(t).copied()).collect();
                uses.dedup();
                SlabBuffer { id: r.id, bytes: r.size, uses, in_place_of: None }
            })
            .collect();
        Ok(Self { dag, buffers, options: SlabOptions::default() })
    }

    /// Plans the problem with its own options ([`crate::plan_slab`]).
    ///
    /// # Errors
    /// Every [`PlanError`] of [`crate::plan_slab`].
    pub fn plan(&self) -> Result<SlabPlan, PlanError> {
        plan_slab(&self.dag, &self.buffers, &self.options)
    }

    /// The name of `node` (`"?"` for an absent node).
    pub fn node_name(&self, node: NodeIndex) -> &str {
        self.dag.node_weight(node).map_or("?", String::as_str)
    }

    /// The problem in the JSON form, pretty-printed, keys in the documented order; reading it back
    /// with [`SlabProblem::from_json_str`] gives the same problem.
    pub fn to_json(&self) -> String {
        let raw = RawProblemOut {
            nodes: self.dag.node_weights().map(String::as_str).collect(),
            edges: self
                .dag
                .edge_indices()
                .filter_map(|e| self.dag.edge_endpoints(e))
                .map(|(a, b)| [self.node_name(a), self.node_name(b)])
                .collect(),
            alignment: self.options.alignment,
            capacity: self.options.capacity,
            algorithm: self.options.algorithm.name(),
            buffers: self
                .buffers
                .iter()
                .map(|b| {
                    let mut m = IndexMap::new();
                    m.insert("id", serde_json::Value::from(b.id.as_str()));
                    m.insert("bytes", serde_json::Value::from(b.bytes));
                    m.insert(
                        "uses",
                        serde_json::Value::from(
                            b.uses.iter().map(|&u| self.node_name(u)).collect::<Vec<_>>(),
                        ),
                    );
                    if let Some(p) = b.in_place_of.and_then(|p| self.buffers.get(p)) {
                        m.insert("in_place_of", serde_json::Value::from(p.id.as_str()));
                    }
                    m
                })
                .collect(),
        };
        // Serializing plain strings and integers cannot fail.
        serde_json::to_string_pretty(&raw).unwrap_or_default()
    }
}

/// A first line (after a byte-order mark) that is a comma-separated header naming an `id`
/// column: MiniMalloc's CSV, never the JSON form, whose first character is `{`.
fn looks_like_csv(text: &str) -> bool {
    let first = text.trim_start_matches('\u{feff}').lines().next().unwrap_or("");
    first.contains(',')
        && !first.trim_start().starts_with(['{', '['])
        && first.split(',').any(|h| h.trim().eq_ignore_ascii_case("id"))
}

fn known_algorithms() -> String {
    SlabAlgorithm::ALL.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

fn csv_error(e: csv::Error) -> ProblemError {
    let line = e.position().map_or(0, |p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("expected {expected_len} fields, found {len}")
        }
        csv::ErrorKind::Utf8 { .. } => "invalid UTF-8".to_string(),
        _ => e.to_string(),
    };
    ProblemError::Csv { line, message }
}

/// serde accepts a struct written as an array of its fields by position; the problem and each
/// buffer must be objects, so an array there is refused by name before the typed parse.
fn objects_only(text: &str) -> Result<(), ProblemError> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        // Malformed JSON: the typed parse names the line and column.
        return Ok(());
    };
    // Other wrong types are refused by the typed parse, with a line and column.
    let kind = |v: &serde_json::Value| v.is_array().then_some("an array");
    if let Some(found) = kind(&value) {
        return Err(ProblemError::Json(format!(
            "expected a JSON object with nodes, edges, buffers, found {found}"
        )));
    }
    if let Some(serde_json::Value::Array(buffers)) = value.get("buffers") {
        for (i, b) in buffers.iter().enumerate() {
            if let Some(found) = kind(b) {
                return Err(ProblemError::Json(format!(
                    "buffers[{i}]: expected a buffer object with id, bytes, uses, found {found}"
                )));
            }
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object with nodes, edges, buffers")]
struct RawProblem {
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    edges: Vec<Edge>,
    #[serde(default, deserialize_with = "de_alignment")]
    alignment: Option<usize>,
    #[serde(default, deserialize_with = "de_capacity")]
    capacity: Option<usize>,
    #[serde(default)]
    algorithm: Option<String>,
    #[serde(default)]
    buffers: Vec<RawBuffer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a buffer object with id, bytes, uses")]
struct RawBuffer {
    id: String,
    #[serde(deserialize_with = "de_bytes")]
    bytes: usize,
    uses: Vec<String>,
    /// Optional in-place mark: the id of the operand whose bytes this buffer may take.
    #[serde(default)]
    in_place_of: Option<String>,
}

#[derive(Serialize)]
struct RawProblemOut<'a> {
    nodes: Vec<&'a str>,
    edges: Vec<[&'a str; 2]>,
    alignment: usize,
    capacity: Option<usize>,
    algorithm: &'static str,
    buffers: Vec<IndexMap<&'static str, serde_json::Value>>,
}

/// One entry of `edges`: `[from, to]`, two node names. A longer list is refused by name rather
/// than with serde's "trailing characters".
struct Edge(String, String);

impl<'de> Deserialize<'de> for Edge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(EdgeVisitor)
    }
}

struct EdgeVisitor;

impl<'de> Visitor<'de> for EdgeVisitor {
    type Value = Edge;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an edge as a pair [from, to] of node names")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Edge, A::Error> {
        let from: String =
            seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let to: String = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "an edge is a pair [from, to] of node names, got 3 or more items",
            ));
        }
        Ok(Edge(from, to))
    }
}

/// A count of bytes: a non-negative integer that fits `usize`; the message names the field.
struct Count(&'static str);

impl<'de> Visitor<'de> for Count {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} as a non-negative integer", self.0)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
        usize::try_from(v).map_err(|_| E::custom(format!("{} {v} does not fit in usize", self.0)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
        u64::try_from(v).map_err(|_| E::custom(self.refuse(v))).and_then(|v| self.visit_u64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<usize, E> {
        // Debug keeps the point (256.0), so a float is never shown as the integer it equals.
        Err(E::custom(self.refuse(format_args!("{v:?}"))))
    }
}

impl Count {
    fn refuse(&self, v: impl fmt::Display) -> String {
        format!("{} must be a non-negative integer, got {v}", self.0)
    }
}

/// `null` or a [`Count`].
struct MaybeCount(&'static str);

impl<'de> Visitor<'de> for MaybeCount {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} as null or a non-negative integer", self.0)
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<usize>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<usize>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_any(Count(self.0)).map(Some)
    }
}

fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    d.deserialize_any(Count("buffer bytes"))
}

fn de_alignment<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    d.deserialize_option(MaybeCount("alignment"))
}

fn de_capacity<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    d.deserialize_option(MaybeCount("capacity"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_uses_are_first_and_last_time_points() {
        let p =
            SlabProblem::from_csv_str("id,lower,upper,size\na,0,3,4\nb,3,9,4\nc,0,9,4\n").unwrap();
        let names: Vec<&str> = p.dag.node_weights().map(String::as_str).collect();
        assert_eq!(names, ["0", "2", "3", "8"]);
        let uses: Vec<Vec<&str>> =
            p.buffers.iter().map(|b| b.uses.iter().map(|&u| p.node_name(u)).collect()).collect();
        assert_eq!(uses, [vec!["0", "2"], vec!["3", "8"], vec!["0", "8"]]);
    }
}
