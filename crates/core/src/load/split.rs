//! Splitting a YAML stream into documents by line, so each document can be parsed on
//! its own (in parallel) and errors can name the document and an absolute line.
//!
//! A line that is exactly `---`, or `---` followed by a space or tab, is a document
//! marker at column 0; YAML forbids such a line inside any document's content, so
//! splitting on it agrees with the parser. The marker line starts the next chunk, which
//! keeps forms like `--- |` intact.

/// One document's text and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// 1-based index among the file's non-empty documents.
    pub document: usize,
    /// 1-based line of the chunk's first line.
    pub line: usize,
    /// The text, marker line included.
    pub text: &'a str,
}

/// Splits `text` into non-empty documents (chunks with at least one line that is neither
/// blank, a comment nor a bare marker).
pub fn split(text: &str) -> Vec<Chunk<'_>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if index > 0 && is_marker(line) {
            push(&mut chunks, &text[start..offset], start_line);
            start = offset;
            start_line = index + 1;
        }
        offset += line.len();
    }
    push(&mut chunks, &text[start..], start_line);
    chunks
}

fn push<'a>(chunks: &mut Vec<Chunk<'a>>, text: &'a str, line: usize) {
    if text.lines().any(has_content) {
        chunks.push(Chunk { document: chunks.len() + 1, line, text });
    }
}

fn is_marker(line: &str) -> bool {
    let line = line.trim_end_matches(['\n', '\r']);
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

/// Whether a line holds any of a document's content. A marker line's own text counts:
/// `--- {kind: ConfigMap, ...}` is a whole document written on its marker line, and a
/// chunk holding only that line must not be taken for an empty one.
fn has_content(line: &str) -> bool {
    let (text, end_marker) = match is_marker(line) {
        // After `---`, even `...` is a scalar, not a document end.
        true => (&line.trim_end_matches(['\n', '\r'])[3..], None),
        false => (line, Some("...")),
    };
    let trimmed = text.trim();
    !trimmed.is_empty() && !trimmed.starts_with('#') && Some(trimmed) != end_marker
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_numbered_and_located() {
        let text = "---\n# leading comment\na: 1\n---\n\n---\nb: 2\nc: |\n  --- not a marker\n";
        let chunks = split(text);
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[0].document, chunks[0].line), (1, 1));
        assert_eq!((chunks[1].document, chunks[1].line), (2, 6));
        assert!(chunks[1].text.contains("--- not a marker"));
    }

    #[test]
    fn a_marker_line_with_content_starts_the_next_document() {
        let chunks = split("a: 1\n--- |\n  text\n");
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[1].text, "--- |\n  text\n");
        assert_eq!(chunks[1].line, 2);
    }

    #[test]
    fn a_document_written_on_its_marker_line_is_kept() {
        let chunks =
            split("--- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n--- # only a comment\n---\tb: 1\n");
        assert_eq!(chunks.len(), 2, "{chunks:?}");
        assert_eq!((chunks[0].document, chunks[0].line), (1, 1));
        assert!(chunks[0].text.starts_with("--- {apiVersion"));
        assert_eq!((chunks[1].document, chunks[1].line, chunks[1].text), (2, 3, "---\tb: 1\n"));
        let after = split("a: 1\n--- {kind: NetworkPolicy}\n");
        assert_eq!(after.len(), 2, "a second document on its marker line: {after:?}");
    }

    #[test]
    fn crlf_and_bom_are_handled() {
        let chunks = split("\u{feff}a: 1\r\n---\r\nb: 2\r\n");
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[1].line, 2);
    }
}
