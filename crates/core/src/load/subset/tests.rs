//! The subset against serde-saphyr, the reader it must agree with: on every spelling it
//! reads itself it gives serde-saphyr's tree, and everything else it leaves alone.

use serde_json::{Value, json};

use super::tree;
use crate::load::{parse_options, split};
use crate::model::Limits;

#[path = "../../../benches/support/generate.rs"]
#[allow(dead_code)]
mod generate;

/// serde-saphyr alone, as the loader calls it.
fn parse_embedded(text: &str, limits: &Limits) -> Result<Value, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, parse_options(limits))
}

/// What the subset makes of a document: `Some` only when serde-saphyr makes the same.
fn checked(text: &str) -> Option<Value> {
    let limits = Limits::default();
    let (value, nodes) = tree(text, &limits)?;
    let theirs = parse_embedded(text, &limits);
    assert_eq!(theirs.as_ref().ok(), Some(&value), "the subset and serde-saphyr disagree on {text:?}: {theirs:?}");
    assert_eq!(nodes, crate::load::count_nodes(&value), "{text:?}");
    Some(value)
}

#[test]
fn plain_scalars_read_as_kubernetes_reads_them() {
    let read = |s: &str| checked(&format!("v: {s}\n")).map(|v| v["v"].clone());
    for (text, want) in [
        ("0644", json!(420)),
        ("0o644", json!(420)),
        ("0x1F", json!(31)),
        ("-0x1F", json!(-31)),
        ("0b101", json!(5)),
        ("08", json!(8.0)),
        ("012345678", json!(12_345_678.0)),
        ("1e3", json!(1000.0)),
        (".5", json!(0.5)),
        ("5.", json!(5.0)),
        ("9223372036854775808", json!(9_223_372_036_854_775_808_u64)),
        ("18446744073709551616", json!(1.844_674_407_370_955_2e19)),
        ("yes", json!(true)),
        ("Off", json!(false)),
        ("n", json!(false)),
        ("~", Value::Null),
        ("", Value::Null),
        ("1.2.0", json!("1.2.0")),
        ("100m", json!("100m")),
        ("0x", json!("0x")),
        ("2001-12-14", json!("2001-12-14")),
        ("--agent=$(CLUSTER_NAME)", json!("--agent=$(CLUSTER_NAME)")),
        ("nan", json!("nan")),
        (".iNf", json!(".iNf")),
        ("1e400x", json!("1e400x")),
    ] {
        assert_eq!(read(text), Some(want), "{text:?}");
    }
}

#[test]
fn spellings_where_readers_part_ways_are_left_to_serde_saphyr() {
    // serde-saphyr and go-yaml disagree on these (case-blind booleans, underscores,
    // upper-case radix prefixes), or serde-saphyr refuses them (non-finite floats).
    for text in [
        "yEs", "tRUE", "oN", "1_000", "1__0", "1_", "0x_FF", "1_0.5", "0X1F", "0O17", "0B11", "0b-101", ".inf",
        "-.Inf", ".nan", "1e400", "-1e400",
    ] {
        assert_eq!(tree(&format!("v: {text}\n"), &Limits::default()), None, "{text:?}");
    }
}

#[test]
fn keys_are_kept_as_written_or_left_to_serde_saphyr() {
    assert_eq!(
        checked("on: push\n8080: port\ntrue: t\n1.5: f\n\"q\": x\n"),
        Some(json!({"on": "push", "8080": "port", "true": "t", "1.5": "f", "q": "x"}))
    );
    // Numbers serde-saphyr compares by value (found by the generated documents below:
    // `0o17` and `017` are one key to it).
    for text in [
        "~: x\n",
        "+1: x\n",
        "<<: {a: 1}\n",
        "a: 1\na: 2\n",
        "? [a]\n: b\n",
        "yEs: x\n",
        "017: a\n",
        "0o17: a\n",
        "1.50: a\n",
        "1e3: a\n",
    ] {
        assert_eq!(tree(text, &Limits::default()), None, "{text:?}");
    }
}

#[test]
fn the_structure_of_manifests_reads_alike() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blocks\n  annotations: {a: b, \"c\": 'd', e: , f: ~}\n\
        data:\n  literal: |\n    one\n      two\n  keep: |+\n    kept\n\n  strip: |-\n    s\n  folded: >\n    a\n    b\n\n    c\n\
        \x20 dq: \"tab\\there \\u00e9 \\x41 \\\\ end\"\n  sq: 'it''s\n    folded'\n  plain: a multi\n    line scalar\n\
        \x20 hash: value # comment\n  nohash: value#not\n  url: http://x:80/p?q#f\n  unicode: héllo ✓\n  ? explicit\n  : value\n\
        list:\n- a\n- - nested\n- {x: 1, y: [1, {z: null}]}\n-\n- ~\n...\n";
    let value = checked(text).expect("read by the subset");
    assert_eq!(value["data"]["keep"], "kept\n\n");
    assert_eq!(value["list"][3], Value::Null);
    assert!(checked("apiVersion: v1\r\nkind: ConfigMap\r\ndata:\r\n  a: |\r\n    x\r\n").is_some());
    assert_eq!(checked("# only a comment\n"), Some(Value::Null));
    assert_eq!(checked("--- |\n  text\n"), Some(json!("text\n")));
}

#[test]
fn what_is_outside_the_subset_is_left_to_serde_saphyr() {
    for text in [
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: !custom x\n",
        "%YAML 1.1\n---\na: 1\n",
        "a: 1\n---\nb: 2\n",
        "a: \"unterminated\n",
        "a:\n\tb: c\n",
        "a: b: c\n",
    ] {
        assert_eq!(tree(text, &Limits::default()), None, "{text:?}");
    }
}

