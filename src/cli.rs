//! The command line. Others script against it: keep it stable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// GitOps for fleets of Kubernetes clusters, speaking Karmada's policy API.
#[derive(Debug, Parser)]
#[command(name = "flotilla", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human, env = "FLOTILLA_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Plain text lines.
    Human,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render what every member cluster must run, offline.
    Render(RenderArgs),
    /// Check that a repo loads and every template can be placed.
    Validate(SourceArgs),
}

/// Where the repo comes from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Repo directory (or a directory inside a Git work tree when --ref is given).
    pub repo: PathBuf,
    /// Read this Git revision (branch, tag or SHA) from the object database instead of
    /// the working tree.
    #[arg(long = "ref", value_name = "REV")]
    pub rev: Option<String>,
    /// Observed cluster capacity and previous placements (YAML or JSON), for dynamic
    /// weights and Aggregated division.
    #[arg(long, value_name = "FILE")]
    pub cluster_state: Option<PathBuf>,
}

/// `flotilla render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub format: Format,
    /// Write `<dir>/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml` instead of stdout.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Only these clusters (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A YAML stream per cluster.
    Yaml,
    /// One JSON object: `{"revision", "clusters", "problems"}`.
    Json,
}
