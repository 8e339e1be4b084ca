//! Deterministic dumps of a compiled program: canonical LLIR text, plan text, Graphviz `.dot`,
//! the JSON of `lumen compile --json`, and `LLIR_DUMP_DIR` files.
//!
//! Everything here is a pure function of the [`CompiledProgram`]: node ids are the canonical
//! ids (see [`crate::lower`]), buffers print in request order, nothing iterates a hash map. Two
//! compiles of the same program give byte-identical text, so dumps diff cleanly between
//! versions (the workflow of Luminal's `LLIR_DUMP_DIR`).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::error::{CompileError, ShapeText};
use crate::llir::{BufferId, BufferRole, LlirNode, LlirOp, Operand};
use crate::program::CompiledProgram;
use crate::symbols::SymbolicShape;

static DUMP_SEQ: AtomicUsize = AtomicUsize::new(0);

fn role_name(role: BufferRole) -> &'static str {
    match role {
        BufferRole::Input => "input",
        BufferRole::Weight => "weight",
        BufferRole::Constant(_) => "constant",
        BufferRole::Workspace => "workspace",
        BufferRole::State => "state",
        BufferRole::Intermediate => "intermediate",
        BufferRole::Output => "output",
    }
}

/// The op's semantic parameters as `key=value` words: `m=64 k=256 n=64 epilogue=DEFAULT`
/// (`batch=8 m=...` for a batched product), `len=4096` for an elementwise op,
/// `axis=2 len=128 extent=16` for a reduction, `rows=32 dim=64 vocab=1000` for a gather,
/// `axis=1 len=512` for a concat, `n=1 c=3 oc=8 g=1 in=32x32 k=3x3 out=32x32 s=1x1 d=1x1
/// p=1x1 epilogue=bias+relu` for a convolution (a max pool the same geometry without the
/// epilogue), `axis=2 len=96 extent=4 fill=0.0` for a take, `axis=1 reduction=add len=12
/// extent=3 updates=4` for a scatter, or nothing for upload and readback.
pub fn op_params(op: &LlirOp) -> String {
    match *op {
        LlirOp::LtMatmul { batch, m, k, n, epilogue } => {
            let batch = if batch == 1 { String::new() } else { format!("batch={batch} ") };
            format!("{batch}m={m} k={k} n={n} epilogue={}", epilogue.name())
        }
        LlirOp::Map { len, .. } | LlirOp::IntMap { len, .. } => format!("len={len}"),
        LlirOp::Reduce { axis, len, extent, .. } => {
            format!("axis={axis} len={len} extent={extent}")
        }
        LlirOp::Gather { rows, dim, vocab } => format!("rows={rows} dim={dim} vocab={vocab}"),
        LlirOp::Concat { axis, len } => format!("axis={axis} len={len}"),
        LlirOp::AppendRows { len } => format!("len={len}"),
        LlirOp::Conv { geometry, epilogue } => format!("{} epilogue={epilogue}", geometry.text()),
        LlirOp::MaxPool { geometry } => geometry.text(),
        LlirOp::Take { axis, len, extent, fill } => {
            format!("axis={axis} len={len} extent={extent} fill={fill}")
        }
        LlirOp::Cast { to, len } => format!("to={to} len={len}"),
        LlirOp::TopK { axis, k, largest, len, extent } => {
            let which = if largest { "largest" } else { "smallest" };
            format!("axis={axis} k={k} {which} len={len} extent={extent}")
        }
        LlirOp::GatherElements { axis, len, extent } => {
            format!("axis={axis} len={len} extent={extent}")
        }
        LlirOp::ScatterElements { axis, reduction, len, extent, updates } => {
            format!("axis={axis} reduction={reduction} len={len} extent={extent} updates={updates}")
        }
        LlirOp::Arg { axis, last, len, extent, .. } => {
            format!("axis={axis} len={len} extent={extent}{}", if last { " last" } else { "" })
        }
        LlirOp::Upload | LlirOp::Readback => String::new(),
    }
}

fn names(p: &CompiledProgram, ids: &[BufferId]) -> String {
    let v: Vec<&str> =
        ids.iter().map(|&b| p.llir.buffers.get(b).map_or("?", |x| x.id.as_str())).collect();
    v.join(", ")
}

