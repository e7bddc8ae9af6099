//! The parse-floor study of docs/performance.md ("The parse floor"), as a command:
//! `cargo run --release -p flotilla-core --example yaml-parsers [MUTANTS]`.
//!
//! libyaml-safer (a safe Rust port of libyaml, whose events are go-yaml's) reads the
//! event stream about twice as fast as granit-parser (serde-saphyr's parser, which
//! flotilla reads the common subset from). Speed alone is not enough to adopt it: a
//! parser of untrusted repositories must refuse what serde-saphyr refuses and must never
//! panic. This checks both, on
//! - the whole M corpus (every document must be accepted by both),
//! - the inputs of libyaml-safer's open panic reports (issues 6 and 7 upstream),
//! - MUTANTS deterministic mutants of corpus documents (default 20,000): a byte
//!   deleted, duplicated or replaced by a YAML indicator, a seeded xorshift choosing.
//!
//! It prints how many inputs fall in each combination of verdicts (flotilla's loader;
//! granit-parser's and libyaml-safer's event streams), and for each disagreement the
//! shortest such input with the lines that do not change the verdicts left out.

#[path = "../benches/support/generate.rs"]
mod generate;

use std::panic::{AssertUnwindSafe, catch_unwind};

use flotilla_core::model::Limits;

/// What a parser made of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Accepted,
    Refused,
    Panicked,
}

/// libyaml-safer's verdict on the whole event stream of `text`.
fn libyaml_safer(text: &str) -> Verdict {
    let run = catch_unwind(AssertUnwindSafe(|| {
        let mut input = text.as_bytes();
        let mut parser = libyaml_safer::Parser::new();
        parser.set_input_string(&mut input);
        loop {
            match parser.parse() {
                Ok(event) if matches!(event.data, libyaml_safer::EventData::StreamEnd) => return Verdict::Accepted,
                Ok(_) => {}
                Err(_) => return Verdict::Refused,
            }
        }
    }));
    run.unwrap_or(Verdict::Panicked)
}

/// granit-parser's verdict on the whole event stream of `text`: the level libyaml-safer
/// is judged at (an alias to an undefined anchor, a duplicate key or a type error is
/// refused later, by what builds the tree).
fn granit(text: &str) -> Verdict {
    let run = catch_unwind(AssertUnwindSafe(|| {
        for event in granit_parser::Parser::new_from_str(text) {
            if event.is_err() {
                return Verdict::Refused;
            }
        }
        Verdict::Accepted
    }));
    run.unwrap_or(Verdict::Panicked)
}

/// flotilla's verdict: the document read as the loader reads it (the subset reader,
/// serde-saphyr for the rest, with the repository's budgets).
fn flotilla(text: &str, limits: &Limits) -> Verdict {
    match catch_unwind(AssertUnwindSafe(|| flotilla_core::load::parse_embedded(text, limits).is_ok())) {
        Ok(true) => Verdict::Accepted,
        Ok(false) => Verdict::Refused,
        Err(_) => Verdict::Panicked,
    }
}

/// A deterministic xorshift64: the same mutants on every run and machine.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One mutant of `doc`: a byte deleted, duplicated, or replaced by an indicator.
fn mutate(doc: &str, rng: &mut Rng) -> String {
    const INDICATORS: &[u8] = b"-?:,[]{}#&*!|>'\"%@` \n\t";
    let mut bytes = doc.as_bytes().to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(bytes.len().max(1));
        match rng.below(3) {
            0 if !bytes.is_empty() => {
                bytes.remove(at);
            }
            1 if !bytes.is_empty() => bytes.insert(at, bytes[at]),
            _ => bytes.insert(at.min(bytes.len()), INDICATORS[rng.below(INDICATORS.len())]),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The verdicts on one input: flotilla's loader, then the two event streams.
type Verdicts = (Verdict, Verdict, Verdict);

fn verdicts(text: &str, limits: &Limits) -> Verdicts {
    (flotilla(text, limits), granit(text), libyaml_safer(text))
}

/// `text` with lines left out while its verdicts stay the same: a short example.
fn shorten(text: &str, limits: &Limits) -> String {
    let want = verdicts(text, limits);
    let mut lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let mut fewer = lines.clone();
        fewer.remove(i);
        if verdicts(&fewer.join("\n"), limits) == want {
            lines = fewer;
        } else {
            i += 1;
        }
    }
    lines.join("\n")
}

/// Tallies the verdicts and keeps the shortest input of each combination.
#[derive(Default)]
struct Tally(std::collections::BTreeMap<Verdicts, (usize, String)>);

impl Tally {
    fn add(&mut self, text: &str, limits: &Limits) {
        let key = verdicts(text, limits);
        let entry = self.0.entry(key).or_insert_with(|| (0, text.to_owned()));
        entry.0 += 1;
        if text.len() < entry.1.len() {
            entry.1 = text.to_owned();
        }
    }

    fn print(&self, title: &str, limits: &Limits) {
        println!("{title}");
        for ((ours, granit, libyaml), (count, shortest)) in &self.0 {
            let agree = ours == granit && granit == libyaml;
            let example =
                if agree { String::new() } else { format!("\n    for example: {:?}", shorten(shortest, limits)) };
            println!("  flotilla {ours:?}, granit-parser {granit:?}, libyaml-safer {libyaml:?}: {count}{example}");
        }
    }
}

fn main() {
    let mutants: usize = std::env::args().nth(1).map_or(20_000, |n| n.parse().expect("MUTANTS is a count"));
    let limits = Limits::default();
    let files = generate::generate(5_000, 20);
    let docs: Vec<&str> = files.values().flat_map(|f| flotilla_core::load::split(f)).map(|c| c.text).collect();
    // libyaml-safer's panics print a message each; the tally counts them instead.
    std::panic::set_hook(Box::new(|_| {}));

    let mut corpus = Tally::default();
    docs.iter().for_each(|d| corpus.add(d, &limits));
    corpus.print(&format!("M corpus, {} documents:", docs.len()), &limits);

    let mut reported = Tally::default();
    ["a: ''|\n 0", "[!,"].iter().for_each(|d| reported.add(d, &limits));
    reported.print("libyaml-safer's open panic reports (upstream issues 6 and 7):", &limits);

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut mutated = Tally::default();
    for _ in 0..mutants {
        let doc = docs[rng.below(docs.len())];
        mutated.add(&mutate(doc, &mut rng), &limits);
    }
    mutated.print(&format!("{mutants} mutants of corpus documents:"), &limits);
}
