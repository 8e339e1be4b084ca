//! No import circles between the files of a crate: inside every crate of the workspace, the
//! files import each other in one direction only, so each can be read knowing only the files
//! below it (errors and small facts at the bottom, the pipeline's stages above, the entry
//! points on top).
//!
//! An import is a path a file names outside comments, strings and `#[cfg(test)]` items:
//! `crate::a::b::Item` (a `use` tree or a path in code), `super::x`, `self::x`, or a child
//! module's name used as a path (`greedy::Fit` in `algorithms/mod.rs`). It points at the file
//! that defines what it names: a name re-exported by a module's front door (`lib.rs`, a
//! `mod.rs`) points at the file that defines it, as a reader would follow it. Doc-links are
//! documentation, not imports. The test fails on any circle and prints its files and the names
//! that tie them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The source roots of the workspace's crates.
const CRATES: &[&str] =
    &["crates/planner/src", "crates/compiler/src", "crates/runtime/src", "crates/onnx/src", "src"];

/// One source file: its module path from the crate root and its code (comments, strings and
/// test items blanked out).
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    code: String,
}

/// Code with comments, string and char literals replaced by spaces (line breaks kept).
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"...", r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for &ch in &c[i..=end] {
                        blank(&mut out, ch);
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` with every `#[cfg(test)]` item removed (a `mod tests { ... }`, a test helper).
fn without_test_items(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let bytes = out.as_bytes();
        let mut end = at + "#[cfg(test)]".len();
        // The item runs to its `;` or to the brace that closes its first `{`.
        let mut depth = 0usize;
        while end < bytes.len() {
            match bytes[end] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end += 1;
                    break;
                }
                _ => {}
            }
            end += 1;
        }
        out.replace_range(at..end.min(out.len()), "");
    }
    out
}

/// Whether `file` is a module's front door: `lib.rs`, `main.rs`, a `mod.rs`, or `x.rs` beside a
/// folder `x/` of its children.
fn is_front_door(file: &Path) -> bool {
    let stem = file.file_stem().unwrap_or_default();
    stem == "lib" || stem == "main" || stem == "mod" || file.with_extension("").is_dir()
}

/// `code` without its `pub use` / `pub(...) use` items: a front door's re-exports name its
/// children for its users; they are not the front door's own imports.
fn without_reexports(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    loop {
        let at = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        let end = rest[at..].find(';').map_or(rest.len(), |e| at + e + 1);
        rest = &rest[end..];
    }
}

/// Module path of `file` under the crate root `src`: `lib.rs`/`main.rs` -> [], `a/mod.rs` ->
/// [a], `a/b.rs` -> [a, b].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    } else if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier starting at byte `i` of `s`.
fn ident_at(s: &str, i: usize) -> &str {
    let end = s[i..].find(|c: char| !is_ident(c)).map_or(s.len(), |e| i + e);
    &s[i..end]
}

/// The paths a use tree or path starting at byte `i` names, each as segments (`a::{b, c::d}` ->
/// [a, b], [a, c, d]); `self` in a group names the group's prefix.
fn paths_at(s: &str, mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let skip_ws = |i: &mut usize| {
        while s[*i..].starts_with(|c: char| c.is_whitespace()) {
            *i += 1;
        }
    };
    let mut path = prefix;
    loop {
        skip_ws(&mut i);
        if s[i..].starts_with('{') {
            i += 1;
            loop {
                skip_ws(&mut i);
                if s[i..].starts_with('}') {
                    return i + 1;
                }
                i = paths_at(s, i, path.clone(), out);
                skip_ws(&mut i);
                if s[i..].starts_with(',') {
                    i += 1;
                }
            }
        }
        let id = ident_at(s, i);
        if id.is_empty() {
            // `*` or the end of the path.
            if s[i..].starts_with('*') {
                i += 1;
            }
            out.push(path);
            return i;
        }
        i += id.len();
        if id != "self" {
            path.push(id.to_string());
        }
        skip_ws(&mut i);
        if s[i..].starts_with("::") {
            i += 2;
        } else {
            // `as alias`, `,`, `;`, `(`... end the path.
            out.push(path);
            return i;
        }
    }
}

