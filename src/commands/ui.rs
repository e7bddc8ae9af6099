//! `flotilla ui`: the fleet page for a repository and its members, on a laptop. Every
//! `--refresh` the repository is rendered again and the members read (as `status`
//! reads them); a changed fleet reaches every open page within that period.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;
use tracing::{info, warn};

use super::{Outcome, plan_in_state, runtime, scope};
use crate::cli::UiArgs;
use crate::clusters;
use crate::ui::{Snapshot, Ui, model};

pub fn ui(args: UiArgs) -> anyhow::Result<Outcome> {
    let token = crate::ui::token(args.ui_token_file.as_deref(), &args.listen.to_string(), false)?;
    let first = snapshot(&args)?;
    let (publish, snapshots) = watch::channel(Arc::new(first));
    let runtime = runtime()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        info!(address = %listener.local_addr()?, "serving the fleet page at /ui/");
        let app = Ui::new(snapshots, crate::ui::auth::Auth::new(token, None)).comparing(live(&args)?).router();
        tokio::spawn(crate::server::serve(listener, app, crate::server::Limits::default()));
        refresh(args, publish).await
    })?;
    Ok(Outcome::Clean)
}

/// The workload page's comparison with the members of `--kubeconfig`, as `diff --live`
/// compares (read-only).
fn live(args: &UiArgs) -> anyhow::Result<crate::ui::live::Live> {
    let access = clusters::connect::Access {
        credentials: clusters::credentials::Credentials::File(args.kubeconfig.clone()),
        host: Arc::new(crate::host::Host::new(None)),
        pool: Arc::default(),
        trust: clusters::connect::Trust::default(),
        request_timeout: args.request_timeout,
    };
    let applying = clusters::Applying {
        trust: clusters::connect::Trust::default(),
        concurrency: 8,
        request_timeout: args.request_timeout,
        cluster_timeout: args.request_timeout * 3,
        source: Default::default(),
        acting_as: None,
        instance: args.instance.clone(),
    };
    Ok(crate::ui::live::Live { access, applying, scope: scope(&args.source)?.map(Arc::new) })
}

/// Renders and reads the fleet every period; publishes it when it changed.
async fn refresh(args: UiArgs, publish: watch::Sender<Arc<Snapshot>>) -> anyhow::Result<()> {
    let args = Arc::new(args);
    loop {
        tokio::time::sleep(args.refresh).await;
        let next = {
            let args = args.clone();
            tokio::task::spawn_blocking(move || snapshot(&args)).await?
        };
        match next {
            Ok(next) => {
                publish.send_if_modified(|held| {
                    let changed = held.fleet != next.fleet || held.fleet.revision != next.fleet.revision;
                    if changed {
                        *held = Arc::new(next);
                    }
                    changed
                });
            }
            // The page keeps the last fleet it could build; a broken commit is logged.
            Err(e) => {
                warn!(error = %super::describe(&e), "cannot render the repository; the page shows the last good one")
            }
        }
    }
}

/// One snapshot: the plan, and what the members report about it.
fn snapshot(args: &UiArgs) -> anyhow::Result<Snapshot> {
    let mut state = None;
    let plan = plan_in_state(&args.source, scope(&args.source)?.as_ref(), |s| {
        state = Some(s.clone());
        Ok(s)
    })?;
    let kubeconfig = clusters::connect::read(&args.kubeconfig)?;
    let names: Vec<String> = plan.loaded.clusters.iter().map(|c| c.name.clone()).collect();
    let plan_ref = &plan;
    let results = tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(clusters::each(
        &kubeconfig,
        &names,
        clusters::connect::Trust::default(),
        args.request_timeout,
        |client, name| async move { clusters::status::observe_cluster(&client, plan_ref, name).await },
    ));
    let (mut observed, mut errors) = (Vec::new(), BTreeMap::new());
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(o) => observed.push((name, o)),
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    let objects = clusters::status::objects(&plan, &observed);
    let fleet = model::fleet(&plan, &objects, &errors);
    Ok(Snapshot { fleet, plan: Some(Arc::new(plan)), state: state.unwrap_or_default(), status: None })
}
