//! The write-back edit: which file and document declare each target at a given
//! revision, the edited bytes, and a check that the edit changed exactly the intended
//! field. Called again on every new head when a push races another commit.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_core::load::{self, ParseCache};
use flotilla_core::model::autoscale::FederatedHpaSpec;
use flotilla_core::model::{Limits, Loaded, Named, ObjectKey, Origin, RepoFiles, Template};
use flotilla_core::sources::replicas::Location;
use flotilla_core::yaml_edit;
use serde_json::Value;

use crate::git::{Files, Git, Pushed, Revision};
use crate::leader::Fence;

/// What to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A resource template's `spec.replicas`.
    Template(ObjectKey),
    /// A FederatedHPA's bounds (`spec.minReplicas` / `spec.maxReplicas`).
    FederatedHpa {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Template(key) => write!(f, "{key}"),
            Target::FederatedHpa { namespace, name } => write!(f, "FederatedHPA {namespace}/{name}"),
        }
    }
}

/// One field to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The object.
    pub target: Target,
    /// `replicas`, `minReplicas` or `maxReplicas` (under `spec`).
    pub field: &'static str,
    /// The value.
    pub value: i64,
    /// The value the decision started from (a FederatedHPA's current replicas), if it
    /// depends on it: a head where the field holds another value is left for the next
    /// decision rather than written over.
    pub from: Option<i64>,
}

impl Edit {
    /// A template's `spec.replicas`, decided from `from` when the decision depends on it.
    pub fn replicas(key: ObjectKey, value: i64, from: Option<i64>) -> Self {
        Edit { target: Target::Template(key), field: "replicas", value, from }
    }
}

fn origin<'a>(loaded: &'a Loaded, target: &Target) -> Option<&'a Origin> {
    match target {
        Target::Template(key) => loaded.template(key).map(|t| &t.origin),
        Target::FederatedHpa { namespace, name } => loaded
            .federated_hpas
            .iter()
            .find(|h| h.namespace.as_deref() == Some(namespace) && &h.name == name)
            .map(|h| &h.origin),
    }
}

/// The field's value in a loaded revision.
fn value(loaded: &Loaded, edit: &Edit) -> Option<i64> {
    match &edit.target {
        Target::Template(key) => loaded
            .template(key)
            .and_then(|t| t.object().pointer(&format!("/spec/{}", edit.field)).and_then(Value::as_i64)),
        Target::FederatedHpa { namespace, name } => {
            let hpa =
                loaded.federated_hpas.iter().find(|h| h.namespace.as_deref() == Some(namespace) && &h.name == name)?;
            Some(i64::from(match edit.field {
                "minReplicas" => hpa.spec.min_replicas.unwrap_or(1),
                _ => hpa.spec.max_replicas,
            }))
        }
    }
}

/// Where and as whom decisions are committed.
#[derive(Clone)]
pub struct Committer {
    /// The followed branch.
    pub git: Git,
    /// Subdirectory of the repository that holds the fleet.
    pub prefix: String,
    /// Commit author (name, email).
    pub author: (String, String),
    /// The parse cache the renders use (the edited head is usually parsed already).
    pub cache: Arc<Mutex<ParseCache>>,
    /// Checked on the Git thread right before each push.
    pub fence: Fence,
}

impl Committer {
    /// Commits `edits` on the branch's head and pushes the commit. When the push is
    /// refused because the branch moved, redoes the edit on the new head, backing off
    /// between `attempts` (the Git thread is free meanwhile). `None`: nothing to write.
    pub async fn commit(&self, edits: Vec<Edit>, message: String, attempts: u32) -> Result<Option<Revision>, String> {
        let edits = Arc::new(edits);
        let mut last = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt.min(5))).await;
            }
            let (this, edits, message) = (self.clone(), edits.clone(), message.clone());
            let pushed = self
                .git
                .run(move |branch| {
                    let author = (this.author.0.as_str(), this.author.1.as_str());
                    branch.commit_and_push(author, &message, |repo, head| {
                        // Right before the commit and its push, after the fetch.
                        if !this.fence.holds() {
                            return Err("this instance no longer holds the lease; not pushing".into());
                        }
                        files(repo, head, &this.prefix, &edits, &this.cache)
                    })
                })
                .await
                .map_err(|e| e.to_string())??;
            match pushed {
                Pushed::Commit(commit) => return Ok(Some(commit)),
                Pushed::Nothing => return Ok(None),
                Pushed::Refused(why) => {
                    tracing::warn!(attempt = attempt + 1, reason = %why, "push refused; redoing the change on the new head");
                    last = why;
                }
            }
        }
        Err(format!("push refused {attempts} times; last: {last}"))
    }
}

