//! The `lumen` command-line tool: `plan-slab`, `compile`, `compare`, `run`.
//!
//! Every subcommand prints readable text by default and one JSON object with `--json`. Errors
//! print one line `error: ...` on stderr and exit with status 1; usage errors (clap) are folded
//! onto one line too and exit with status 2. `--help` and `--version` print as usual.

mod cli;

use clap::Parser;
use clap::error::ErrorKind;

fn main() {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(err) if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            err.exit()
        }
        Err(err) if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
        Err(err) => {
            eprintln!("error: {}", usage_line(&err.to_string()));
            std::process::exit(2);
        }
    };
    if let Err(err) = cli::dispatch(args) {
        // One line: the error chain joined, never a backtrace.
        let msg = format!("{err:#}").replace('\n', " ");
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}

/// clap's multi-line usage error as one line: the message, then its hints (possible values,
/// the usage) joined with `; `, without the "For more information" footer.
fn usage_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .fold(String::new(), |mut acc, l| {
            // A line ending in ':' introduces the next one; other lines are separate hints.
            if !acc.is_empty() {
                acc.push_str(if acc.ends_with(':') { " " } else { "; " });
            }
            acc.push_str(l);
            acc
        })
}
