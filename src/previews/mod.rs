//! The preview loop: pull requests of one repository on a forge get a plan comment and
//! commit statuses on every new head, and, when labelled, a preview environment in the
//! members (`pr-<N>-<namespace>`, inventory instance `<instance>-pr-<N>`), removed when the pull
//! request closes, loses the label, or goes a time to live without a push. Decisions
//! are [`step`]'s; this module carries them out. Webhook deliveries arrive on a channel;
//! the forge is polled as a fallback. Previews live in the members with their number,
//! head and expiry as labels, so a restarted or new leader finds them there.

mod environment;
pub mod step;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flotilla_core::model::{ClusterState, Plan};
use flotilla_core::plan_diff::{self, markdown};
use flotilla_core::preview::Stamp;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::clusters;
use crate::clusters::connect::Pool;
use crate::clusters::credentials::Credentials;
use crate::forge::{CommitState, Forge, PullRequest, Status};
use crate::host::Host;
use crate::leader::Fence;
use crate::rendering::Renderer;
use step::{Action, Event, State};

/// Which pull requests to follow, as the command line says.
pub struct Follow {
    /// The forge and repository.
    pub forge: Forge,
    /// What the decision follows.
    pub step: step::Settings,
    /// Time between polls of the forge.
    pub poll: Duration,
}

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the decision follows.
    pub step: step::Settings,
    /// Time between polls of the forge.
    pub poll: Duration,
    /// How previews are applied.
    pub apply: crate::clusters::Applying,
}

/// What the loop works with.
pub struct Previews {
    /// Settings.
    pub settings: Settings,
    /// The forge the pull requests are on.
    pub forge: Forge,
    /// Renders revisions of the followed repository.
    pub renderer: Renderer,
    /// Member credentials.
    pub credentials: Credentials,
    /// The host cluster (member credentials may live there).
    pub host: Arc<Host>,
    /// Member clients.
    pub pool: Arc<Pool>,
    /// Writes only while leading.
    pub fence: Fence,
    /// Member health from the failover loop (its health taints), if it runs.
    pub health: Option<watch::Receiver<flotilla_core::model::ClusterState>>,
    /// Where each pull request's plan and preview are shown (`/status` `previews`).
    pub board: Arc<crate::status::Board>,
}

/// What wakes the loop.
pub struct Inputs {
    /// Pull requests from webhook deliveries.
    pub deliveries: mpsc::UnboundedReceiver<PullRequest>,
    /// The production render: which members exist.
    pub rendered: watch::Receiver<Option<Arc<Plan>>>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
}

/// The inventory instance of a pull request's preview in controller `instance`:
/// two instances following one repository never share (nor prune) a preview.
pub fn instance(instance: &str, number: u64) -> String {
    format!("{instance}-pr-{number}")
}

