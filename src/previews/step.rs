//! The preview loop's decision, pure: which pull requests get a plan, which get a
//! preview environment, and which previews go. Events are what the forge says (a webhook
//! delivery, a poll of every open pull request), what the executor finished, previews
//! found in the members at start, and the clock.

use std::collections::BTreeMap;

use crate::forge::PullRequest;

/// What the loop follows.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Only pull requests into this branch (the followed one).
    pub base: String,
    /// The label that asks for a preview environment.
    pub label: String,
    /// Draft pull requests get plans too.
    pub drafts: bool,
    /// A preview without a push for this long is removed (seconds).
    pub ttl: u64,
    /// Previews running at once.
    pub max_previews: usize,
}

/// A preview environment in the members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// When it is removed unless a push renews it (Unix seconds).
    pub expires: u64,
}

/// One followed pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pull {
    /// Its head, as last seen.
    head: String,
    /// The head whose plan was posted (or is being worked on).
    planned: Option<String>,
    /// Whether its plan was posted with the preview (or is being applied).
    with_preview: bool,
    /// Its preview, when one runs.
    preview: Option<Running>,
    /// It carries the label but waits for a free slot (`--max-previews`).
    waiting: bool,
}

/// Everything the loop knows.
#[derive(Debug, Clone, Default)]
pub struct State {
    pulls: BTreeMap<u64, Pull>,
}

/// A preview found in the members (from its labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The pull request.
    pub number: u64,
    /// The head it runs.
    pub head: String,
    /// Its expiry (Unix seconds).
    pub expires: u64,
}

/// Something happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// A webhook delivery about one pull request.
    Seen(PullRequest),
    /// A poll: every open pull request of the repository.
    Listed(Vec<PullRequest>),
    /// Previews found in the members at start.
    Restored(Vec<Found>),
    /// The executor posted the plan of `head`, and applied its preview (with this
    /// expiry) when it was asked to and could.
    Planned { number: u64, head: String, preview: Option<u64> },
    /// The executor could not finish (the forge or a member did not answer): try again
    /// at the next poll.
    Failed { number: u64 },
    /// A preview is gone from every member.
    TornDown { number: u64 },
    /// The clock (Unix seconds).
    Tick(u64),
}

/// What the executor must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Render the head, post or update the comment, set the statuses; with `preview`,
    /// apply the preview environment first.
    Plan { pull: PullRequest, preview: bool },
    /// Remove a preview from every member.
    Teardown { number: u64, why: &'static str },
}

/// Decides what follows `event`.
pub fn step(state: &mut State, settings: &Settings, event: Event) -> Vec<Action> {
    let mut actions = Vec::new();
    match event {
        Event::Seen(pull) => seen(state, settings, pull, &mut actions),
        Event::Listed(open) => {
            let numbers: Vec<u64> = open.iter().map(|p| p.number).collect();
            let gone: Vec<u64> = state.pulls.keys().filter(|n| !numbers.contains(n)).copied().collect();
            for number in gone {
                forget(state, number, "the pull request is closed", &mut actions);
            }
            for pull in open {
                seen(state, settings, pull, &mut actions);
            }
        }
        Event::Restored(found) => {
            // Its plan was posted when it was applied: a restart neither re-posts it nor
            // renews the expiry; a push does. A member restored late (it was unreachable
            // at start) adds what it holds, and never overrides what is known since.
            for Found { number, head, expires } in found {
                if state.pulls.get(&number).is_some_and(|p| p.planned.is_some()) {
                    continue;
                }
                let pull = state.pulls.entry(number).or_default();
                pull.planned = Some(head.clone());
                pull.head = head;
                pull.with_preview = true;
                pull.preview = Some(Running { expires });
            }
        }
        Event::Planned { number, head, preview } => {
            if let Some(pull) = state.pulls.get_mut(&number) {
                if let Some(expires) = preview {
                    pull.preview = Some(Running { expires });
                }
                pull.planned = Some(head);
            }
        }
        Event::Failed { number } => {
            if let Some(pull) = state.pulls.get_mut(&number) {
                pull.planned = None;
            }
        }
        Event::TornDown { number } => {
            if let Some(pull) = state.pulls.get_mut(&number) {
                pull.preview = None;
            }
            start_waiting(state, settings, &mut actions);
        }
        Event::Tick(now) => expire(state, now, &mut actions),
    }
    actions
}