/// An operand as dumps print it: the buffer's name when the view is the whole buffer in
/// row-major order, else the name and the view, `t3{shape=[2, 4, 8, 16] strides=[512, 16,
/// 64, 1] offset=64}` (strides left out when row-major, offset when 0).
pub fn operand_text(p: &CompiledProgram, o: &Operand) -> String {
    let Some(buf) = p.llir.buffers.get(o.buffer) else { return "?".to_string() };
    let v = &o.view;
    if v.is_whole(&buf.shape) {
        return buf.id.clone();
    }
    let mut s = format!("{}{{shape={}", buf.id, ShapeText(v.shape.clone()));
    if !v.is_contiguous() {
        let _ = write!(s, " strides={}", ShapeText(v.strides.clone()));
    }
    if v.offset != 0 {
        let _ = write!(s, " offset={}", v.offset);
    }
    s.push('}');
    s
}

fn operands_text(p: &CompiledProgram, reads: &[Operand]) -> String {
    reads.iter().map(|o| operand_text(p, o)).collect::<Vec<_>>().join(", ")
}

fn join_ids(ids: &[usize], sep: &str) -> String {
    ids.iter().map(usize::to_string).collect::<Vec<_>>().join(sep)
}

/// The canonical LLIR text: a header, one `buffer` line per buffer in request order (name,
/// dtype and shape, role, bytes), then one `node` line per node in canonical order (id, op,
/// semantic parameters, input node ids, operands read (by name, with their view when it is
/// not the whole buffer, see [`operand_text`]), buffers written and the workspace, by name).
///
/// ```text
/// node 1 lt_matmul m=64 k=256 n=64 epilogue=DEFAULT inputs=[0] reads=[x, w] writes=[t0] workspace=workspace
/// node 2 add len=4096 inputs=[0, 1] reads=[t0, b{shape=[64, 64] strides=[0, 1]}] writes=[t1]
/// ```
pub fn llir_text(program: &CompiledProgram) -> String {
    let llir = &program.llir;
    let mut s = String::new();
    let _ = writeln!(s, "# lumen LLIR: {}", program.label);
    let _ = writeln!(
        s,
        "# {}, {}, {}",
        count(llir.nodes.len(), "node"),
        count(program.figures.launches, "launch"),
        count(llir.buffers.len(), "buffer")
    );
    // Programs with symbolic dimensions list them; shapes print `seq<=32` on their axes and
    // sizes are the bounds'.
    for d in &llir.symbols {
        let _ = writeln!(s, "symbol {} <= {}", d.name, d.bound);
    }
    for b in &llir.buffers {
        let shape = SymbolicShape { shape: &b.shape, axes: &b.axes, decls: &llir.symbols };
        let _ = write!(
            s,
            "buffer {} {}{} {} bytes={}",
            b.id,
            b.dtype,
            shape,
            role_name(b.role),
            b.bytes
        );
        // Only marked buffers print it, so programs compiled without in-place reuse dump as
        // they always did.
        if let Some(a) = b.in_place_of.and_then(|a| llir.buffers.get(a)) {
            let _ = write!(s, " in_place_of={}", a.id);
        }
        let _ = writeln!(s);
    }
    for (i, node) in llir.nodes.iter().enumerate() {
        let _ = writeln!(s, "{}", node_line(program, i, node));
    }
    s
}

fn node_line(p: &CompiledProgram, i: usize, node: &LlirNode) -> String {
    let mut line = format!("node {i} {}", node.op.name());
    let params = op_params(&node.op);
    if !params.is_empty() {
        line.push(' ');
        line.push_str(&params);
    }
    let _ = write!(
        line,
        " inputs=[{}] reads=[{}] writes=[{}]",
        join_ids(&node.inputs, ", "),
        operands_text(p, &node.reads),
        names(p, &node.writes)
    );
    if let Some(ws) = node.workspace {
        let _ = write!(line, " workspace={}", names(p, &[ws]));
    }
    line
}

