//! The subcommands, one module each: gather inputs from the edges, call the pure
//! pipeline (or start the controller), print.

mod apply;
mod diff;
mod get;
mod render;
mod rollout;
mod run;
mod status;
mod ui;
mod why;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use flotilla_core::escape;
use flotilla_core::model::{ClusterState, Limits, Plan};
use tracing::warn;

use crate::cli::{Cli, Command, SourceArgs};
use crate::source;

/// How a successful run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything rendered.
    Clean,
    /// The run worked but found problems (exit 1).
    Problems,
}

impl Outcome {
    /// 0 or 1.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Clean => ExitCode::SUCCESS,
            Outcome::Problems => ExitCode::from(1),
        }
    }
}

/// Runs a subcommand. Errors mean invalid input or usage (exit 2).
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Render(args) => render::render(args),
        Command::Validate(args) => render::validate(args),
        Command::Diff(args) => diff::diff(args),
        Command::Apply(args) => apply::apply(args),
        Command::Get(args) => get::get(args),
        Command::Status(args) => status::status(args),
        Command::Run(args) => run::run(*args),
        Command::Rollout(args) => rollout::rollout(args),
        Command::Why(args) => why::why(args),
        Command::Ui(args) => ui::ui(args),
        Command::Completion(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut command, "flotilla", &mut std::io::stdout());
            Ok(Outcome::Clean)
        }
    }
}

/// The error with its causes, `a: b: c`.
pub fn describe(err: &anyhow::Error) -> String {
    // Errors quote names from the repository: they reach a terminal.
    flotilla_core::escape::visible(&format!("{err:#}")).into_owned()
}

/// Refuses a `--cluster` (or `--simulate-failure`) name that no rendered revision
/// declares: a typo must not pass as "no changes".
pub(crate) fn require_declared<'a>(names: impl IntoIterator<Item = &'a String>, plans: &[&Plan]) -> anyhow::Result<()> {
    let declared = |name: &String| plans.iter().any(|plan| plan.clusters.contains_key(name));
    match names.into_iter().find(|name| !declared(name)) {
        Some(unknown) => anyhow::bail!(
            "cluster {unknown} is not declared in the repository (no cluster.karmada.io/v1alpha1 Cluster named so)"
        ),
        None => Ok(()),
    }
}

pub(crate) fn plan(args: &SourceArgs) -> anyhow::Result<Plan> {
    plan_within(args, scope(args)?.as_ref())
}

/// The `--scope` of a command, if given.
pub(crate) fn scope(args: &SourceArgs) -> anyhow::Result<Option<flotilla_core::project::Project>> {
    args.scope.as_deref().map(read_scope).transpose()
}

/// [`plan`], restricted to `scope`.
pub(crate) fn plan_within(args: &SourceArgs, scope: Option<&flotilla_core::project::Project>) -> anyhow::Result<Plan> {
    plan_in_state(args, scope, Ok)
}

/// [`plan_within`] in the `--cluster-state` as `adjust` changes it.
pub(crate) fn plan_in_state(
    args: &SourceArgs,
    scope: Option<&flotilla_core::project::Project>,
    adjust: impl FnOnce(ClusterState) -> anyhow::Result<ClusterState>,
) -> anyhow::Result<Plan> {
    let limits = Limits::default();
    let files = match args.rev.as_deref() {
        Some(rev) => crate::git::read(&args.repo, rev, &limits)?,
        None => source::read_dir(&args.repo, &limits)?,
    };
    let state = match &args.cluster_state {
        Some(path) => read_state(path)?,
        None => ClusterState::default(),
    };
    let state = adjust(state)?;
    let loaded = source::load(&files, &mut flotilla_core::load::ParseCache::default(), &limits)?;
    args.admission().check(&loaded)?;
    // The bytes are parsed: planning a large repository should not hold them too.
    let revision = files.revision.clone();
    drop(files);
    Ok(within(flotilla_core::plan_loaded(loaded, revision, &state), scope))
}

/// Revision `rev` of the repository at `repo`, rendered through `cache`: a second
/// revision reads and parses only the files that differ, and shares the rest.
pub(crate) fn plan_revision(
    repo: &Path,
    rev: &str,
    (scope, admission): (Option<&flotilla_core::project::Project>, flotilla_core::load::Admission),
    cache: &mut flotilla_core::load::ParseCache,
    state: &ClusterState,
) -> anyhow::Result<Plan> {
    let limits = Limits::default();
    let files = crate::git::read_cached(repo, rev, &limits, cache)?;
    let loaded = source::load(&files, cache, &limits)?;
    admission.check(&loaded)?;
    let plan = flotilla_core::plan_loaded(loaded, files.revision, state);
    Ok(within(plan, scope))
}

/// The plan within `scope`, warning about templates nothing claims.
fn within(plan: Plan, scope: Option<&flotilla_core::project::Project>) -> Plan {
    let plan = match scope {
        Some(project) => flotilla_core::project::restrict(plan, project),
        None => plan,
    };
    for key in &plan.unclaimed {
        warn!(object = %key, "no PropagationPolicy claims this template; it goes nowhere");
    }
    plan
}

/// Reads a `--scope` file; a scope that does not parse stops everything.
pub(crate) fn read_scope(path: &Path) -> anyhow::Result<flotilla_core::project::Project> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the scope {}", path.display()))?;
    flotilla_core::project::Project::parse(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a valid scope: {e}", path.display()))
}

/// Warns of each object the revision declares that flotilla accepts and does not act
/// on (or not yet on all it declares).
pub(crate) fn warn_not_acted_on(plan: &Plan) {
    for n in &plan.loaded.not_acted_on {
        let (object, file) = (escape::visible(&n.object), escape::visible(&n.origin.file));
        eprintln!("warning: {object} ({file}:{}): accepted, {}", n.origin.line, n.why);
    }
}

fn read_state(path: &Path) -> anyhow::Result<ClusterState> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("{} is not a valid cluster state", path.display()))
}

pub(crate) fn report(plan: &Plan) -> Outcome {
    warn_not_acted_on(plan);
    for p in &plan.problems {
        let at = p.cluster.as_deref().map(|c| format!(" in cluster {c}")).unwrap_or_default();
        eprintln!("problem: {}{at} ({}:{}): {}", p.object, p.origin.file, p.origin.line, p.message);
    }
    if plan.problems.is_empty() { Outcome::Clean } else { Outcome::Problems }
}

/// The async runtime for commands that talk to clusters.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")
}