/// Removes the previews whose expiry has come.
fn expire(state: &mut State, now: u64, actions: &mut Vec<Action>) {
    for (number, pull) in &mut state.pulls {
        if pull.preview.as_ref().is_some_and(|r| r.expires <= now) {
            pull.with_preview = false;
            pull.waiting = false;
            actions.push(Action::Teardown { number: *number, why: "its time to live expired without a push" });
        }
    }
}

/// A pull request as the forge shows it now.
fn seen(state: &mut State, settings: &Settings, pull: PullRequest, actions: &mut Vec<Action>) {
    if !pull.open {
        forget(state, pull.number, "the pull request is closed", actions);
        return;
    }
    if pull.base != settings.base || (pull.draft && !settings.drafts) {
        forget(state, pull.number, "the pull request no longer targets the followed branch", actions);
        return;
    }
    let labelled = pull.labels.contains(&settings.label);
    let running = running(state);
    let tracked = state.pulls.entry(pull.number).or_default();
    tracked.head = pull.head.clone();
    let new_head = tracked.planned.as_deref() != Some(pull.head.as_str());
    if !labelled && (tracked.preview.is_some() || tracked.with_preview) {
        tracked.with_preview = false;
        tracked.waiting = false;
        actions.push(Action::Teardown { number: pull.number, why: "the preview label was removed" });
    }
    if !labelled {
        tracked.waiting = false;
    }
    let has_slot = tracked.preview.is_some() || tracked.with_preview || running < settings.max_previews;
    let preview = labelled && has_slot;
    let newly_labelled = preview && !tracked.with_preview;
    if new_head || newly_labelled {
        tracked.planned = Some(pull.head.clone());
        tracked.with_preview = preview;
        tracked.waiting = labelled && !preview;
        actions.push(Action::Plan { pull, preview });
    }
}

/// Previews running or being applied.
fn running(state: &State) -> usize {
    state.pulls.values().filter(|p| p.preview.is_some() || p.with_preview).count()
}

/// Stops following a pull request, removing its preview.
fn forget(state: &mut State, number: u64, why: &'static str, actions: &mut Vec<Action>) {
    if let Some(pull) = state.pulls.remove(&number)
        && (pull.preview.is_some() || pull.with_preview)
    {
        actions.push(Action::Teardown { number, why });
    }
}

