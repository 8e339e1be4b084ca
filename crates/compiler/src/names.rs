//! The rules for names: program names (the stem of dump file names) and tensor names (inputs,
//! weights, outputs and named tensors, printed one per line in dumps).
//!
//! Both use one character set, ASCII letters, digits, `_`, `-` and `.`, so a name can neither
//! read as two entries of a dump line nor escape the dump folder as a path. This module sits at
//! the bottom of the crate: it knows nothing of graphs, errors or the pipeline; the callers
//! turn a problem it finds into their typed error.

/// The longest program name, in bytes: with `-activation` (the longest candidate suffix),
/// `.llir.txt` and the temporary name a dump is written under, a file name stays below the
/// 255 bytes common file systems allow.
pub const MAX_PROGRAM_NAME_BYTES: usize = 200;

/// The characters of program and tensor names: ASCII letters, digits, `_`, `-`, `.`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// A character as messages quote it: `'/'`, `' '`, `'\n'` (escaped, so the message stays on
/// one line).
pub(crate) fn quoted_char(c: char) -> String {
    format!("{c:?}")
}

/// What makes `name` unusable as a file-name stem (charset and leading `.` only), if anything:
/// `it is empty`, `it starts with '.'`, `'/' is not allowed`.
pub(crate) fn stem_problem(name: &str) -> Option<String> {
    let Some(first) = name.chars().next() else { return Some("it is empty".to_string()) };
    if first == '.' {
        // `.` and `..` name directories; any other leading dot hides the dump.
        return Some("it starts with '.'".to_string());
    }
    name.chars().find(|&c| !is_name_char(c)).map(|c| format!("{} is not allowed", quoted_char(c)))
}

/// What makes `name` unusable as a program name, if anything: [`stem_problem`], or a name
/// longer than [`MAX_PROGRAM_NAME_BYTES`] (`it is 201 bytes long`).
pub(crate) fn program_name_problem(name: &str) -> Option<String> {
    stem_problem(name).or_else(|| {
        (name.len() > MAX_PROGRAM_NAME_BYTES).then(|| format!("it is {} bytes long", name.len()))
    })
}

/// A valid program name made from any text (a file stem, a user's title): every character
/// outside ASCII letters, digits, `_`, `-`, `.` becomes `_`, as does a leading `.`; empty text
/// becomes `program`; the result is cut to [`MAX_PROGRAM_NAME_BYTES`]. Always passes
/// `validate_program_name`. `my model` -> `my_model`, `../x` -> `_._x`.
pub fn sanitize_program_name(text: &str) -> String {
    let mut name: String = text
        .chars()
        .enumerate()
        .map(|(i, c)| if is_name_char(c) && !(i == 0 && c == '.') { c } else { '_' })
        .take(MAX_PROGRAM_NAME_BYTES)
        .collect();
    if name.is_empty() {
        name.push_str("program");
    }
    name
}

/// Why `name` cannot name a tensor, if it cannot: tensor names appear in the one-line
/// canonical dumps (`reads=[x, w]`, `buffer x f32[64, 256] input bytes=65536`), the plan
/// table and the JSON, so they are restricted to an identifier-like set that keeps every line
/// unambiguous: ASCII letters, digits, `_`, `.` and `-` (`w1`, `layers.0.weight`, `b-1`). A
/// space, `,`, a bracket, a quote, `=` or a control character would let one name read as two,
/// or end a line. Empty names are reported separately (`empty`).
///
/// Returns `not identifier-like: ' ' is not allowed (...)` for the first character outside
/// the set, `None` for a valid (or empty) name.
pub fn tensor_name_problem(name: &str) -> Option<String> {
    let c = name.chars().find(|&c| !is_name_char(c))?;
    Some(format!(
        "not identifier-like: {} is not allowed (a tensor name uses ASCII letters, digits, \
         '_', '.' and '-': dumps print one entry per line)",
        quoted_char(c)
    ))
}

/// Whether a user name would collide with compiler-made buffer names: `t` or `workspace`
/// followed by digits, and `workspace` itself.
pub fn is_reserved_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name == "workspace"
        || name.strip_prefix("workspace").is_some_and(digits)
        || name.strip_prefix('t').is_some_and(digits)
}
