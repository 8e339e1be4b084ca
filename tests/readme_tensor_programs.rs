//! The guide's tensor-program page (`docs/src/tensor-programs.md`, once the README's
//! tensor-program section) stays true: the attention example runs and its quoted LLIR lines are
//! what the compiler prints; the transformer table is `lumen compare`'s output.

#[path = "../examples/attention.rs"]
#[allow(dead_code)]
mod attention;

use std::process::Command;

/// The first ```text block after `after` on the guide's tensor-program page.
fn readme_block(after: &str) -> String {
    let page = include_str!("../docs/src/tensor-programs.md");
    let at =
        page.find(after).unwrap_or_else(|| panic!("docs/src/tensor-programs.md lacks {after:?}"));
    let rest = &page[at..];
    let start = rest.find("```text\n").expect("a text block") + "```text\n".len();
    let end = rest[start..].find("```").expect("its end") + start;
    rest[start..end].to_string()
}

#[test]
fn the_attention_example_runs_and_the_readme_quotes_its_llir() {
    attention::main().expect("the example runs");
    let options =
        lumen::compiler::CompileOptions { name: "attention".to_string(), ..Default::default() };
    let program = attention::build().compile(&options).unwrap();
    let text = lumen::compiler::dump::llir_text(&program);
    let quoted = readme_block("Its LLIR (B = 1, H = 2, S = 4, D = 8)");
    for line in quoted.lines() {
        assert!(text.lines().any(|l| l == line), "guide line not in the LLIR:\n{line}\n{text}");
    }
}

#[test]
fn the_readme_transformer_table_is_compares_output() {
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["compare", "transformer"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(readme_block("Fused, it has 82 launches"), stdout);
}