/// The plan text: one row per buffer in request order (id, bytes, reserved, offset, end, uses
/// as canonical node ids; sizes in bytes), then the totals: nodes, launches, slab_bytes,
/// naive_bytes, lower_bound, dram_bytes, flops (at the bounds), and for a program with
/// symbols `flops_expr`, the FLOP count as a polynomial in them.
pub fn plan_text(program: &CompiledProgram) -> String {
    let llir = &program.llir;
    let plan = &program.plan;
    let width = llir.buffers.iter().map(|b| b.id.len()).max().unwrap_or(2).max(2);
    let mut s = String::new();
    let _ = writeln!(s, "# lumen plan: {}", program.label);
    let _ = writeln!(
        s,
        "{:<width$}  {:>10}  {:>10}  {:>10}  {:>10}  uses",
        "id", "bytes", "reserved", "offset", "end"
    );
    for (i, b) in llir.buffers.iter().enumerate() {
        let offset = plan.offsets.get(i).copied().unwrap_or(0);
        let reserved = plan.reserved.get(i).copied().unwrap_or(0);
        let _ = write!(
            s,
            "{:<width$}  {:>10}  {:>10}  {:>10}  {:>10}  {}",
            b.id,
            b.bytes,
            reserved,
            offset,
            offset.saturating_add(reserved),
            join_ids(&b.uses, ",")
        );
        if let Some(a) = b.in_place_of.and_then(|a| llir.buffers.get(a)) {
            let same = plan.offsets.get(b.in_place_of.unwrap_or(0)) == Some(&offset);
            let _ = write!(s, "  in place of {}{}", a.id, if same { "" } else { " (not taken)" });
        }
        let _ = writeln!(s);
    }
    let f = &program.figures;
    for (k, v) in [
        ("nodes", f.nodes as u64),
        ("launches", f.launches as u64),
        ("slab_bytes", f.slab_bytes as u64),
        ("naive_bytes", f.naive_bytes as u64),
        ("lower_bound", f.lower_bound as u64),
        ("dram_bytes", f.dram_bytes as u64),
        ("flops", f.flops),
    ] {
        let _ = writeln!(s, "{k:<12} {v}");
    }
    // With symbols, the count above is the bounds'; this is it at any value.
    if !llir.symbols.is_empty() {
        let _ = writeln!(s, "flops_expr   {}", flops_expr(llir));
    }
    s
}

/// The FLOP polynomial of a program with symbols ([`crate::Llir::flops_polynomial`]), or why
/// there is none.
fn flops_expr(llir: &crate::Llir) -> String {
    llir.flops_polynomial().map_or_else(
        || {
            format!(
                "(none: more than 4 symbols, or a degree above {} in one)",
                crate::polynomial::MAX_DEGREE
            )
        },
        |p| p.to_string(),
    )
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A Graphviz digraph of the LLIR: one box per node (`id op` and its parameters), an edge per
/// DAG edge labelled with the buffers the source writes and the target reads.
pub fn llir_dot(program: &CompiledProgram) -> String {
    let llir = &program.llir;
    let mut s = String::new();
    let _ = writeln!(s, "digraph \"{}\" {{", dot_escape(&program.label));
    let _ = writeln!(s, "  rankdir=TB;");
    let _ = writeln!(s, "  node [shape=box, fontname=\"monospace\"];");
    for (i, node) in llir.nodes.iter().enumerate() {
        let params = op_params(&node.op);
        let label = if params.is_empty() {
            format!("{i} {}", node.op.name())
        } else {
            format!("{i} {}\\n{}", node.op.name(), dot_escape(&params))
        };
        let _ = writeln!(s, "  n{i} [label=\"{label}\"];");
    }
    // Where each buffer is written: (node, position in its writes). The upload node writes
    // every leaf, so scanning a source's writes per edge would be quadratic.
    let mut writers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); llir.buffers.len()];
    for (j, node) in llir.nodes.iter().enumerate() {
        for (p, &b) in node.writes.iter().enumerate() {
            if let Some(w) = writers.get_mut(b) {
                w.push((j, p));
            }
        }
    }
    for (i, node) in llir.nodes.iter().enumerate() {
        let mut reads: Vec<BufferId> = node.read_buffers().collect();
        reads.sort_unstable();
        reads.dedup();
        for &j in &node.inputs {
            // The buffers `j` writes that `i` reads, in `j`'s write order.
            let mut carried: Vec<(usize, BufferId)> = reads
                .iter()
                .flat_map(|&r| {
                    writers.get(r).into_iter().flatten().filter(|w| w.0 == j).map(move |w| (w.1, r))
                })
                .collect();
            carried.sort_unstable();
            let carried: Vec<BufferId> = carried.into_iter().map(|(_, b)| b).collect();
            let _ = writeln!(
                s,
                "  n{j} -> n{i} [label=\"{}\"];",
                dot_escape(&names(program, &carried))
            );
        }
    }
    s.push_str("}\n");
    s
}

