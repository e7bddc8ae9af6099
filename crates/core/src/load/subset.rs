//! The common subset of YAML, read straight from the parser's events: one document of
//! mappings, sequences and scalars, without anchors, aliases, tags, directives or merge
//! keys. Nearly every manifest is only that, and reading it this way costs about half
//! of what serde-saphyr's general deserializer costs (docs/performance.md, "The parse
//! floor").
//!
//! It reads with serde-saphyr's own parser (granit-parser) and the options serde-saphyr
//! gives it, so it accepts exactly the text serde-saphyr accepts, and it resolves plain
//! scalars as serde-saphyr does with `legacy_octal_numbers` (YAML 1.1, as Kubernetes
//! reads them; the table is on [`scalar`]). Anything outside the subset, any spelling
//! where the two could disagree, any error and any budget it comes near answers `None`,
//! and the caller parses that document with serde-saphyr: its errors and its budgets
//! stay the only ones a user sees.

use std::borrow::Cow;

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

use crate::model::Limits;

/// Events in one document before serde-saphyr's default budget (`max_events`) stops.
const MAX_EVENTS: usize = 1_000_000;

/// A document's tree and its node count (mappings, sequences and scalars), or `None`
/// when serde-saphyr must read it.
pub(super) fn tree(text: &str, limits: &Limits) -> Option<(Value, usize)> {
    let mut builder = Builder::new(limits);
    for (events, next) in Parser::new_from_str_with_options(text, parser_options(limits)).enumerate() {
        let (event, _) = next.ok()?;
        if events >= MAX_EVENTS || !builder.take(event)? {
            break;
        }
    }
    builder.finish()
}

/// serde-saphyr's parser options for flotilla's budgets (its `Budget::parser_options`):
/// the same limits on simple keys, flow and block nesting, and comment buffering.
fn parser_options(limits: &Limits) -> granit_parser::Options {
    let budget = serde_saphyr::Budget::default();
    let block = granit_parser::Options::default().block_nesting_limit.max(limits.max_depth.saturating_add(1));
    granit_parser::options! {
        simple_key_max_lookahead: budget.simple_key_max_lookahead,
        flow_nesting_limit: budget.flow_nesting_limit,
        block_nesting_limit: block,
        emit_comments: true,
        max_buffered_comment_events: budget.max_buffered_comment_events,
    }
}

/// A collection being read.
enum Frame {
    Sequence(Vec<Value>),
    /// A mapping and the key whose value comes next.
    Mapping(Map<String, Value>, Option<String>),
}

struct Builder {
    stack: Vec<Frame>,
    root: Option<Value>,
    documents: usize,
    /// Values, as `count_nodes` counts them: collections and scalars, not keys.
    nodes: usize,
    /// Keys, which serde-saphyr's node budget counts too.
    keys: usize,
    /// One below flotilla's budgets, so the subset never accepts what serde-saphyr,
    /// counting from one, would refuse.
    max_depth: usize,
    max_nodes: usize,
}

impl Builder {
    fn new(limits: &Limits) -> Self {
        Self {
            stack: Vec::new(),
            root: None,
            documents: 0,
            nodes: 0,
            keys: 0,
            max_depth: limits.max_depth.saturating_sub(1),
            max_nodes: limits.max_nodes.saturating_sub(1),
        }
    }

