//! Text from a repository, a pull request or a member is untrusted: a name may hold
//! newlines, terminal escapes, Markdown, HTML or a forge mention. Each function here
//! escapes such text for one place it lands, so what a reader sees is the text itself
//! and nothing it could pretend to be.
//!
//! | lands in                       | function        | what it neutralises                         |
//! |--------------------------------|-----------------|---------------------------------------------|
//! | a terminal, a plan             | [`visible`]     | control characters, bidirectional overrides |
//! | a human-format log event       | [`log_event`]   | the same inside the event, but its final    |
//! |                                |                 | newline and ESC (the formatter colours with |
//! |                                |                 | it, and escapes it in values itself)        |
//! | Markdown, as inline code       | [`code`]        | the above, backticks, and in tables `\|`    |
//! | Markdown, as running text      | [`text`]        | the above, all Markdown and HTML, mentions  |
//! | HTML (a `<summary>`)           | [`html`]        | the above, `<`, `>`, `&`, quotes, mentions  |

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a reader raw: C0 and C1 controls, DEL, and the Unicode
/// formatting characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width characters, the byte-order mark).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every hidden character written out (`\n`, `\r`, `\t`, `\u{1b}`), so a
/// name cannot start a new line, move the cursor, colour or hyperlink a terminal, or
/// reorder what is shown around it. Text without such characters is returned as it is.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// One formatted log event (human format) as it may reach a terminal or a log file:
/// hidden characters inside it written out, so a value cannot start a forged log line
/// (`\n`) or overwrite the one it is on (`\r`); its final newline kept. ESC is left as
/// it is: the formatter colours with it, and escapes it in the values it writes.
pub fn log_event(event: &str) -> Cow<'_, str> {
    let (body, end) = event.strip_suffix('\n').map_or((event, ""), |body| (body, "\n"));
    let kept = |c: char| c == '\u{1b}' || c == '\t';
    if !body.chars().any(|c| hidden(c) && !kept(c)) {
        return Cow::Borrowed(event);
    }
    let mut out = String::with_capacity(event.len() + 8);
    for c in body.chars() {
        if kept(c) {
            out.push(c);
        } else {
            out += &visible(c.encode_utf8(&mut [0; 4]));
        }
    }
    Cow::Owned(out + end)
}

/// Where Markdown text sits: a table cell also ends at an unescaped `|`, even inside a
/// code span (GitHub Flavored Markdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A paragraph or a list item.
    Flow,
    /// A table cell.
    Cell,
}

/// `text` as a Markdown code span: nothing inside is read as Markdown or HTML, and
/// forges neither link nor mention from it. The fence is longer than any run of
/// backticks in the text, and padded, so no backtick closes it.
pub fn code(text: &str, place: Place) -> String {
    let shown = visible(text);
    let shown = match place {
        Place::Cell => Cow::Owned(shown.replace('|', "\\|")),
        Place::Flow => shown,
    };
    let longest = shown.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    format!("{fence} {shown} {fence}")
}

/// `text` as Markdown running text: every ASCII punctuation character backslash-escaped
/// (CommonMark allows it for all of them, so no emphasis, link, image, HTML, table cell
/// or list marker can start), and a zero-width space after `@`, so a forge makes no
/// mention (`@octocat`) or team ping of it.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in visible(text).chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
        if c == '@' {
            out.push('\u{200b}');
        }
    }
    out
}

/// `text` as HTML character data or an attribute value: `&`, `<`, `>` and quotes as
/// entities, hidden characters written out, and `@` followed by a zero-width space (an
/// entity, so it survives as written), so no mention is made of it either.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in visible(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '@' => out.push_str("@&#8203;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_written_out() {
        assert!(matches!(visible("plain-name"), Cow::Borrowed("plain-name")));
        assert_eq!(visible("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(visible("\u{1b}[2K\u{1b}]8;;http://x\u{7}"), "\\u{1b}[2K\\u{1b}]8;;http://x\\u{7}");
        assert_eq!(visible("abc\u{202e}fdp.exe"), "abc\\u{202e}fdp.exe");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m", "a C1 control");
        assert_eq!(visible("héllo ✓"), "héllo ✓", "other Unicode is kept");
    }

    #[test]
    fn a_log_event_stays_one_line() {
        assert!(matches!(log_event("INFO reconciling\n"), Cow::Borrowed(_)));
        let forged = "WARN object=a\nINFO applied everything\rX\n";
        assert_eq!(log_event(forged), "WARN object=a\\nINFO applied everything\\rX\n");
        assert_eq!(log_event("\u{1b}[33mWARN\u{1b}[0m\tx"), "\u{1b}[33mWARN\u{1b}[0m\tx", "the formatter's colours");
        assert_eq!(log_event("a\u{202e}b\n"), "a\\u{202e}b\n");
    }

    #[test]
    fn code_spans_cannot_be_closed_or_split() {
        assert_eq!(code("web", Place::Flow), "` web `");
        assert_eq!(code("a`b``c", Place::Flow), "``` a`b``c ```");
        assert_eq!(code("x|y", Place::Cell), "` x\\|y `");
        assert_eq!(code("x|y", Place::Flow), "` x|y `");
        assert_eq!(code("a\n\nb", Place::Flow), "` a\\n\\nb `");
    }

    #[test]
    fn running_text_is_inert() {
        assert_eq!(text("**No changes**"), "\\*\\*No changes\\*\\*");
        assert_eq!(text("<!--"), "\\<\\!\\-\\-");
        assert_eq!(text("cc @octocat"), "cc \\@\u{200b}octocat");
        assert_eq!(text("[approve](http://x)"), "\\[approve\\]\\(http\\:\\/\\/x\\)");
    }

    #[test]
    fn html_is_inert() {
        assert_eq!(html("<img src=x onerror=alert(1)>"), "&lt;img src=x onerror=alert(1)&gt;");
        assert_eq!(html("a&b \"q\" 'r' @team"), "a&amp;b &quot;q&quot; &#39;r&#39; @&#8203;team");
    }
}
