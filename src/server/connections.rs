//! The open connections of one listener, so that a new connection can always get in
//! while an open one is idle. A connection is idle while no request is being served on
//! it: its first request head still arriving (a slowloris client sends it byte by byte),
//! or a keep-alive wait between requests. At the cap, the oldest idle connection is
//! closed for the new one; only when every open connection is serving a request is the
//! new one refused. A client holding sockets open therefore costs each later client at
//! most one accept, never an answer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::task::AbortHandle;

type Conns = BTreeMap<u64, (Arc<AtomicUsize>, Option<AbortHandle>)>;

/// The open connections of a listener, at most `cap`.
pub struct Open {
    cap: usize,
    next: std::sync::atomic::AtomicU64,
    /// By age (ids grow): requests being served on each, and how to close it.
    conns: Arc<Mutex<Conns>>,
}

impl Open {
    /// No connections yet.
    pub fn new(cap: usize) -> Self {
        Self { cap: cap.max(1), next: Default::default(), conns: Arc::default() }
    }

    /// Room for a new connection: closes the oldest idle one when at the cap; `None`
    /// when every open connection is serving a request.
    pub fn admit(&self) -> Option<Admitted> {
        let mut conns = self.conns.lock().expect("connections lock");
        if conns.len() >= self.cap {
            let idle = conns.iter().find(|(_, (serving, _))| serving.load(Ordering::SeqCst) == 0);
            let oldest = idle.map(|(id, _)| *id)?;
            if let Some((_, Some(task))) = conns.remove(&oldest) {
                task.abort();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let serving = Arc::new(AtomicUsize::new(0));
        conns.insert(id, (serving.clone(), None));
        Some(Admitted { id, serving, conns: Arc::downgrade(&self.conns) })
    }

    /// How to close connection `id`, once its task runs. One that is gone already (it
    /// ended, or was closed for a newer one) is closed again, harmlessly.
    pub fn record(&self, id: u64, task: AbortHandle) {
        match self.conns.lock().expect("connections lock").get_mut(&id) {
            Some(entry) => entry.1 = Some(task),
            None => task.abort(),
        }
    }

    /// Connections open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.conns.lock().expect("connections lock").len()
    }
}

/// One admitted connection, held by its task: it leaves the set when the task ends or
/// is closed.
pub struct Admitted {
    id: u64,
    serving: Arc<AtomicUsize>,
    conns: Weak<Mutex<Conns>>,
}

impl Admitted {
    /// Its id, for [`Open::record`].
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Marks requests on this connection as being served.
    pub fn busy(&self) -> Busy {
        Busy(self.serving.clone())
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(conns) = self.conns.upgrade() {
            conns.lock().expect("connections lock").remove(&self.id);
        }
    }
}

/// Counts the requests being served on a connection.
#[derive(Clone)]
pub struct Busy(Arc<AtomicUsize>);

impl Busy {
    /// A request is being served until the guard drops.
    pub fn serving(&self) -> Serving {
        self.0.fetch_add(1, Ordering::SeqCst);
        Serving(self.0.clone())
    }
}

/// A request in progress.
pub struct Serving(Arc<AtomicUsize>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_are_never_cut() {
        let open = Open::new(3);
        let held: Vec<Admitted> = (0..3).map(|_| open.admit().unwrap()).collect();
        let tasks: Vec<_> = held
            .into_iter()
            .map(|admitted| {
                let id = admitted.id();
                let task = tokio::spawn(async move {
                    let _admitted = admitted;
                    std::future::pending::<()>().await;
                });
                open.record(id, task.abort_handle());
                task
            })
            .collect();
        // The first is serving a request; the second is the oldest idle one.
        let first_busy = {
            let conns = open.conns.lock().unwrap();
            Busy(conns[&0].0.clone())
        };
        let serving = first_busy.serving();
        let fourth = open.admit().expect("room made");
        assert_eq!(open.len(), 3);
        tokio::task::yield_now().await;
        let mut tasks = tasks.into_iter();
        let (first, second, third) = (tasks.next().unwrap(), tasks.next().unwrap(), tasks.next().unwrap());
        assert!(!first.is_finished(), "a connection serving a request is never cut");
        assert!(second.await.unwrap_err().is_cancelled(), "the oldest idle one was closed");
        assert!(!third.is_finished());

        // Every open connection serving: a new one is refused.
        let _third_serving = Busy(open.conns.lock().unwrap()[&2].0.clone()).serving();
        let _fourth_serving = fourth.busy().serving();
        assert!(open.admit().is_none());
        drop(serving);
        let _fifth = open.admit().expect("the first went idle: it makes room");
        assert!(first.await.unwrap_err().is_cancelled());
        drop(fourth);
        assert_eq!(open.len(), 2, "a connection that ends leaves the set");
    }
}
