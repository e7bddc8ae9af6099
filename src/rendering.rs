//! Rendering a revision of the followed repository: read on the Git thread (blobs the
//! parse cache holds are not read again), then parsed and planned on a blocking thread,
//! within the instance's scope. The reconcile loop renders the branch's heads with it,
//! the preview loop pull requests' heads and bases.

use std::sync::{Arc, Mutex};

use flotilla_core::load::ParseCache;
use flotilla_core::model::{ClusterState, Limits, Plan};
use flotilla_core::project::Project;

use crate::git::{Git, Revision};

/// What every render of one repository shares.
#[derive(Clone)]
pub struct Renderer {
    /// The followed branch.
    pub git: Git,
    /// Subdirectory of the repository that holds the fleet.
    pub path: String,
    /// Parsed files by blob id, shared between revisions.
    pub cache: Arc<Mutex<ParseCache>>,
    /// What the instance may touch; `None`: everything.
    pub scope: Option<Arc<Project>>,
    /// What the repository may declare.
    pub admission: flotilla_core::load::Admission,
}

impl Renderer {
    /// Renders `revision` with `state`.
    pub async fn render(&self, revision: Revision, state: ClusterState) -> anyhow::Result<Plan> {
        let (cache, prefix) = (self.cache.clone(), self.path.clone());
        let files = self
            .git
            .run(move |branch| {
                let cache = cache.lock().expect("parse cache lock");
                branch.read(revision, &prefix, &Limits::default(), &cache)
            })
            .await??;
        let (cache, scope, admission) = (self.cache.clone(), self.scope.clone(), self.admission);
        tokio::task::spawn_blocking(move || -> anyhow::Result<Plan> {
            let limits = Limits::default();
            let mut cache = cache.lock().expect("parse cache lock");
            let loaded = crate::source::load(&files, &mut cache, &limits)?;
            admission.check(&loaded)?;
            let plan = flotilla_core::plan_loaded(loaded, files.revision, &state);
            Ok(match scope {
                Some(project) => flotilla_core::project::restrict(plan, &project),
                None => plan,
            })
        })
        .await?
    }
}