fn now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Previews {
    /// Runs until `stop`. Nothing is decided before this instance leads and the
    /// production render names the members; then the previews they hold are restored.
    pub async fn run(self, mut inputs: Inputs) {
        let mut state = State::default();
        // Members whose previews are still to be read (`None`: not begun).
        let mut unrestored: Option<Vec<String>> = None;
        let mut poll = tokio::time::interval(self.settings.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                _ = inputs.stop.changed() => return,
                Some(pull) = inputs.deliveries.recv() => Some(Event::Seen(pull)),
                _ = poll.tick() => None,
            };
            if !*inputs.leading.borrow() || !self.fence.holds() {
                unrestored = None;
                continue;
            }
            let Some(members) = members(&inputs.rendered) else { continue };
            let mut events = std::collections::VecDeque::new();
            // One unreachable member holds no pull request's plan: the others' previews
            // are restored now, its own at a later poll.
            let pending = unrestored.get_or_insert(members.clone());
            if !pending.is_empty() {
                let (found, missed) = self.restore(pending).await;
                info!(previews = found.len(), unreachable = missed.len(), "previews found in the members");
                events.push_back(Event::Restored(found));
                *pending = missed;
            }
            match event {
                Some(event) => events.push_back(event),
                None => match self.forge.open_pulls().await {
                    Ok(open) => {
                        let numbers: Vec<u64> = open.iter().map(|p| p.number).collect();
                        self.board.update(|s| s.previews.retain(|n, _| numbers.contains(n)));
                        events.extend([Event::Listed(open), Event::Tick(now())])
                    }
                    Err(e) => {
                        warn!(error = %e, "cannot list the open pull requests");
                        events.push_back(Event::Tick(now()));
                    }
                },
            }
            while let Some(event) = events.pop_front() {
                for action in step::step(&mut state, &self.settings.step, event) {
                    events.push_back(self.act(action, &members).await);
                }
            }
        }
    }

    async fn act(&self, action: Action, members: &[String]) -> Event {
        match action {
            Action::Plan { pull, preview } => self.plan(&pull, preview).await,
            Action::Teardown { number, why } => {
                info!(pull = number, why, "removing the preview");
                match self.teardown(number, members).await {
                    Ok(()) => {
                        self.board.update(|s| {
                            s.previews.entry(number).and_modify(|p| p.expires = None);
                        });
                        Event::TornDown { number }
                    }
                    Err(e) => {
                        warn!(pull = number, error = format!("{e:#}"), "preview not removed; trying again");
                        Event::Failed { number }
                    }
                }
            }
        }
    }

    /// Renders the head and the base it branched from, applies the preview when asked,
    /// then posts the comment and the statuses.
    async fn plan(&self, pull: &PullRequest, preview: bool) -> Event {
        let (number, head) = (pull.number, pull.head.clone());
        let clock = std::time::Instant::now();
        let failed = |e: anyhow::Error| {
            warn!(pull = number, error = format!("{e:#}"), "plan not posted; trying again at the next poll");
            Event::Failed { number }
        };
        let pending = status("flotilla/plan", CommitState::Pending, "rendering every cluster");
        if let Err(e) = self.forge.set_status(&head, &pending).await {
            return failed(e.into());
        }
        let revisions = match self.revisions(pull).await {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let fetched = clock.elapsed();
        let head_plan = match self.renderer.render(revisions.head, ClusterState::default()).await {
            Ok(plan) => plan,
            Err(e) => return self.broken(pull, &format!("{e:#}")).await.unwrap_or_else(failed),
        };
        let base_plan = match self.renderer.render(revisions.base, ClusterState::default()).await {
            Ok(plan) => plan,
            // The base must have rendered once (it is the followed branch): show
            // everything as new rather than nothing.
            Err(e) => {
                warn!(error = format!("{e:#}"), "the base of the pull request does not render");
                Plan {
                    revision: revisions.base.to_string(),
                    loaded: Default::default(),
                    clusters: Default::default(),
                    problems: Vec::new(),
                    placements: Default::default(),
                    unclaimed: Vec::new(),
                    revised: Default::default(),
                }
            }
        };
        let diff = plan_diff::diff(&base_plan, &head_plan, &[]);
        let (notes, deployed) = self.preview(pull, preview, head_plan, &revisions).await;
        let rendered = revisions.head.to_string();
        match self.post(number, &rendered, &diff, &notes, preview && deployed.is_none()).await {
            Ok(()) => {
                self.shown(pull, &rendered, |p| {
                    p.clusters = diff.clusters.iter().map(|(name, c)| (name.clone(), c.summary())).collect();
                    p.expires =
                        deployed.map(|at| crate::status::rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(at)));
                });
                let took = clock.elapsed();
                info!(pull = number, head = %rendered, clusters = diff.clusters.len(), ?fetched, ?took, "plan posted");
                // The head rendered: if the forge's ref lagged behind the announced
                // head, the next poll sees the difference and plans again.
                Event::Planned { number, head: rendered, preview: deployed }
            }
            // The same comment would be refused again (too long, invalid, forbidden):
            // not sent again until the pull request changes.
            Err(e) if e.refused() => {
                error!(pull = number, error = %e, "the forge refused the plan; not sent again until the pull request changes");
                Event::Planned { number, head: rendered, preview: deployed }
            }
            Err(e) => failed(e.into()),
        }
    }

    /// Applies the preview when asked: the comment's paragraph about it, and its expiry
    /// when every member took it.
    async fn preview(
        &self,
        pull: &PullRequest,
        wanted: bool,
        plan: Plan,
        at: &Revisions,
    ) -> (Vec<String>, Option<u64>) {
        if !wanted {
            let max = self.settings.step.max_previews;
            let waiting = pull.labels.contains(&self.settings.step.label);
            let note = format!("**Preview** waiting: {max} previews already run (`--max-previews`).");
            return (waiting.then_some(note).into_iter().collect(), None);
        }
        let expires = now() + self.settings.step.ttl;
        let stamp = Stamp { number: pull.number, head: at.head.to_string(), expires };
        let (note, ok) = self.deploy(plan, &stamp).await;
        (vec![note], ok.then_some(expires))
    }

    /// Posts (or updates) the comment and sets the statuses on the rendered head (the
    /// statuses at once: they are independent).
    async fn post(
        &self,
        number: u64,
        head: &str,
        diff: &plan_diff::PlanDiff,
        notes: &[String],
        preview_failed: bool,
    ) -> Result<(), crate::forge::ApiError> {
        let comment = markdown::Comment { notes, ..Default::default() };
        self.forge.upsert_comment(number, markdown::MARKER, &markdown::markdown(diff, &comment)).await?;
        let statuses = statuses(diff, preview_failed);
        futures::future::try_join_all(statuses.iter().map(|status| self.forge.set_status(head, status))).await?;
        Ok(())
    }

    /// A head that does not load: a failing status naming file and line, the error in
    /// the comment, and nothing applied.
    async fn broken(&self, pull: &PullRequest, error: &str) -> anyhow::Result<Event> {
        warn!(pull = pull.number, error, "the pull request's head does not render");
        let body = markdown::broken(&pull.head, error, markdown::BUDGET);
        match self.forge.upsert_comment(pull.number, markdown::MARKER, &body).await {
            Err(e) if e.refused() => {
                error!(pull = pull.number, error = %e, "the forge refused the comment; not sent again until the pull request changes")
            }
            other => other?,
        }
        let status = status("flotilla/plan", CommitState::Failure, error);
        self.forge.set_status(&pull.head, &status).await?;
        self.shown(pull, &pull.head, |p| p.error = Some(error.to_owned()));
        Ok(Event::Planned { number: pull.number, head: pull.head.clone(), preview: None })
    }

    /// Shows pull request `pull`'s plan of `head` in `/status` (and on the fleet page):
    /// `change` fills in what the plan found. A title and link the forge gave once are
    /// kept when a later event (a preview granted from the queue) comes without them.
    fn shown(&self, pull: &PullRequest, head: &str, change: impl FnOnce(&mut crate::status::PreviewStatus)) {
        self.board.update(|s| {
            let old = s.previews.remove(&pull.number).unwrap_or_default();
            let mut shown = crate::status::PreviewStatus {
                title: if pull.title.is_empty() { old.title } else { pull.title.clone() },
                link: pull.link.clone().or(old.link),
                head: head.to_owned(),
                planned: crate::status::rfc3339(SystemTime::now()),
                ..Default::default()
            };
            change(&mut shown);
            s.previews.insert(pull.number, shown);
        });
    }

    /// Fetches the pull request's head and the followed branch, and where they met. A
    /// forge may announce a push before its pull-request ref has moved: the ref is
    /// fetched again (for up to 10 s) until it names the announced head.
    async fn revisions(&self, pull: &PullRequest) -> anyhow::Result<Revisions> {
        let head_ref = self.forge.head_ref(pull.number);
        for attempt in 0.. {
            let head_ref = head_ref.clone();
            let found = self
                .renderer
                .git
                .run(move |branch| -> anyhow::Result<Revisions> {
                    let head = branch.fetch_ref(&head_ref)?;
                    let main = branch.fetch()?;
                    Ok(Revisions { head, base: branch.merge_base(head, main)? })
                })
                .await??;
            if found.head.to_string() == pull.head || attempt == 20 {
                return Ok(found);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        unreachable!("the loop returns")
    }
}

/// The two revisions a pull request's plan compares.
struct Revisions {
    head: crate::git::Revision,
    base: crate::git::Revision,
}

/// The Push members of the production render (previews are applied from here only).
fn members(rendered: &watch::Receiver<Option<Arc<Plan>>>) -> Option<Vec<String>> {
    rendered.borrow().as_ref().map(|plan| clusters::by_sync_mode(plan).0)
}

fn status(context: &str, state: CommitState, description: &str) -> Status {
    Status { context: context.to_owned(), state, description: description.to_owned() }
}

/// One status per cluster that changes, and the summary (failing when a preview asked
/// for could not be applied).
fn statuses(diff: &plan_diff::PlanDiff, preview_failed: bool) -> Vec<Status> {
    let mut all: Vec<Status> = diff
        .clusters
        .iter()
        .map(|(name, c)| status(&format!("flotilla/{name}"), CommitState::Success, &c.summary()))
        .collect();
    let summary = match (preview_failed, diff.clusters.len()) {
        (true, _) => status("flotilla/plan", CommitState::Failure, "the preview could not be applied"),
        (false, 0) => status("flotilla/plan", CommitState::Success, "no cluster changes"),
        (false, n) => status("flotilla/plan", CommitState::Success, &format!("{n} clusters change")),
    };
    all.push(summary);
    all
}

/// Names for a comment, each as code (they come from the repository).
fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "no cluster".into();
    }
    let code = |i: &String| flotilla_core::escape::code(i, flotilla_core::escape::Place::Flow);
    items.iter().map(code).collect::<Vec<_>>().join(", ")
}