/// The JSON of `lumen compile --json`:
/// `{"label", "nodes": [{"id", "op", "epilogue"?, the op's parameters (batch/m/k/n, len,
/// axis/extent, rows/dim/vocab), "inputs": [node ids], "reads": [buffer ids], "views":
/// [{"shape", "strides", "offset"} per read, in elements], "writes": [...], "workspace"?}], "buffers": [{"id", "dtype",
/// "shape", "role", "bytes", "reserved", "offset", "end", "uses": [node ids]}], "slab_bytes",
/// "naive_bytes", "lower_bound", "launches", "dram_bytes", "flops", "node_count", "symbols" and
/// "flops_expr" (with symbols only: `[{"name", "bound"}]`, the FLOP polynomial or null when
/// none fits), "options":
/// {"alignment", "capacity" (null = unbounded), "algorithm", "workspace_bytes",
/// "resident_weights"}}`: the options the plan was made under
/// ([`crate::ProgramOptions`]). Node ids are the canonical ids of [`llir_text`]; buffer ids
/// are buffer names; sizes in bytes.
pub fn compiled_json(program: &CompiledProgram) -> Value {
    let llir = &program.llir;
    let name = |b: &BufferId| llir.buffers.get(*b).map_or(Value::Null, |x| json!(x.id));
    let nodes: Vec<Value> = llir
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let mut o = serde_json::Map::new();
            o.insert("id".into(), json!(i));
            o.insert("op".into(), json!(node.op.name()));
            let mut put = |k: &str, v: Value| {
                o.insert(k.into(), v);
            };
            match node.op {
                LlirOp::LtMatmul { batch, m, k, n, epilogue } => {
                    put("epilogue", json!(epilogue.name()));
                    put("batch", json!(batch));
                    put("m", json!(m));
                    put("k", json!(k));
                    put("n", json!(n));
                }
                LlirOp::Map { len, .. } | LlirOp::IntMap { len, .. } | LlirOp::AppendRows { len } => {
                    put("len", json!(len));
                }
                LlirOp::Reduce { axis, len, extent, .. } => {
                    put("axis", json!(axis));
                    put("len", json!(len));
                    put("extent", json!(extent));
                }
                LlirOp::Gather { rows, dim, vocab } => {
                    put("rows", json!(rows));
                    put("dim", json!(dim));
                    put("vocab", json!(vocab));
                }
                LlirOp::Concat { axis, len } => {
                    put("axis", json!(axis));
                    put("len", json!(len));
                }
                LlirOp::Conv { geometry, epilogue } => {
                    put("geometry", json!(geometry));
                    put("epilogue", json!(epilogue.to_string()));
                }
                LlirOp::MaxPool { geometry } => put("geometry", json!(geometry)),
                LlirOp::Take { axis, len, extent, fill } => {
                    put("axis", json!(axis));
                    put("len", json!(len));
                    put("extent", json!(extent));
                    put("fill", json!(fill.value()));
                }
                LlirOp::Cast { to, len } => {
                    put("to", json!(to));
                    put("len", json!(len));
                }
                LlirOp::TopK { axis, k, largest, len, extent } => {
                    put("axis", json!(axis));
                    put("k", json!(k));
                    put("largest", json!(largest));
                    put("len", json!(len));
                    put("extent", json!(extent));
                }
                LlirOp::GatherElements { axis, len, extent } => {
                    put("axis", json!(axis));
                    put("len", json!(len));
                    put("extent", json!(extent));
                }
                LlirOp::ScatterElements { axis, reduction, len, extent, updates } => {
                    put("axis", json!(axis));
                    put("reduction", json!(reduction.name()));
                    put("len", json!(len));
                    put("extent", json!(extent));
                    put("updates", json!(updates));
                }
                LlirOp::Arg { axis, last, len, extent, .. } => {
                    put("axis", json!(axis));
                    put("last", json!(last));
                    put("len", json!(len));
                    put("extent", json!(extent));
                }
                LlirOp::Upload | LlirOp::Readback => {}
            }
            o.insert("inputs".into(), json!(node.inputs));
            o.insert(
                "reads".into(),
                Value::Array(node.reads.iter().map(|r| name(&r.buffer)).collect()),
            );
            o.insert(
                "views".into(),
                Value::Array(
                    node.reads
                        .iter()
                        .map(|r| json!({"shape": r.view.shape, "strides": r.view.strides, "offset": r.view.offset}))
                        .collect(),
                ),
            );
            o.insert("writes".into(), Value::Array(node.writes.iter().map(name).collect()));
            if let Some(ws) = &node.workspace {
                o.insert("workspace".into(), name(ws));
            }
            Value::Object(o)
        })
        .collect();
    let buffers: Vec<Value> = llir
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let offset = program.plan.offsets.get(i).copied().unwrap_or(0);
            let reserved = program.plan.reserved.get(i).copied().unwrap_or(0);
            let mut v = json!({
                "id": b.id,
                "dtype": b.dtype,
                "shape": b.shape,
                "role": role_name(b.role),
                "bytes": b.bytes,
                "reserved": reserved,
                "offset": offset,
                "end": offset.saturating_add(reserved),
                "uses": b.uses,
            });
            // Only marked buffers carry it (programs without in-place reuse dump as before).
            if let Some(a) = b.in_place_of.and_then(|a| program.llir.buffers.get(a)) {
                v["in_place_of"] = json!(a.id);
            }
            // Symbol names per axis (null for a fixed one), only where an axis is symbolic.
            if !crate::symbols::all_fixed(&b.axes) {
                let names: Vec<Value> = b
                    .axes
                    .iter()
                    .map(|a| {
                        a.and_then(|s| llir.symbols.get(s.0)).map_or(Value::Null, |d| json!(d.name))
                    })
                    .collect();
                v["symbols"] = Value::Array(names);
            }
            v
        })
        .collect();
    let f = &program.figures;
    let symbols: Vec<Value> =
        llir.symbols.iter().map(|d| json!({"name": d.name, "bound": d.bound})).collect();
    let mut doc = json!({
        "label": program.label,
        "nodes": nodes,
        "buffers": buffers,
        "slab_bytes": f.slab_bytes,
        "naive_bytes": f.naive_bytes,
        "lower_bound": f.lower_bound,
        "launches": f.launches,
        "dram_bytes": f.dram_bytes,
        "flops": f.flops,
        "node_count": f.nodes,
        "options": {
            "alignment": program.options.alignment,
            "capacity": program.options.capacity,
            "algorithm": program.options.algorithm.name(),
            "workspace_bytes": program.options.workspace_bytes,
            "resident_weights": program.options.resident_weights,
        },
    });
    // Only programs with symbolic dimensions carry the list (the others dump as before).
    if !symbols.is_empty() {
        doc["symbols"] = Value::Array(symbols);
        doc["flops_expr"] = json!(llir.flops_polynomial().map(|p| p.to_string()));
    }
    doc
}