/// Every path `code` (a file of module `module`) names, from the crate root.
fn named_paths(code: &str, module: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i..].chars().next().unwrap();
        let boundary = i == 0 || {
            let prev = code[..i].chars().next_back().unwrap();
            !is_ident(prev) && prev != ':'
        };
        if !(boundary && is_ident(c)) {
            i += c.len_utf8();
            continue;
        }
        let id = ident_at(code, i);
        let after = i + id.len();
        let path_follows = code[after..].starts_with("::");
        let base: Option<Vec<String>> = match id {
            "crate" if path_follows => Some(Vec::new()),
            "self" if path_follows => Some(module.to_vec()),
            "super" if path_follows => {
                let mut m = module.to_vec();
                m.pop();
                // `super::super::`.
                let mut j = after + 2;
                while code[j..].starts_with("super::") {
                    m.pop();
                    j += "super::".len();
                }
                let mut paths = Vec::new();
                let end = paths_at(code, j, m, &mut paths);
                out.extend(paths);
                i = end;
                continue;
            }
            child if path_follows && children.contains(child) => {
                let mut paths = Vec::new();
                let mut m = module.to_vec();
                m.push(child.to_string());
                let end = paths_at(code, after + 2, m, &mut paths);
                out.extend(paths);
                i = end;
                continue;
            }
            _ => None,
        };
        match base {
            Some(base) => {
                let mut paths = Vec::new();
                i = paths_at(code, after + 2, base, &mut paths);
                out.extend(paths);
            }
            None => i = after,
        }
    }
    out
}

/// Names of the items `code` defines (`struct`, `enum`, `fn`, `type`, `trait`, `const`,
/// `static`, `union`, `mod`).
fn defined_items(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let words: Vec<&str> = code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect();
    for w in words.windows(2) {
        if matches!(
            w[0],
            "struct" | "enum" | "fn" | "type" | "trait" | "const" | "static" | "union" | "mod"
        ) {
            names.insert(w[1].to_string());
        }
    }
    names
}