/// Gives freed slots to labelled pull requests that waited, oldest number first.
fn start_waiting(state: &mut State, settings: &Settings, actions: &mut Vec<Action>) {
    let mut free = settings.max_previews.saturating_sub(running(state));
    for (number, pull) in state.pulls.iter_mut().filter(|(_, p)| p.waiting) {
        if free == 0 {
            break;
        }
        free -= 1;
        pull.waiting = false;
        pull.with_preview = true;
        let head = pull.head.clone();
        pull.planned = Some(head.clone());
        let request = PullRequest {
            number: *number,
            head,
            base: settings.base.clone(),
            labels: [settings.label.clone()].into(),
            draft: false,
            open: true,
            title: String::new(),
            link: None,
        };
        actions.push(Action::Plan { pull: request, preview: true });
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings { base: "main".into(), label: "preview".into(), drafts: false, ttl: 3600, max_previews: 1 }
    }

    fn pull(number: u64, head: &str, labels: &[&str]) -> PullRequest {
        PullRequest {
            number,
            head: head.into(),
            base: "main".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            draft: false,
            open: true,
            title: String::new(),
            link: None,
        }
    }

    fn plan(p: &PullRequest, preview: bool) -> Action {
        Action::Plan { pull: p.clone(), preview }
    }

    #[test]
    fn each_new_head_is_planned_once() {
        let (mut s, cfg) = (State::default(), settings());
        let first = pull(1, "a", &[]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(first.clone())), [plan(&first, false)]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(first.clone())), [], "the same head again");
        assert_eq!(step(&mut s, &cfg, Event::Listed(vec![first.clone()])), [], "a poll changes nothing");
        let second = pull(1, "b", &[]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(second.clone())), [plan(&second, false)]);
        // A failed attempt is retried on the next poll.
        step(&mut s, &cfg, Event::Failed { number: 1 });
        assert_eq!(step(&mut s, &cfg, Event::Listed(vec![second.clone()])), [plan(&second, false)]);
    }

    #[test]
    fn other_branches_and_drafts_are_left_alone() {
        let (mut s, cfg) = (State::default(), settings());
        let mut other = pull(1, "a", &[]);
        other.base = "release".into();
        assert_eq!(step(&mut s, &cfg, Event::Seen(other)), []);
        let mut draft = pull(2, "a", &[]);
        draft.draft = true;
        assert_eq!(step(&mut s, &cfg, Event::Seen(draft.clone())), []);
        let cfg = Settings { drafts: true, ..cfg };
        assert_eq!(step(&mut s, &cfg, Event::Seen(draft.clone())), [plan(&draft, false)]);
    }

    #[test]
    fn the_label_starts_a_preview_and_its_removal_or_closing_ends_it() {
        let (mut s, cfg) = (State::default(), settings());
        let plain = pull(1, "a", &[]);
        step(&mut s, &cfg, Event::Seen(plain));
        let labelled = pull(1, "a", &["preview"]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(labelled.clone())), [plan(&labelled, true)], "same head, new label");
        step(&mut s, &cfg, Event::Planned { number: 1, head: "a".into(), preview: Some(100) });
        let unlabelled = pull(1, "a", &[]);
        assert_eq!(
            step(&mut s, &cfg, Event::Seen(unlabelled)),
            [Action::Teardown { number: 1, why: "the preview label was removed" }]
        );
        let relabelled = pull(1, "b", &["preview"]);
        step(&mut s, &cfg, Event::Seen(relabelled));
        let mut closed = pull(1, "b", &["preview"]);
        closed.open = false;
        assert_eq!(
            step(&mut s, &cfg, Event::Seen(closed)),
            [Action::Teardown { number: 1, why: "the pull request is closed" }]
        );
        assert_eq!(step(&mut s, &cfg, Event::Listed(vec![])), [], "forgotten once closed");
    }

    #[test]
    fn a_member_restored_late_adds_its_previews_and_overrides_nothing_known_since() {
        let (mut s, cfg) = (State::default(), settings());
        let found = |number, head: &str, expires| Found { number, head: head.into(), expires };
        // member2 was unreachable at start: only member1's previews are known.
        step(&mut s, &cfg, Event::Restored(vec![found(5, "c", 900)]));
        step(&mut s, &cfg, Event::Planned { number: 5, head: "d".into(), preview: Some(1_000) });
        // member2 answers later: its older stamp of 5 changes nothing, and 6 is added.
        step(&mut s, &cfg, Event::Restored(vec![found(5, "c", 900), found(6, "e", 950)]));
        assert_eq!(
            step(&mut s, &cfg, Event::Tick(950)),
            [Action::Teardown { number: 6, why: "its time to live expired without a push" }]
        );
        step(&mut s, &cfg, Event::TornDown { number: 6 });
        assert_eq!(step(&mut s, &cfg, Event::Tick(999)), [], "5 runs d until 1,000, not c until 900");
    }

    #[test]
    fn previews_expire_and_survive_a_restart_through_what_the_members_hold() {
        let (mut s, cfg) = (State::default(), settings());
        // Found in the members at start; the poll shows 4 closed meanwhile, and 5 at
        // the head it runs: nothing to redo, and its expiry stands.
        let found = |number, head: &str, expires| Found { number, head: head.into(), expires };
        step(&mut s, &cfg, Event::Restored(vec![found(4, "x", 500), found(5, "c", 900)]));
        let open = pull(5, "c", &["preview"]);
        assert_eq!(
            step(&mut s, &cfg, Event::Listed(vec![open.clone()])),
            [Action::Teardown { number: 4, why: "the pull request is closed" }]
        );
        step(&mut s, &cfg, Event::TornDown { number: 4 });
        assert_eq!(step(&mut s, &cfg, Event::Tick(899)), []);
        assert_eq!(
            step(&mut s, &cfg, Event::Tick(900)),
            [Action::Teardown { number: 5, why: "its time to live expired without a push" }]
        );
        // A push renews it.
        let pushed = pull(5, "d", &["preview"]);
        step(&mut s, &cfg, Event::TornDown { number: 5 });
        assert_eq!(step(&mut s, &cfg, Event::Seen(pushed.clone())), [plan(&pushed, true)]);
    }

    #[test]
    fn max_previews_bounds_what_runs_and_a_freed_slot_goes_to_the_next() {
        let (mut s, cfg) = (State::default(), settings());
        let one = pull(1, "a", &["preview"]);
        let two = pull(2, "b", &["preview"]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(one.clone())), [plan(&one, true)]);
        assert_eq!(step(&mut s, &cfg, Event::Seen(two.clone())), [plan(&two, false)], "plan only: no slot");
        step(&mut s, &cfg, Event::Planned { number: 1, head: "a".into(), preview: Some(100) });
        let mut closed = one.clone();
        closed.open = false;
        step(&mut s, &cfg, Event::Seen(closed));
        assert_eq!(step(&mut s, &cfg, Event::TornDown { number: 1 }), [plan(&two, true)]);
    }
}
