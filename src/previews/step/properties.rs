//! The preview decision over random histories: what the forge says (webhooks, polls),
//! whether each of the executor's actions succeeds, and the clock. As in the loop, the
//! actions an event leads to are carried out (and their results decided on) before the
//! next event from the forge.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// One thing that happens.
#[derive(Debug, Clone)]
enum Random {
    /// A webhook about pull request `n` (1..=4): its head (1..=3), labelled or not,
    /// open or not, a draft or not.
    Seen { n: u64, head: u8, labelled: bool, open: bool, draft: bool },
    /// A poll listing these pull requests (numbers and heads; the labels as last seen).
    Listed(Vec<(u64, u8)>),
    /// Whether the executor's next actions succeed.
    Outcomes(Vec<bool>),
    /// Time passes (seconds).
    Wait(u64),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let step = prop_oneof![
        5 => (1u64..=4, 1u8..=3, any::<bool>(), proptest::bool::weighted(0.85), proptest::bool::weighted(0.1))
            .prop_map(|(n, head, labelled, open, draft)| Random::Seen { n, head, labelled, open, draft }),
        2 => proptest::collection::vec((1u64..=4, 1u8..=3), 0..4).prop_map(Random::Listed),
        2 => proptest::collection::vec(proptest::bool::weighted(0.7), 1..6).prop_map(Random::Outcomes),
        2 => (0u64..2_000).prop_map(Random::Wait),
    ];
    proptest::collection::vec(step, 1..120)
}

fn pull(n: u64, head: u8, labels: &BTreeSet<String>, open: bool, draft: bool) -> PullRequest {
    PullRequest {
        number: n,
        head: format!("h{head}"),
        base: "main".into(),
        labels: labels.clone(),
        draft,
        open,
        title: String::new(),
        link: None,
    }
}

/// The forge and the executor, as the history says they behave.
struct Harness {
    settings: Settings,
    now: u64,
    outcomes: Vec<bool>,
    next_outcome: usize,
    /// What the forge shows: number → (head, labels, open, draft).
    forge: BTreeMap<u64, (u8, BTreeSet<String>, bool, bool)>,
}

impl Harness {
    fn new() -> Self {
        let settings =
            Settings { base: "main".into(), label: "preview".into(), drafts: false, ttl: 600, max_previews: 2 };
        Harness { settings, now: 1_000, outcomes: vec![true], next_outcome: 0, forge: BTreeMap::new() }
    }

    /// The event a step of the history is, if any.
    fn event(&mut self, step: Random) -> Option<Event> {
        match step {
            Random::Seen { n, head, labelled, open, draft } => {
                let labels: BTreeSet<String> = labelled.then(|| "preview".to_owned()).into_iter().collect();
                self.forge.insert(n, (head, labels.clone(), open, draft));
                Some(Event::Seen(pull(n, head, &labels, open, draft)))
            }
            Random::Listed(listed) => Some(self.listed(listed)),
            Random::Outcomes(next) => {
                (self.outcomes, self.next_outcome) = (next, 0);
                None
            }
            Random::Wait(s) => {
                self.now += s;
                Some(Event::Tick(self.now))
            }
        }
    }

    /// A poll: the listed pull requests are open (at these heads), the others closed.
    fn listed(&mut self, listed: Vec<(u64, u8)>) -> Event {
        let mut open = Vec::new();
        for (n, head) in listed {
            let known = self.forge.get(&n).cloned().unwrap_or((head, BTreeSet::new(), true, false));
            if known.2 {
                self.forge.insert(n, (head, known.1.clone(), true, known.3));
                open.push(pull(n, head, &known.1, true, known.3));
            }
        }
        for (n, seen) in self.forge.iter_mut() {
            seen.2 &= open.iter().any(|p| p.number == *n);
        }
        Event::Listed(open)
    }

    /// The executor carries out `action`: its result, checked against the rules.
    fn carry_out(&mut self, action: Action) -> Result<Event, TestCaseError> {
        let ok = self.outcomes[self.next_outcome % self.outcomes.len()];
        self.next_outcome += 1;
        Ok(match action {
            Action::Plan { pull, preview } => {
                prop_assert!(pull.open && !pull.draft && pull.base == "main", "planned {pull:?}");
                prop_assert!(!preview || pull.labels.contains("preview"), "a preview without the label: {pull:?}");
                match ok {
                    true => Event::Planned {
                        number: pull.number,
                        head: pull.head,
                        preview: preview.then_some(self.now + self.settings.ttl),
                    },
                    false => Event::Failed { number: pull.number },
                }
            }
            Action::Teardown { number, .. } if ok => Event::TornDown { number },
            Action::Teardown { number, .. } => Event::Failed { number },
        })
    }

    /// The pull requests the forge shows open (and not drafts).
    fn open(&self) -> Vec<PullRequest> {
        self.forge.iter().filter(|(_, f)| f.2 && !f.3).map(|(n, f)| pull(*n, f.0, &f.1, true, false)).collect()
    }
}

/// The pull requests `event` closes (or turns into drafts) that run a preview.
fn closing_previews(state: &State, event: &Event) -> Vec<u64> {
    let closing: Vec<u64> = match event {
        Event::Seen(p) if !p.open || p.draft => vec![p.number],
        Event::Listed(open) => state.pulls.keys().filter(|n| !open.iter().any(|p| p.number == **n)).copied().collect(),
        _ => Vec::new(),
    };
    closing.into_iter().filter(|n| state.pulls.get(n).is_some_and(|p| p.preview.is_some() || p.with_preview)).collect()
}

/// Steps `event` and everything its actions lead to, checking the rules at each step.
fn settle(state: &mut State, harness: &mut Harness, event: Event) -> Result<(), TestCaseError> {
    let mut events: std::collections::VecDeque<Event> = [event].into();
    while let Some(event) = events.pop_front() {
        let previewing = closing_previews(state, &event);
        let actions = step(state, &harness.settings, event);
        for n in previewing {
            let torn_down = actions.iter().any(|a| matches!(a, Action::Teardown { number, .. } if *number == n));
            prop_assert!(torn_down, "pull request {n} closed with its preview left running");
        }
        prop_assert!(running(state) <= harness.settings.max_previews, "{} previews run", running(state));
        for action in actions {
            events.push_back(harness.carry_out(action)?);
        }
    }
    Ok(())
}

proptest! {
    /// Never more previews than `--max-previews` running or being applied; a plan only
    /// for an open, non-draft pull request into the followed branch, with a preview only
    /// when it carries the label; a preview that is running or being applied is torn
    /// down in the step that finds its pull request closed; and every pull request that
    /// stays open gets a plan of the head it was last seen at.
    #[test]
    fn previews_keep_their_bounds_over_random_histories(history in history()) {
        let (mut state, mut harness) = (State::default(), Harness::new());
        for step_ in history {
            if let Some(event) = harness.event(step_) {
                settle(&mut state, &mut harness, event)?;
            }
        }
        // Every action succeeds from now on, and a poll lists what is open: each open
        // pull request has a plan of its head.
        harness.outcomes = vec![true];
        let open = harness.open();
        settle(&mut state, &mut harness, Event::Listed(open.clone()))?;
        for p in &open {
            let head = state.pulls.get(&p.number).and_then(|s| s.planned.clone());
            prop_assert_eq!(head.as_deref(), Some(p.head.as_str()), "pull request {} without a plan of its head", p.number);
        }
    }
}