#[test]
fn budgets_are_never_reached_on_the_subset() {
    // One below each budget the subset stops, and serde-saphyr decides.
    let limits = Limits { max_depth: 8, max_nodes: 50, ..Limits::default() };
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    assert!(tree(&deep(7), &limits).is_some_and(|(v, _)| parse_embedded(&deep(7), &limits).ok() == Some(v)));
    assert_eq!(tree(&deep(8), &limits), None);
    let nodes = |n: usize| format!("[{}]", vec!["1"; n].join(", "));
    assert!(tree(&nodes(47), &limits).is_some_and(|(v, _)| parse_embedded(&nodes(47), &limits).ok() == Some(v)));
    assert_eq!(tree(&nodes(48), &limits), None);
    let bomb: String = (0..10_000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
    assert_eq!(tree(&bomb, &Limits::default()), None);
}

#[test]
fn every_document_of_a_generated_repo_is_read_by_the_subset_alike() {
    let files = generate::generate(300, 3);
    let mut documents = 0;
    for text in files.values() {
        for chunk in split(text) {
            checked(chunk.text).unwrap_or_else(|| panic!("left to serde-saphyr: {}", chunk.text));
            documents += 1;
        }
    }
    assert!(documents > 300, "{documents}");
}

/// The pieces random documents are made of: indicators, indentation, scalars that
/// resolve differently across YAML versions, and the syntax outside the subset.
const PIECES: [&str; 58] = [
    "a",
    "b: ",
    "- ",
    "  ",
    "    ",
    "\n",
    "\n  ",
    "\n- ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "? ",
    "'",
    "\"",
    "\\",
    "#",
    " #c",
    "|",
    ">",
    "|-",
    ">+",
    "|2",
    "&x ",
    "*x",
    "!t ",
    "!!str ",
    "%YAML 1.1\n",
    "---\n",
    "...\n",
    "--- ",
    "\t",
    "0x1F",
    "012",
    "1.5",
    "yes",
    "~",
    "null",
    "-",
    "x: y",
    "k:\n  - v",
    "\u{feff}",
    "é",
    "\r\n",
    ":",
    ",",
    "`",
    "@",
    "%",
    "<<: ",
    "=",
    "1e3",
    " ",
    "\\x41",
    "0b-1",
    "1_0",
];

/// A seeded xorshift generator: random inputs, the same on every run.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Random documents from pieces of YAML syntax: whatever the subset reads, serde-saphyr
/// reads the same, and the subset never panics.
#[test]
fn random_documents_read_alike_or_are_left_alone() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut read = 0;
    for _ in 0..20_000 {
        let len = 1 + (next() % 24) as usize;
        let text: String = (0..len).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
        read += usize::from(checked(&text).is_some());
    }
    assert!(read > 2_000, "the subset read only {read} of 20,000 documents");
}

/// The pieces random streams are made of: document markers with and without content on
/// their line, documents, comments and document ends.
const STREAM_PIECES: [&str; 16] = [
    "---\n",
    "--- ",
    "---\t",
    "--- # marker comment\n",
    "a: 1\n",
    "{k: v}\n",
    "[1, 2]\n",
    "- x\n- y\n",
    "|\n  text\n",
    "# comment\n",
    "...\n",
    "plain\n",
    "b:\n  c: d\n",
    "~\n",
    "\n",
    "{kind: NetworkPolicy, metadata: {name: deny-all}}\n",
];

/// A stream as the loader reads it: split by line, each chunk read on its own (the
/// subset, else serde-saphyr); empty and null documents skipped, as serde-saphyr skips
/// them.
fn split_and_read(text: &str) -> Result<Vec<Value>, String> {
    let limits = Limits::default();
    let mut documents = Vec::new();
    for chunk in split(text) {
        let value = crate::load::parse_embedded(chunk.text, &limits).map_err(|e| e.to_string())?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// Random multi-document streams: whatever serde-saphyr reads as a stream, splitting
/// and reading each document gives the same documents, or refuses the stream (a
/// document after `...` without its own `---` is refused with its file and line); it
/// never gives other documents, so none (one written on its `---` line included) is
/// ever dropped.
#[test]
fn random_streams_split_into_the_documents_serde_saphyr_reads() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut options = parse_options(&Limits::default());
    options.budget.as_mut().expect("a budget").max_documents = 10_000;
    let (mut agreed, mut refused, mut on_marker_line) = (0, 0, 0);
    for _ in 0..20_000 {
        let len = 1 + (next() % 10) as usize;
        let text: String = (0..len).map(|_| STREAM_PIECES[(next() % STREAM_PIECES.len() as u64) as usize]).collect();
        let Ok(theirs) = serde_saphyr::from_multiple_with_options::<Value>(&text, options.clone()) else { continue };
        match split_and_read(&text) {
            Ok(ours) => assert_eq!(ours, theirs, "the splitter and serde-saphyr disagree on {text:?}"),
            Err(_) => {
                assert!(text.contains("...\n"), "refused without a document end: {text:?}");
                refused += 1;
                continue;
            }
        }
        agreed += 1;
        on_marker_line += usize::from(text.lines().any(|l| l.starts_with("--- ") && !l.starts_with("--- #")));
    }
    assert!(agreed > 2_000 && on_marker_line > 500, "{agreed} streams read, {on_marker_line} with content on a marker");
    assert!(refused < agreed / 4, "{refused} refused, {agreed} read alike");
}

/// Generated documents, shrunk to the smallest one when the two readers disagree.
mod generated;
