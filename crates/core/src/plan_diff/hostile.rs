//! A plan comment built from hostile names, rendered as a forge renders it (CommonMark
//! with tables): what the reader sees must list every changed object, and nothing the
//! repository wrote may become structure, a link, an image, a mention or a comment.

use pulldown_cmark::{Options, Parser, html};

use super::markdown::{self, Comment};
use super::{Changed, ClusterDiff, Entry, FieldChange, PlanDiff};
use crate::model::{ObjectKey, Origin, Problem, ProblemReason};

/// A ClusterRole whose name ends the table row, forges "no changes", pings a user and
/// opens an HTML comment that would hide what follows.
const FORGER: &str = "view-extra\n\n**No changes in any cluster.** cc @octocat\n\n<!--";
/// What it would hide.
const HIDDEN: &str = "sneaky-admin";
/// A file path with a mention, an image, a link and a comment opener.
const PATH: &str = "@acme/security-team <img src=x onerror=alert(1)> [approve](http://evil.example) <!--.yaml";

fn rbac(kind: &str, name: &str) -> Entry {
    Entry::from(&ObjectKey::new("rbac.authorization.k8s.io/v1", kind, None, name))
}

fn hostile() -> PlanDiff {
    let mut diff = PlanDiff { from: "a".repeat(40), to: "b".repeat(40), ..Default::default() };
    let added = vec![rbac("ClusterRole", FORGER), rbac("ClusterRoleBinding", HIDDEN)];
    diff.clusters.insert("member1".into(), ClusterDiff { added, ..Default::default() });
    let field = FieldChange {
        path: "rules[0].verbs[0]".into(),
        from: Some(serde_json::json!("get")),
        to: Some(serde_json::json!("*")),
    };
    let object = rbac("ClusterRole", "edit\r\n| x | y |\r\n`");
    let changed = vec![Changed { object, fields: vec![field], overrides_added: vec![], overrides_removed: vec![] }];
    diff.clusters.insert("member2|<b>x</b>".into(), ClusterDiff { changed, ..Default::default() });
    diff.problems.push(Problem {
        object: ObjectKey::new("v1", "ConfigMap", Some("default"), "cm\r\n- [x] approved by @admin"),
        origin: Origin { file: PATH.into(), document: 1, line: 3 },
        cluster: Some("member1".into()),
        reason: ProblemReason::Unschedulable,
        message: "no cluster fits\r\n\r\n<!-- hide -->".into(),
    });
    diff
}

fn rendered(text: &str) -> String {
    let mut out = String::new();
    html::push_html(&mut out, Parser::new_ext(text, Options::ENABLE_TABLES));
    out
}

/// The HTML without code spans and blocks, where forges make no mentions or links.
fn outside_code(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<code") {
        out += &rest[..start];
        let Some(end) = rest[start..].find("</code>") else { break };
        rest = &rest[start + end + "</code>".len()..];
    }
    out + rest
}

#[test]
fn a_hostile_plan_renders_as_text_and_lists_every_object() {
    let text = markdown::markdown(&hostile(), &Comment::default());
    let page = rendered(&text);
    assert_eq!(page.matches("<!--").count(), 1, "only the marker is a comment: {page}");
    assert!(page.starts_with(markdown::MARKER), "{page}");
    assert_eq!(page.matches("<strong>").count(), 1, "only our own heading is bold: {page}");
    assert!(page.contains("<strong>New problems (1)</strong>"), "{page}");
    for tag in ["<img", "<a ", "<em>", "<h1", "<h2", "<li><p>", "<input"] {
        assert!(!page.contains(tag), "{tag} made from repository text: {page}");
    }
    assert!(!page.contains("<b>x</b>"), "a cluster name became HTML: {page}");
    let prose = outside_code(&page);
    for mention in ["@octocat", "@acme", "@admin"] {
        assert!(!prose.contains(mention), "{mention} would notify: {prose}");
    }
    assert!(!prose.contains("No changes in any cluster."), "a forged summary: {prose}");
    // One table: a header and one row per cluster, whatever the names hold.
    assert_eq!(page.matches("<table>").count(), 1, "{page}");
    assert_eq!(page.matches("<tr>").count(), 3, "{page}");
    // Every changed object is shown, in the table and in its cluster's diff.
    for name in ["view-extra", HIDDEN, "edit"] {
        assert!(page.matches(name).count() >= 1, "{name} is not shown: {page}");
    }
    assert!(page.contains(&format!("ClusterRoleBinding {HIDDEN}")), "{page}");
    assert!(page.contains("<b>member1</b>: 2 added</summary>"), "{page}");
    assert_eq!(page.matches("<details>").count(), 2, "{page}");
}

#[test]
fn a_comment_for_a_head_that_does_not_render_stays_within_budget_and_inert() {
    let name = "x".repeat(70_000);
    let error = format!("{PATH}: document 1 (line 3): {name} is not a valid name\n```\n<!--");
    let text = markdown::broken(&"c".repeat(40), &error, markdown::BUDGET);
    assert!(text.len() <= markdown::BUDGET, "{}", text.len());
    let page = rendered(&text);
    assert_eq!(page.matches("<!--").count(), 1, "{page:.2000}");
    assert!(!outside_code(&page).contains("@acme") && !page.contains("<img"), "{page:.2000}");
    assert!(text.contains("longer than a comment allows"));
    let short = markdown::broken("c", "plain error", markdown::BUDGET);
    assert!(short.contains("plain error") && !short.contains("longer than"), "{short}");
}
