//! The `lumen` command-line tool: `plan-slab`, `compile`, `compare`, `run`.
//!
//! Every subcommand prints readable text by default and one JSON object with `--json`. Errors
//! print one line `error: ...` on stderr and exit with status 1; usage errors exit with 2.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    if let Err(err) = cli::dispatch(args) {
        // One line: the error chain joined, never a backtrace.
        let msg = format!("{err:#}").replace('\n', " ");
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}