/// The slab layout picture of the plan (the planner's `layout_svg`: byte offset against the
/// DAG's order), each step labelled with its canonical node id and op (`1 lt_matmul`).
pub fn plan_svg(program: &CompiledProgram) -> String {
    let ops: Vec<String> = program
        .llir
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{i} {}", n.op.name()))
        .collect();
    lumen_planner::svg::layout_svg_with_names(
        &program.dag,
        &program.llir.slab_buffers(),
        &program.plan,
        |node| ops.get(node.index()).cloned().unwrap_or_else(|| node.index().to_string()),
    )
}

/// Writes `{label}.llir.txt`, `{label}.llir.dot`, `{label}.plan.txt` and `{label}.plan.svg`
/// into `dir`, creating it, as one set (the files of Luminal's `LLIR_DUMP_DIR`): the one-program
/// case of [`write_dumps_all`], which says how the set is written and what fails. Returns the
/// four paths written, in that order.
///
/// # Errors
/// As [`write_dumps_all`].
pub fn write_dumps(dir: &Path, program: &CompiledProgram) -> Result<Vec<PathBuf>, CompileError> {
    write_dumps_all(dir, &[program])
}

/// Writes the four dump files of every program in `programs` (see [`write_dumps`]) into
/// `dir`, creating it, as ONE set across programs, so `lumen compare` leaves either every
/// candidate's dumps or none: every file of every program is first written to a temporary name
/// in `dir` (`.{file}.{pid}.{n}.tmp`), and only when all of them are written and no target is a
/// directory are they renamed into place. A reader never sees half a file, and a failed write
/// (a full disk) or a directory in any target's place leaves `dir` as it was: the old files
/// untouched, no temporary file behind, none of the new files renamed. Returns the paths
/// written, four per program in `programs` order (a label given twice is written twice, the
/// later program's files landing, as two [`write_dumps`] calls in a row would do).
///
/// # Errors
/// [`CompileError::ProgramName`] when a label is not a plain file-name stem (compiling
/// refuses such names first; this guards a hand-made label, so no dump lands outside `dir`),
/// checked for every program before anything is written; [`CompileError::Dump`] naming the
/// path: `dir` cannot be created (`not a directory` when it is an existing file), a file cannot
/// be written, a target is a directory (`is a directory`), or a rename fails. Only a rename
/// failing after every check passed (the directory changed meanwhile) can leave earlier files
/// of the set renamed.
pub fn write_dumps_all(
    dir: &Path,
    programs: &[&CompiledProgram],
) -> Result<Vec<PathBuf>, CompileError> {
    for program in programs {
        crate::options::validate_label(&program.label)?;
    }
    let fail =
        |path: &Path, message: String| CompileError::Dump { path: path.to_path_buf(), message };
    if let Err(e) = fs::create_dir_all(dir) {
        // create_dir_all reports "File exists" for a regular file in the way.
        let message = match fs::metadata(dir) {
            Ok(meta) if !meta.is_dir() => "not a directory".to_string(),
            _ => e.to_string(),
        };
        return Err(fail(dir, message));
    }
    // (temporary, target) of every file written so far: removed again on any failure.
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(4 * programs.len());
    let discard = |staged: &[(PathBuf, PathBuf)]| {
        for (tmp, _) in staged {
            let _ = fs::remove_file(tmp);
        }
    };
    for program in programs {
        let label = &program.label;
        // One program's texts at a time: a long candidate list never holds every text at once.
        let files = [
            (format!("{label}.llir.txt"), llir_text(program)),
            (format!("{label}.llir.dot"), llir_dot(program)),
            (format!("{label}.plan.txt"), plan_text(program)),
            (format!("{label}.plan.svg"), plan_svg(program)),
        ];
        for (file, text) in files {
            let path = dir.join(&file);
            // Unique per process and call: two threads dumping the same label never share a
            // temp, nor does a label given twice in one set.
            let seq = DUMP_SEQ.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!(".{file}.{}.{seq}.tmp", std::process::id()));
            if let Err(e) = fs::write(&tmp, text) {
                // A failed write may still have created the file.
                let _ = fs::remove_file(&tmp);
                discard(&staged);
                return Err(fail(&path, e.to_string()));
            }
            staged.push((tmp, path));
        }
    }
    // A directory in a target's place would fail its rename after the earlier ones landed.
    if let Some((_, path)) =
        staged.iter().find(|(_, path)| fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()))
    {
        let err = fail(path, "is a directory".to_string());
        discard(&staged);
        return Err(err);
    }
    for (i, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = fs::rename(tmp, path) {
            discard(staged.get(i..).unwrap_or_default());
            return Err(fail(path, e.to_string()));
        }
    }
    Ok(staged.into_iter().map(|(_, path)| path).collect())
}