/// The files to commit at `head` (repo-relative paths, under `prefix`), or `None` when
/// every field already has its value. A template a chart renders is written through the
/// chart's values (`super::values`), and the edited revision is rendered to prove it.
pub fn files(
    repo: &git2::Repository,
    head: Revision,
    prefix: &str,
    edits: &[Edit],
    cache: &Mutex<ParseCache>,
) -> Result<Option<Files>, String> {
    let limits = Limits::default();
    let (read, loaded) = {
        let mut cache = cache.lock().expect("parse cache lock");
        let files = crate::git::read_commit(repo, head, prefix, &limits, &cache)
            .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
        let loaded =
            crate::source::load(&files, &mut cache, &limits).map_err(|e| format!("the head does not load: {e:#}"))?;
        (files, loaded)
    };
    let tree = repo.find_commit(head).and_then(|c| c.tree()).map_err(|e| e.to_string())?;
    let full = |file: &str| {
        if prefix.trim_matches('/').is_empty() {
            file.to_owned()
        } else {
            format!("{}/{file}", prefix.trim_matches('/'))
        }
    };
    let text = |file: &str| -> Result<String, String> {
        let path = full(file);
        let blob = tree
            .get_path(Path::new(&path))
            .and_then(|e| repo.find_blob(e.id()))
            .map_err(|e| format!("reading {path}: {e}"))?;
        std::str::from_utf8(blob.content()).map(str::to_owned).map_err(|_| format!("{path} is not UTF-8"))
    };
    let (by_file, through) = place(&loaded, head, edits, text)?;
    let mut out = Vec::new();
    for (file, placed) in by_file {
        let after = edited(&file, &text(&file)?, &placed, &through)?;
        out.push((file, after.into_bytes()));
    }
    if !through.is_empty() {
        super::values::rendered(&read, &out, &through, &mut cache.lock().expect("parse cache lock"))?;
    }
    let out: Files = out.into_iter().map(|(file, bytes)| (full(&file), bytes)).collect();
    Ok((!out.is_empty()).then_some(out))
}

/// The edits to make, by file, each with where; and those made through a chart's values.
type Placed<'e> = (BTreeMap<String, Vec<(&'e Edit, Location)>>, Vec<&'e Edit>);

/// Where each edit is made at `head`. An edit whose field already holds its value, or
/// whose decision started from a count the head no longer holds, is left out.
fn place<'e>(
    loaded: &Loaded,
    head: Revision,
    edits: &'e [Edit],
    text: impl Fn(&str) -> Result<String, String> + Copy,
) -> Result<Placed<'e>, String> {
    let mut by_file: BTreeMap<String, Vec<(&Edit, Location)>> = BTreeMap::new();
    let mut through = Vec::new();
    for edit in edits {
        let now = value(loaded, edit);
        if now == Some(edit.value) {
            continue;
        }
        if edit.from.is_some_and(|from| now != Some(from)) {
            // The head moved the count under the decision (a human's edit, a rewind):
            // a decision from the new count follows its render.
            tracing::info!(target = ?edit.target, field = edit.field, decided_from = ?edit.from, head = ?now,
                "the head changed the value this decision started from; deciding again from it");
            continue;
        }
        let location = match super::values::location(loaded, edit, text)? {
            Some(location) => {
                through.push(edit);
                location
            }
            None => {
                let origin = origin(loaded, &edit.target)
                    .ok_or_else(|| format!("{:?} is not declared at {head}", edit.target))?;
                let path = vec!["spec".to_owned(), edit.field.to_owned()];
                Location { file: origin.file.to_string(), document: origin.document, path }
            }
        };
        by_file.entry(location.file.clone()).or_default().push((edit, location));
    }
    Ok((by_file, through))
}

/// `before` (the text of `file`) with the `placed` edits made and proved: plain
/// write-backs by [`verify`], those through a chart's values (in `through`) by
/// `values::verify`.
fn edited(file: &str, before: &str, placed: &[(&Edit, Location)], through: &[&Edit]) -> Result<String, String> {
    let mut after = before.to_owned();
    for (edit, at) in placed {
        let path: Vec<&str> = at.path.iter().map(String::as_str).collect();
        after = yaml_edit::set_int(&after, at.document, &path, edit.value).map_err(|e| format!("{file}: {e}"))?;
    }
    let (charted, plain): (Vec<_>, Vec<_>) = placed.iter().partition(|(edit, _)| through.contains(edit));
    if !plain.is_empty() {
        let plain: Vec<(&Edit, usize)> = plain.iter().map(|(e, at)| (*e, at.document)).collect();
        verify(file, before, &after, &plain)?;
    }
    if !charted.is_empty() {
        let others: Vec<usize> = plain.iter().map(|(_, at)| at.document).collect();
        let values: Vec<(&Location, i64)> = charted.iter().map(|(e, at)| (at, e.value)).collect();
        super::values::verify(file, before, &after, &values, &others)?;
    }
    Ok(after)
}