    /// Takes one event: `Some(true)` to go on, `Some(false)` at the end of the stream,
    /// `None` when the document is not in the subset.
    fn take(&mut self, event: Event<'_>) -> Option<bool> {
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Comment(..) => {}
            Event::StreamEnd => return Some(false),
            Event::DocumentStart(_, version) => {
                self.documents += 1;
                if self.documents > 1 || version.is_some() {
                    return None;
                }
            }
            Event::Scalar(text, style, anchor, tag) if anchor == 0 && tag.is_none() => self.scalar(text, style)?,
            Event::SequenceStart(_, anchor, tag) if anchor == 0 && tag.is_none() => {
                self.open(Frame::Sequence(Vec::new()))?
            }
            Event::MappingStart(_, anchor, tag) if anchor == 0 && tag.is_none() => {
                self.open(Frame::Mapping(Map::new(), None))?
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop()? {
                    Frame::Sequence(items) => Value::Array(items),
                    Frame::Mapping(map, None) => Value::Object(map),
                    Frame::Mapping(_, Some(_)) => return None,
                };
                self.place(value)?;
            }
            _ => return None,
        }
        Some(true)
    }

    fn within_budget(&self) -> Option<()> {
        (self.nodes + self.keys < self.max_nodes).then_some(())
    }

    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Mapping(_, None)))
    }

    fn open(&mut self, frame: Frame) -> Option<()> {
        // A collection as a mapping key is outside the subset.
        if self.expects_key() || self.stack.len() >= self.max_depth {
            return None;
        }
        self.nodes += 1;
        self.within_budget()?;
        self.stack.push(frame);
        Some(())
    }

    fn scalar(&mut self, text: Cow<'_, str>, style: ScalarStyle) -> Option<()> {
        if let Some(Frame::Mapping(map, key @ None)) = self.stack.last_mut() {
            self.keys += 1;
            // A repeated key is serde-saphyr's error to report.
            if (style == ScalarStyle::Plain && !plain_key(&text)) || map.contains_key(text.as_ref()) {
                return None;
            }
            *key = Some(text.into_owned());
            return self.within_budget();
        }
        self.nodes += 1;
        self.within_budget()?;
        let value = if style == ScalarStyle::Plain { scalar(&text)? } else { Value::String(text.into_owned()) };
        self.place(value)
    }

    /// Puts a finished value where it belongs: the root, the next item, or the value of
    /// the pending key.
    fn place(&mut self, value: Value) -> Option<()> {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Sequence(items)) => items.push(value),
            Some(Frame::Mapping(map, key)) => {
                map.insert(key.take()?, value);
            }
        }
        Some(())
    }

    fn finish(self) -> Option<(Value, usize)> {
        if !self.stack.is_empty() {
            return None;
        }
        // An empty document is one null node.
        Some(self.root.map_or((Value::Null, 1), |root| (root, self.nodes)))
    }
}

/// What a plain scalar is. YAML 1.1 as Kubernetes reads it (go-yaml v2's `resolve`),
/// where serde-saphyr (with `legacy_octal_numbers`) reads it the same way:
///
/// | plain scalar | value |
/// |---|---|
/// | empty, `~`, `null`, `Null`, `NULL` | null |
/// | `y Y yes Yes YES true True TRUE on On ON` | true |
/// | `n N no No NO false False FALSE off Off OFF` | false |
/// | those words in other cases (`yEs`, `tRUE`) | ask serde-saphyr: it reads booleans, go-yaml text |
/// | `.inf`, `.nan` and their spellings | ask serde-saphyr: it refuses them (JSON has no such number) |
/// | starts with a digit, sign or dot | go-yaml's number ([`number`]), else the text; ask serde-saphyr when the number is written with `_` or an upper-case radix prefix (`0X1F`), or is not finite |
/// | anything else | the text |
fn scalar(text: &str) -> Option<Value> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Some(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Some(Value::Bool(false));
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF" | ".nan" | ".NaN"
        | ".NAN" => return None,
        _ => {}
    }
    if BOOLEAN_WORDS.iter().any(|word| word.eq_ignore_ascii_case(text)) {
        return None;
    }
    if !text.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
        return Some(Value::String(text.to_owned()));
    }
    let unsigned = text.trim_start_matches(['-', '+']);
    let disputed = text.contains('_') || DISPUTED_PREFIXES.iter().any(|prefix| unsigned.starts_with(prefix));
    if ["0b-", "0b+"].iter().any(|prefix| unsigned.starts_with(prefix)) {
        // go-yaml's own `0b` reading takes a sign after the prefix (`0b-101` is -5).
        return None;
    }
    match number(text) {
        Reading::Text => Some(Value::String(text.to_owned())),
        Reading::Number(_) if disputed => None,
        Reading::Number(value) => Some(value),
        Reading::Overflow => None,
    }
}