/// `1 launch`, `3 launches`: a count with its noun, plural when not one.
fn count(n: usize, noun: &str) -> String {
    let plural = if n == 1 {
        ""
    } else if noun.ends_with("ch") || noun.ends_with('s') {
        "es"
    } else {
        "s"
    };
    format!("{n} {noun}{plural}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompileOptions, programs};

    fn program(fuse: bool) -> CompiledProgram {
        let options = CompileOptions { fuse, name: "lr".into(), ..CompileOptions::default() };
        programs::linear_relu(8, 16, 8).and_then(|g| g.compile(&options)).expect("compiles")
    }

    /// The names in `dir`, sorted (temporary files included: none may be left).
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("readable")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The `.dot` edges as lumen wrote them before the writers index: for each edge, a scan
    /// of the source's writes (quadratic through the upload node); the oracle of `llir_dot`.
    fn dot_edges_oracle(program: &CompiledProgram) -> String {
        let llir = &program.llir;
        let mut s = String::new();
        for (i, node) in llir.nodes.iter().enumerate() {
            for &j in &node.inputs {
                let carried: Vec<BufferId> = llir
                    .nodes
                    .get(j)
                    .map(|src| {
                        src.writes
                            .iter()
                            .copied()
                            .filter(|b| node.read_buffers().any(|r| r == *b))
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "  n{j} -> n{i} [label=\"{}\"];",
                    dot_escape(&names(program, &carried))
                );
            }
        }
        s
    }

    #[test]
    fn dot_edges_are_those_of_the_scan_of_every_source() {
        let transformer = programs::transformer(programs::TransformerSizes::default());
        let config = crate::models::VitConfig {
            image: [8, 8],
            patch: 2,
            width: 16,
            heads: 2,
            blocks: 2,
            ffn: 32,
            classes: 10,
            eps: 1e-5,
            gelu: crate::models::Gelu::Erf,
        };
        let vit = crate::models::vit(&config, 2);
        for (graph, fuse) in [
            (programs::linear_relu(8, 16, 8), false),
            (programs::mlp(&[8, 16, 16, 4], 3), true),
            (programs::mlp(&[8, 16, 16, 4], 3), false),
            (transformer.clone(), true),
            (transformer, false),
            (vit.clone(), true),
            (vit, false),
        ] {
            let options = CompileOptions { fuse, ..CompileOptions::default() };
            let p = graph.and_then(|g| g.compile(&options)).expect("compiles");
            let dot = llir_dot(&p);
            let edges: String =
                dot.lines().filter(|l| l.contains(" -> ")).map(|l| format!("{l}\n")).collect();
            assert_eq!(edges, dot_edges_oracle(&p), "{}", p.label);
        }
    }

    #[test]
    fn several_programs_are_written_as_one_set() {
        let (unfused, fused) = (program(false), program(true));
        let dir = tempfile::tempdir().expect("tempdir");
        let written = write_dumps_all(dir.path(), &[&unfused, &fused]).expect("written");
        let names: Vec<String> = written
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "lr-unfused.llir.txt",
                "lr-unfused.llir.dot",
                "lr-unfused.plan.txt",
                "lr-unfused.plan.svg",
                "lr-fused.llir.txt",
                "lr-fused.llir.dot",
                "lr-fused.plan.txt",
                "lr-fused.plan.svg",
            ]
        );
        assert_eq!(listing(dir.path()).len(), 8, "no temporary file left");
        let text = fs::read_to_string(dir.path().join("lr-fused.llir.txt")).expect("read");
        assert_eq!(text, llir_text(&fused));
        // The one-program form is the same files.
        assert_eq!(write_dumps(dir.path(), &unfused).expect("written"), written[..4]);
        assert!(write_dumps_all(dir.path(), &[]).expect("nothing to write").is_empty());
    }

    #[test]
    fn a_directory_in_a_later_programs_place_leaves_the_dir_as_it_was() {
        let (unfused, fused) = (program(false), program(true));
        let dir = tempfile::tempdir().expect("tempdir");
        // An older set of the first program: it must survive untouched.
        fs::write(dir.path().join("lr-unfused.plan.txt"), "old plan").expect("write");
        fs::create_dir(dir.path().join("lr-fused.plan.svg")).expect("mkdir");
        let before = listing(dir.path());
        let err = write_dumps_all(dir.path(), &[&unfused, &fused]).expect_err("refused");
        let target = dir.path().join("lr-fused.plan.svg");
        assert_eq!(
            err.to_string(),
            format!("cannot write dump {}: is a directory", target.display())
        );
        assert_eq!(listing(dir.path()), before, "nothing renamed, every temp removed");
        assert_eq!(
            fs::read_to_string(dir.path().join("lr-unfused.plan.txt")).expect("read"),
            "old plan"
        );
        assert!(listing(&target).is_empty());
    }

    #[test]
    fn a_bad_label_anywhere_writes_nothing() {
        let good = program(false);
        let mut bad = program(true);
        bad.label = "../escape".into();
        let dir = tempfile::tempdir().expect("tempdir");
        let err = write_dumps_all(dir.path(), &[&good, &bad]).expect_err("refused");
        assert!(matches!(err, CompileError::ProgramName { .. }), "{err}");
        assert!(listing(dir.path()).is_empty());
    }
}