/// The same named objects with the same specs.
fn same<S: PartialEq>(a: &[Arc<Named<S>>], b: &[Arc<Named<S>>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| (&x.namespace, &x.name, &x.spec) == (&y.namespace, &y.name, &y.spec))
}

/// Re-parses the file before and after: the same objects, the edited fields with their
/// new values, and nothing else different.
fn verify(file: &str, before: &str, after: &str, edits: &[(&Edit, usize)]) -> Result<(), String> {
    let parse = |text: &str| {
        let files = RepoFiles { files: [(file.to_owned(), text.as_bytes().to_vec())].into(), ..Default::default() };
        load::load(&files, &Limits::default()).map_err(|e| format!("the edited {file} does not load: {e}"))
    };
    let (old, new) = (parse(before)?, parse(after)?);
    for (edit, _) in edits {
        if value(&new, edit) != Some(edit.value) {
            return Err(format!("editing {file} did not set {:?} {} (refusing to commit)", edit.target, edit.field));
        }
    }
    // Everything else must load the same: templates without the edited `replicas`,
    // autoscalers without the edited bounds, every other object as it was.
    let templates = |loaded: &Loaded| -> Vec<Value> {
        let edited = |t: &Template| edits.iter().any(|(e, _)| e.target == Target::Template(t.key.clone()));
        let strip = |t: &Arc<Template>| {
            let mut object = t.object();
            if edited(t)
                && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.remove("replicas");
            }
            object
        };
        loaded.templates.iter().map(strip).collect()
    };
    let hpas = |loaded: &Loaded| -> Vec<FederatedHpaSpec> {
        let strip = |h: &Arc<Named<FederatedHpaSpec>>| {
            let target =
                Target::FederatedHpa { namespace: h.namespace.clone().unwrap_or_default(), name: h.name.clone() };
            let mut spec = h.spec.clone();
            if edits.iter().any(|(e, _)| e.target == target) {
                (spec.min_replicas, spec.max_replicas) = (None, 0);
            }
            spec
        };
        loaded.federated_hpas.iter().map(strip).collect()
    };
    let unchanged = templates(&old) == templates(&new)
        && hpas(&old) == hpas(&new)
        && same(&old.propagation_policies, &new.propagation_policies)
        && same(&old.override_policies, &new.override_policies)
        && same(&old.cron_federated_hpas, &new.cron_federated_hpas)
        && old.clusters == new.clusters;
    if !unchanged {
        return Err(format!("editing {file} changed more than the intended fields (refusing to commit)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::git::{Branch, GitAuth};

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    const NGINX: &str = "# nginx for the seed\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx\n  namespace: default\nspec:\n  replicas: 1 # FederatedHPA-managed\n  selector: {matchLabels: {app: nginx}}\n";

    /// A human pushes while the bot is pushing: the remote's pre-receive hook makes the
    /// human's push land first, so the bot's push is refused as not a fast-forward; the
    /// bot fetches, redoes its edit on the new head, and both commits survive.
    #[tokio::test]
    async fn a_racing_human_commit_is_kept_and_the_edit_lands_on_top() {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("fleet.git");
        git(dir.path(), &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
        let human = dir.path().join("human");
        git(dir.path(), &["clone", "-q", remote.to_str().unwrap(), human.to_str().unwrap()]);
        for (k, v) in [("user.name", "Human"), ("user.email", "human@example.invalid")] {
            git(&human, &["config", k, v]);
        }
        std::fs::write(human.join("nginx.yaml"), NGINX).unwrap();
        std::fs::write(human.join("notes.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n").unwrap();
        git(&human, &["add", "-A"]);
        git(&human, &["commit", "-qm", "initial"]);
        git(&human, &["push", "-q", "origin", "HEAD:main"]);
        // The hook: on the first push only, the human pushes a commit of their own first.
        let hook = remote.join("hooks/pre-receive");
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\ncat >/dev/null\n[ -e '{marker}' ] && exit 0\ntouch '{marker}'\n\
                 env -u GIT_DIR -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES sh -c \
                 \"cd '{human}' && printf 'data: {{note: by hand}}\\n' >> notes.yaml && git commit -qam 'human edit' && git push -q origin HEAD:main\"\n",
                marker = dir.path().join("raced").display(),
                human = human.display()
            ),
        )
        .unwrap();
        Command::new("chmod").args(["+x", hook.to_str().unwrap()]).status().unwrap();

        // A real server process (libgit2's file:// transport runs no hooks).
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let exec_path = git(dir.path(), &["--exec-path"]);
        let mut daemon = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--enable=receive-pack", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", dir.path().display()))
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("git://127.0.0.1:{port}/fleet.git");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let branch = Branch::open(&url, "main", &dir.path().join("cache"), GitAuth::default()).unwrap();
        let committer = Committer {
            git: Git::spawn(branch),
            prefix: String::new(),
            author: ("bot".into(), "bot@example.invalid".into()),
            cache: Arc::default(),
            fence: Default::default(),
        };
        let key = ObjectKey {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("default".into()),
            name: "nginx".into(),
        };
        let edits = [Edit { target: Target::Template(key.clone()), field: "replicas", value: 10, from: Some(1) }];
        let commit = committer
            .commit(edits.to_vec(), "autoscale: nginx 1 → 10".into(), 4)
            .await
            .unwrap()
            .expect("a commit, after one refusal redone on the new head");
        let log = git(&human, &["fetch", "-q"]) + &git(&human, &["log", "--format=%an %s", "origin/main"]);
        assert_eq!(log, "bot autoscale: nginx 1 → 10\nHuman human edit\nHuman initial\n");
        assert_eq!(git(&human, &["rev-parse", "origin/main"]).trim(), commit.to_string());
        let shown = git(&human, &["show", "origin/main:nginx.yaml"]);
        assert_eq!(shown, NGINX.replace("replicas: 1 #", "replicas: 10 #"), "only the scalar changed");
        assert!(git(&human, &["show", "origin/main:notes.yaml"]).contains("by hand"), "the human's edit is kept");
        // Nothing to do when the value is already there: no commit.
        assert_eq!(committer.commit(edits.to_vec(), "again".into(), 2).await, Ok(None));
        // A decision made from a count the head no longer holds (here 1, while the head
        // says 10) is not written over it: the next decision starts from 10.
        let stale = [Edit { target: Target::Template(key.clone()), field: "replicas", value: 4, from: Some(1) }];
        assert_eq!(committer.commit(stale.to_vec(), "autoscale: nginx 1 → 4".into(), 2).await, Ok(None));
        let fresh = [Edit { target: Target::Template(key), field: "replicas", value: 4, from: Some(10) }];
        assert!(committer.commit(fresh.to_vec(), "autoscale: nginx 10 → 4".into(), 2).await.unwrap().is_some());
        let _ = daemon.kill();
        let _ = daemon.wait();
    }

    const CHART_DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}\nspec:\n  replicas: {{ .Values.web.replicas }}\n  selector: {matchLabels: {app: web}}\n";

    /// A chart's workload: the count goes into the values file that sets the key its
    /// HelmChart names, the edit is rendered to prove it, and a key the chart does not
    /// turn into replicas is refused.
    #[test]
    fn a_chart_workload_is_written_through_its_values_key() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        git(work, &["init", "-q", "-b", "main"]);
        let write = |path: &str, text: &str| {
            std::fs::create_dir_all(work.join(path).parent().unwrap()).unwrap();
            std::fs::write(work.join(path), text).unwrap();
        };
        write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n");
        write("charts/web/values.yaml", "web:\n  replicas: 1\n  other: 1\n");
        write("charts/web/templates/deployment.yaml", CHART_DEPLOYMENT);
        let prod = "# production\nweb:\n  replicas: 2 # the autoscaler's\n";
        write("envs/prod.yaml", prod);
        let chart = |path: &str| {
            format!(
                "apiVersion: flotilla.dev/v1alpha1\nkind: HelmChart\nmetadata: {{name: web, namespace: shop}}\nspec:\n  chart: charts/web\n  valuesFiles: [envs/prod.yaml]\n  replicaValues: [{{kind: Deployment, name: web, path: {path}}}]\n"
            )
        };
        write("fleet.yaml", &chart("web.replicas"));
        git(work, &["add", "-A"]);
        git(work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "chart"]);
        let repo = git2::Repository::open(work).unwrap();
        let head = repo.head().unwrap().peel_to_commit().unwrap().id();
        let key = ObjectKey {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let cache = Mutex::default();
        let edit = [Edit::replicas(key.clone(), 5, Some(2))];
        let out = files(&repo, head, "", &edit, &cache).unwrap().expect("an edit");
        assert_eq!(out, [("envs/prod.yaml".to_owned(), prod.replace("2 #", "5 #").into_bytes())]);
        // Already there: nothing to write.
        assert_eq!(files(&repo, head, "", &[Edit::replicas(key.clone(), 2, Some(2))], &cache), Ok(None));

        // A key no values file sets goes to spec.values, and is refused when the chart
        // does not render it as the replicas.
        write("fleet.yaml", &chart("web.other"));
        git(work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "wrong key"]);
        let head = repo.head().unwrap().peel_to_commit().unwrap().id();
        let err = files(&repo, head, "", &edit, &cache).unwrap_err();
        assert!(err.contains("does not set its replicas: with 5 written, the chart renders 2"), "{err}");
    }
}