/// The import circles among the files of one crate: each as its files and the edges that tie
/// them (`a.rs -> b.rs: Name`).
fn circles(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut sources: Vec<SourceFile> = Vec::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for f in &files {
        let raw = fs::read_to_string(f).unwrap();
        let code = code_only(&raw);
        let module = module_of(src, f);
        // `#[cfg(test)] mod x;` declares a test-only file.
        let mut rest = code.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            let after = rest[at + 12..].trim_start();
            if let Some(decl) = after.strip_prefix("mod ") {
                let name = ident_at(decl, 0);
                if decl[name.len()..].trim_start().starts_with(';') {
                    let mut m = module.clone();
                    m.push(name.to_string());
                    test_only.insert(m);
                }
            }
            rest = &rest[at + 12..];
        }
        let mut code = without_test_items(&code);
        if is_front_door(f) {
            code = without_reexports(&code);
        }
        sources.push(SourceFile { path: f.clone(), module, code });
    }
    sources.retain(|s| !test_only.contains(&s.module));
    let index: BTreeMap<Vec<String>, usize> =
        sources.iter().enumerate().map(|(i, s)| (s.module.clone(), i)).collect();
    let defs: Vec<BTreeSet<String>> = sources.iter().map(|s| defined_items(&s.code)).collect();
    let mut edges: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
    for (from, s) in sources.iter().enumerate() {
        let children: BTreeSet<String> = index
            .keys()
            .filter(|m| m.len() == s.module.len() + 1 && m.starts_with(&s.module))
            .map(|m| m.last().unwrap().clone())
            .collect();
        for path in named_paths(&s.code, &s.module, &children) {
            // The longest prefix that is a file, then the item after it.
            let Some(k) = (0..=path.len()).rev().find(|&k| index.contains_key(&path[..k])) else {
                continue;
            };
            let mut to = index[&path[..k]];
            let item = path.get(k).cloned().unwrap_or_default();
            if !item.is_empty() && !defs[to].contains(&item) {
                // A re-export: the one file below this module that defines the item, else the
                // one file of the crate that does; none: it comes from another crate.
                let prefix = &path[..k];
                let definers = |under: &[String]| -> Vec<usize> {
                    (0..sources.len())
                        .filter(|&j| {
                            sources[j].module.starts_with(under) && defs[j].contains(&item)
                        })
                        .collect()
                };
                match (definers(prefix).as_slice(), definers(&[]).as_slice()) {
                    ([only], _) | ([], [only]) => to = *only,
                    (_, []) => continue,
                    _ => {}
                }
            }
            if to != from {
                let name = if item.is_empty() { path.join("::") } else { item };
                edges.entry((from, to)).or_default().insert(name);
            }
        }
    }
    // Strongly connected components (Tarjan).
    let n = sources.len();
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        adj[a].push(b);
    }
    let mut comps: Vec<Vec<usize>> = Vec::new();
    let (mut index_of, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut counter) = (Vec::new(), 0);
    fn visit(
        v: usize,
        adj: &[Vec<usize>],
        state: (&mut [usize], &mut [usize], &mut [bool]),
        stack: &mut Vec<usize>,
        counter: &mut usize,
        comps: &mut Vec<Vec<usize>>,
    ) {
        let (index_of, low, on_stack) = state;
        index_of[v] = *counter;
        low[v] = *counter;
        *counter += 1;
        stack.push(v);
        on_stack[v] = true;
        for &w in &adj[v] {
            if index_of[w] == usize::MAX {
                visit(w, adj, (&mut *index_of, &mut *low, &mut *on_stack), stack, counter, comps);
                low[v] = low[v].min(low[w]);
            } else if on_stack[w] {
                low[v] = low[v].min(index_of[w]);
            }
        }
        if low[v] == index_of[v] {
            let mut comp = Vec::new();
            while let Some(w) = stack.pop() {
                on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            comps.push(comp);
        }
    }
    for v in 0..n {
        if index_of[v] == usize::MAX {
            visit(
                v,
                &adj,
                (&mut index_of, &mut low, &mut on_stack),
                &mut stack,
                &mut counter,
                &mut comps,
            );
        }
    }
    let name = |i: usize| sources[i].path.display().to_string();
    comps
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort();
            let mut text = format!("circle of {} files:", c.len());
            for (&(a, b), names) in &edges {
                if c.contains(&a) && c.contains(&b) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    text.push_str(&format!("\n  {} -> {}: {}", name(a), name(b), names.join(", ")));
                }
            }
            text
        })
        .collect()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in CRATES {
        found.extend(circles(&root.join(krate)));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The checker sees a circle when there is one: two files that import each other, through a
/// `use` group, a `super::` path and a child module's name.
#[test]
fn the_checker_finds_a_planted_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    fs::create_dir_all(src.join("algorithms")).unwrap();
    fs::write(src.join("lib.rs"), "mod algorithms;\npub use algorithms::Plan;\n").unwrap();
    fs::write(
        src.join("algorithms/mod.rs"),
        "mod best;\nmod greedy;\n// use crate::nothing::Here;\npub struct Plan;\n\
         pub fn place() { best::best(); }\n",
    )
    .unwrap();
    fs::write(
        src.join("algorithms/best.rs"),
        "use super::greedy::{self, Fit};\nconst S: &str = \"crate::lib\";\npub fn best() {}\n",
    )
    .unwrap();
    fs::write(
        src.join("algorithms/greedy.rs"),
        "pub struct Fit;\n#[cfg(test)]\nmod tests { use crate::{Plan}; }\n",
    )
    .unwrap();
    assert!(circles(src).is_empty(), "{:?}", circles(src));
    // greedy -> (lib.rs's re-export) -> algorithms/mod.rs -> best -> greedy.
    fs::write(src.join("algorithms/greedy.rs"), "use crate::{Plan};\npub struct Fit;\n").unwrap();
    let found = circles(src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("circle of 3 files"), "{}", found[0]);
    assert!(found[0].contains("greedy.rs -> ") && found[0].contains(": Plan"), "{}", found[0]);
}
