//! The `lumen` command-line tool: `plan-slab`, `compile`, `compare`, `run`, `generate`.
//!
//! Every subcommand prints readable text by default and one JSON object with `--json`. Errors
//! print one line `error: ...` on stderr and exit with status 1; usage errors (clap's, folded
//! onto one line, and the ones a subcommand finds after parsing: `cli::usage`) exit with
//! status 2. `--help` and `--version` print as usual. A
//! report whose reader went away (`| head -1`) ends quietly with status 141, like a Unix tool
//! killed by SIGPIPE; any other failed write to stdout is `error: cannot write to stdout: ...`
//! and status 1 (see `cli::out`).

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
            error_line(&usage_line(&err.to_string()));
            std::process::exit(2);
        }
    };
    // Backstop: a bug that panics still ends in one `error:` line, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let at =
            info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        error_line(&format!(
            "internal error (a bug in lumen, please report it): {}{at}",
            one_line(&what)
        ));
    }));
    let result = std::panic::catch_unwind(|| cli::dispatch(args));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            let stdout = err.chain().find_map(|c| c.downcast_ref::<cli::out::StdoutError>());
            if stdout.is_some_and(cli::out::StdoutError::is_broken_pipe) {
                // The reader has all it wanted: no message, the status of a SIGPIPE death.
                std::process::exit(cli::out::BROKEN_PIPE_STATUS);
            }
            error_line(&chain_line(&err));
            // A flag the command cannot use is a usage error, like the ones clap finds.
            std::process::exit(if cli::usage::is_usage(&err) { 2 } else { 1 });
        }
        // The hook already printed the line.
        Err(_) => std::process::exit(101),
    }
}

/// Prints `error: {line}` on stderr. A stderr that cannot be written is ignored (the exit
/// status still says it failed); `eprintln!` would panic there, inside the panic hook too.
fn error_line(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "error: {line}");
}

/// The error and its causes on one line, `outer: cause: ...`, skipping a cause whose text the
/// line already holds (thiserror messages often embed their source, and anyhow's `{:#}` would
/// print it twice); byte counts grouped as the tables print them (`cli::errors`).
fn chain_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = one_line(&cli::errors::message(cause));
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn one_line(text: &str) -> String {
    text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
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