/// What go-yaml makes of a text that starts like a number.
enum Reading {
    Number(Value),
    Text,
    /// A float too large for f64: text to go-yaml, refused by serde-saphyr.
    Overflow,
}

/// Radix prefixes Go reads and serde-saphyr does not.
const DISPUTED_PREFIXES: [&str; 3] = ["0X", "0O", "0B"];

const BOOLEAN_WORDS: [&str; 8] = ["yes", "no", "true", "false", "on", "off", "y", "n"];

/// A plain mapping key serde-saphyr keeps as written: not null, not a merge key, not a
/// disputed spelling, and not a number written other than as its plain decimal form
/// (serde-saphyr compares numeric keys by value: `+1` and `1`, `017` and `0o17`, `1.5`
/// and `1.50` are one key to it, and two of them in a mapping are its duplicate-key error).
fn plain_key(text: &str) -> bool {
    match scalar(text) {
        Some(Value::Null) | None => false,
        Some(Value::Number(n)) => !text.starts_with(['-', '+']) && n.to_string() == text,
        Some(_) => text != "<<",
    }
}

/// go-yaml v2's reading of a plain scalar that starts with a digit, a sign or a dot:
/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint`, on the text without underscores;
/// then its float pattern. (go-yaml's `0b` fallback after the float pattern adds only
/// `0b` followed by a sign, which [`scalar`] leaves to serde-saphyr; timestamps stay text
/// when go-yaml decodes into an interface, so they need no case.)
fn number(text: &str) -> Reading {
    let plain: Cow<'_, str> = if text.contains('_') { text.replace('_', "").into() } else { text.into() };
    // A leading dot is go-yaml's `.` hint: only ParseFloat, on the text as written.
    let integer = !text.starts_with('.');
    if let Some(int) = parse_int(&plain).filter(|_| integer) {
        return Reading::Number(Value::Number(int.into()));
    }
    if let Some(uint) = unsigned_int(&plain).filter(|_| integer) {
        return Reading::Number(Value::Number(uint.into()));
    }
    let float = if integer { &plain } else { text };
    if !float_pattern(float) {
        return Reading::Text;
    }
    match float.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(number) => Reading::Number(Value::Number(number)),
        None => Reading::Overflow,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`: a sign, then a `0x`, `0o`, `0b` or `0` prefix.
fn parse_int(text: &str) -> Option<i64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let magnitude = i128::from(unsigned_int(body)?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Go's `strconv.ParseUint(s, 0, 64)`: no sign.
fn unsigned_int(text: &str) -> Option<u64> {
    let (radix, digits) = if let Some(rest) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        (16, rest)
    } else if let Some(rest) = text.strip_prefix("0o").or_else(|| text.strip_prefix("0O")) {
        (8, rest)
    } else if let Some(rest) = text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        (2, rest)
    } else if text.len() > 1 && text.starts_with('0') {
        (8, &text[1..])
    } else {
        (10, text)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// go-yaml v2's float pattern: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn float_pattern(text: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = text.strip_prefix(['-', '+']).unwrap_or(text);
    let rest = if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        &fraction[n..]
    } else {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        let rest = &rest[n..];
        rest.strip_prefix('.').map_or(rest, |fraction| &fraction[digits(fraction)..])
    };
    match rest.strip_prefix(['e', 'E']) {
        None => rest.is_empty(),
        Some(exponent) => {
            let exponent = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
            let n = digits(exponent);
            n > 0 && n == exponent.len()
        }
    }
}

#[cfg(test)]
mod tests;
