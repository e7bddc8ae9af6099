//! Following instead of deciding: a Pull agent's loop always, and a sharded replica's
//! while another replica leads the fleet. The stored state replaces what it knew;
//! observations, commands and time are the leader's to act on.

use super::{Action, Event, State};

impl State {
    /// A Pull agent's loop: it follows the stored state it is given and decides nothing.
    pub fn follower() -> Self {
        Self { follower: true, ..Self::default() }
    }

    /// A sharded replica's loop: see [`Self::following`].
    pub fn sharded() -> Self {
        Self { sharded: true, ..Self::default() }
    }

    /// Whether it follows the stored state now (an agent always; a sharded replica
    /// while another leads) instead of deciding.
    pub fn following(&self) -> bool {
        self.follower || (self.sharded && !self.leading)
    }

    /// A follower's event: the stored state replaces what it knew, plans are kept, and
    /// nothing else is its to decide. A held revision it cannot render yet (its Git
    /// not there yet) is asked for again at the next read.
    pub(super) fn follow(&mut self, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Leading(leading) => {
                self.leading = leading;
                self.assigned = None;
            }
            Event::Loaded(stored) => {
                self.policies = stored.map(|s| s.policies.into_iter().collect()).unwrap_or_default();
                self.loaded = true;
                self.failed.clear();
            }
            Event::Published { revision, plan, now } => self.publish(revision, plan, now, out),
            Event::Rendered { revision, plan } => {
                self.rendering.remove(&revision);
                match plan {
                    Ok(plan) => {
                        self.plans.insert(revision, plan);
                    }
                    Err(_) => {
                        self.failed.insert(revision);
                    }
                }
            }
            Event::Observed { .. } | Event::Gates { .. } | Event::Command { .. } | Event::Tick(_) => {}
        }
    }
}
