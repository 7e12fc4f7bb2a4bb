//! `mck`: the multicluster-kafka command line.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use logging::LogFormat;

mod allocator;
mod args;
mod clusters;
mod consume;
#[cfg(feature = "demo")]
mod demo;
mod describe;
mod endpoint;
mod logging;
mod output;
mod plan;
mod progress;
mod stdio;
mod validate;

/// Read one logical stream from many Kafka clusters, and follow it as it moves.
#[derive(Debug, Parser)]
#[command(name = "mck", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How diagnostics on stderr look: plain `mck: …` lines, or one JSON object per
    /// line. `MCK_LOG` (e.g. `MCK_LOG=debug`) shows full tracing instead of plain lines.
    #[arg(long, value_enum, global = true, default_value_t = LogFormat::Text, env = "MCK_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read streams and print their records, one per line; follows metadata edits.
    #[command(after_help = "Examples:\n  \
        mck consume streams.yaml --stream orders\n  \
        mck consume -b localhost:9092 -t orders -o -10 -e          # the last 10 of each partition\n  \
        mck consume -b localhost:9092 -t orders -o @-1h -f '%t [%p] @%o: %k %s\\n'\n  \
        mck consume streams.yaml -s orders -o 2026-11-30T10:00:00Z -c 100 --format kv\n  \
        mck consume streams.yaml -s orders --until latest --output out.jsonl \\\n      \
        --checkpoint-dir state/ -g my-group\n\n\
        Three regions in time order (regions.yaml: stream `orders` on clusters\n\
        eu, us and ap; a quiet region holds the others back at most --idle-timeout,\n\
        a region with a backlog is paced by --align):\n  \
        mck consume regions.yaml -s orders --order time --max-out-of-orderness 2s \\\n      \
        --idle-timeout 10s --align 1m\n\n\
        Records appear as they arrive (flushed when the stream goes idle, and at least\n\
        every 100 ms). Every option can also come from an MCK_* environment variable\n\
        (MCK_BROKERS, MCK_FROM, ...), named in each option's help.\n\n\
        Exit status: 0 when a bounded run completes, --count is reached, stdout's reader\n\
        goes away (| head) or a run is stopped by SIGINT/SIGTERM; 1 on an error, 2 on\n\
        bad arguments.")]
    Consume(Box<consume::ConsumeArgs>),
    /// Show streams, clusters, topics and partitions with their offsets (and a group's lag).
    #[command(after_help = "Examples:\n  \
        mck describe streams.yaml\n  \
        mck describe --metadata streams.yaml --stream orders --group my-group --json\n\n\
        Each cluster is shown with its bootstrap list and state: connected, unreachable,\n\
        rejected (credentials or TLS refused) or refused (a property librdkafka refuses,\n\
        by key).\n\n\
        Exit status: 0, also when clusters are unreachable or reject the client; 1 for a\n\
        bad file, an unknown stream id or a refused property (named on stderr).")]
    Describe(describe::DescribeArgs),
    /// Parse and check a metadata file; print its streams or the located error.
    #[command(after_help = "Examples:\n  \
        mck validate streams.yaml\n  \
        mck validate --json streams.json\n\n\
        Exit status: 0 when the file is valid, 1 when it is not, 2 on bad arguments.")]
    Validate(ValidateArgs),
    /// Show what would change between two metadata files.
    #[command(after_help = "Examples:\n  \
        mck plan streams-old.yaml streams-new.yaml\n  \
        mck plan --json --metadata streams-old.yaml --metadata streams-new.yaml")]
    Plan(plan::PlanArgs),
    /// Watch a migration between two in-process clusters (no Kafka needed).
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Print a shell completion script (e.g. `mck completions bash > /etc/bash_completion.d/mck`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, in roff (e.g. `mck man | man -l -`).
    Man,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    #[command(flatten)]
    file: args::MetadataFile,
    /// Print the parsed streams as JSON (secrets redacted).
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    allocator::tune();
    args::set_command(Cli::command);
    let cli = Cli::parse();
    let log_format = cli.log_format;
    logging::init(log_format, std::io::stderr().is_terminal());
    let result = match cli.command {
        Command::Validate(a) => validate::run(a.file.required(), a.json),
        Command::Consume(a) => consume::run(*a),
        Command::Describe(a) => describe::run(a),
        Command::Plan(a) => plan::run(a),
        #[cfg(feature = "demo")]
        Command::Demo(a) => demo::run(a),
        Command::Completions { shell } => {
            let mut out = stdio::Stdout::new();
            clap_complete::generate(shell, &mut Cli::command(), "mck", &mut out);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => clap_mangen::Man::new(Cli::command())
            .render(&mut stdio::Stdout::new())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| format!("stdout: {e}")),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            match log_format {
                LogFormat::Json => tracing::error!("{e}"),
                LogFormat::Text => stdio::say!("mck: error: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

#[cfg(all(test, feature = "demo"))]
mod tests {
    use super::*;

    /// The help's example lines (`  mck …`, and their `\`-continued lines) as
    /// fenced shell blocks: as plain Markdown they would run together.
    fn fence_examples(markdown: &str) -> String {
        let mut out = String::new();
        let mut in_block = false;
        let mut continued = false;
        for line in markdown.lines() {
            let example = line.starts_with("  mck ") || (in_block && continued);
            if example && !in_block {
                out.push_str("```sh\n");
                in_block = true;
            } else if !example && in_block {
                out.push_str("```\n");
                in_block = false;
            }
            if example {
                out.push_str(line.strip_prefix("  ").unwrap_or(line));
                continued = line.trim_end().ends_with('\\');
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        if in_block {
            out.push_str("```\n");
        }
        out
    }

    /// The `mck …` commands a Markdown text shows: in code spans, and on the lines of
    /// its fenced blocks (with `\`-continued lines joined).
    fn commands_shown(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut fenced = false;
        let mut pending = String::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                pending.push_str(line.trim_end().trim_end_matches('\\'));
                pending.push(' ');
                if line.trim_end().ends_with('\\') {
                    continue;
                }
                let joined = std::mem::take(&mut pending);
                if let Some(at) = joined.find("mck ") {
                    out.push(joined[at..].to_string());
                }
                continue;
            }
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 && span.starts_with("mck ") {
                    out.push(span.to_string());
                }
            }
        }
        out
    }

    /// Every `mck` command the README and docs/ show names a subcommand that exists,
    /// and only flags that subcommand (or every command) takes.
    #[test]
    fn the_docs_name_only_commands_and_flags_that_exist() {
        let cli = Cli::command();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut documents = vec![
            root.join("README.md"),
            root.join("deploy/kubernetes/README.md"),
        ];
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") && !path.ends_with("cli.md") {
                documents.push(path);
            }
        }
        let mut wrong = Vec::new();
        let mut checked = 0;
        for document in &documents {
            let text = std::fs::read_to_string(document).unwrap();
            for command in commands_shown(&text) {
                // Up to a pipe, a comment or the next command of the line.
                let command = command
                    .split(['|', '#', ';', '&', ')'])
                    .next()
                    .unwrap_or_default();
                let mut words = command.split_whitespace().skip(1);
                let Some(name) = words.next() else { continue };
                if name.starts_with('-') || name.starts_with('<') || name == "..." {
                    continue;
                }
                let Some(sub) = cli.find_subcommand(name) else {
                    wrong.push(format!(
                        "{}: `mck {name}` is no command",
                        document.display()
                    ));
                    continue;
                };
                checked += 1;
                for flag in words.filter_map(|w| w.strip_prefix("--")) {
                    let flag: String = flag
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    let known = flag.is_empty()
                        || ["help", "version"].contains(&flag.as_str())
                        || sub
                            .get_arguments()
                            .chain(cli.get_arguments())
                            .any(|a| a.get_long() == Some(flag.as_str()));
                    if !known {
                        wrong.push(format!(
                            "{}: `mck {name}` takes no --{flag}",
                            document.display()
                        ));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(checked > 30, "only {checked} commands found in the docs");
    }

    /// docs/cli.md is the reference of every command and flag, rendered from these
    /// clap definitions (so it says what `--help` says). When the definitions change,
    /// `MCK_WRITE_CLI_DOC=1 cargo test -p mck cli_reference` writes it again.
    #[test]
    fn the_cli_reference_is_what_the_help_says() {
        let options = clap_markdown::MarkdownOptions::new()
            .title("The `mck` command line".to_string())
            .show_footer(false);
        let header = "<!-- Written by `MCK_WRITE_CLI_DOC=1 cargo test -p mck cli_reference` \
                      from the clap definitions; a test fails when it differs from them. -->\n\n";
        let rendered = format!(
            "{header}{}",
            fence_examples(&clap_markdown::help_markdown_command_custom(
                &Cli::command(),
                &options
            ))
        );
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        if std::env::var_os("MCK_WRITE_CLI_DOC").is_some() {
            std::fs::write(&path, &rendered).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == rendered,
            "docs/cli.md differs from the clap definitions: run \
             `MCK_WRITE_CLI_DOC=1 cargo test -p mck cli_reference` and commit it"
        );
    }
}
