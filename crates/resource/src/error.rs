//! The one error type of every graph reader, and where in the input it points.
//!
//! An administrator who gets "not an integer" from a 2,000-line recipe needs to know which
//! file, which line and which element; so every reader error carries a [`Location`] in the
//! input's own terms (an XML line, a JSON path such as `graph.nodes[3].metadata.size`, a
//! TOML line and column), and the file name once the error passes through a `*_file`
//! function. The graph-level checks of [`GraphBuilder::finish`](crate::GraphBuilder::finish)
//! (one root, one parent each) come back as [`ReadError::Graph`].

use std::fmt;
use std::path::Path;

use crate::graph::GraphError;

/// The most vertices any reader builds. A recipe with a huge `multi_scale`, an idset such as
/// `0-99999999999` or a hostlist of that size fails with [`ReadError::Limit`] before it
/// allocates, instead of exhausting memory. A built graph holds about 72 bytes a vertex, and a
/// GRUG or spec reader needs little more while it builds (a JGF or R document costs more: its
/// text and parse tree), so this bound is under a gigabyte of graph; real clusters are far
/// below it (a 10,000-node machine with 200 resources a node is 2 million vertices).
pub const GRAPH_VERTICES_MAX: usize = 10_000_000;

/// The deepest a graph's trees may be (the root at depth 0). The walks recurse once a level,
/// about a kilobyte of stack each, so a JGF of a 10,000-level chain overflowed even the main
/// thread's 8 MB stack and killed the process; a shard's threads have less. Real graphs are
/// under 10 levels (cluster, rack, node, socket, core, pu) and hwloc's deepest is
/// [`HWLOC_DEPTH_MAX`](crate::hwloc::HWLOC_DEPTH_MAX); 256 levels stay under 400 KB of stack.
pub const GRAPH_DEPTH_MAX: usize = 256;

/// A place in a reader's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// Nowhere in particular (e.g. the whole document).
    None,
    /// A 1-based line (GraphML).
    Line(usize),
    /// A 1-based line and column (JSON syntax, TOML).
    LineColumn(usize, usize),
    /// A path into a document, e.g. `graph.nodes[3].metadata.size` or `nodes[0].hosts`.
    Path(String),
}

impl Location {
    /// The 1-based line and column of byte `offset` in `text`.
    pub fn of_offset(text: &str, offset: usize) -> Location {
        let offset = offset.min(text.len());
        let before = text.as_bytes().get(..offset).unwrap_or_default();
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Location::LineColumn(line, column)
    }
}

/// Why a graph could not be read. `file` is set by the `*_file` readers.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read. The message includes the cause (it is not also returned
    /// as `source()`, so error chains do not print it twice).
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// The input is malformed or says something the reader cannot build.
    #[error("{}{message}", Place(file, at))]
    Invalid {
        file: Option<String>,
        at: Location,
        message: String,
    },
    /// The input asks for more than a named bound allows.
    #[error("{}{what} would exceed the limit of {limit}", Place(file, at))]
    Limit {
        file: Option<String>,
        at: Location,
        what: String,
        limit: usize,
    },
    /// The vertices and edges were read but do not form a valid resource graph.
    #[error("{}{error}", Place(file, &Location::None))]
    Graph {
        file: Option<String>,
        error: GraphError,
    },
}

impl ReadError {
    /// An [`ReadError::Invalid`] at `at`.
    pub fn invalid(at: Location, message: impl Into<String>) -> Self {
        ReadError::Invalid {
            file: None,
            at,
            message: message.into(),
        }
    }

    /// A [`ReadError::Limit`] at `at`.
    pub fn limit(at: Location, what: impl Into<String>, limit: usize) -> Self {
        ReadError::Limit {
            file: None,
            at,
            what: what.into(),
            limit,
        }
    }

    /// Names the file the input came from (a no-op for [`ReadError::Io`]).
    pub fn in_file(mut self, path: &Path) -> Self {
        let name = path.display().to_string();
        match &mut self {
            ReadError::Io { .. } => {}
            ReadError::Invalid { file, .. }
            | ReadError::Limit { file, .. }
            | ReadError::Graph { file, .. } => *file = Some(name),
        }
        self
    }

    /// The file named in the error, if any.
    pub fn file(&self) -> Option<&str> {
        match self {
            ReadError::Io { path, .. } => Some(path),
            ReadError::Invalid { file, .. }
            | ReadError::Limit { file, .. }
            | ReadError::Graph { file, .. } => file.as_deref(),
        }
    }

    /// Where in the input the error is.
    pub fn location(&self) -> &Location {
        match self {
            ReadError::Invalid { at, .. } | ReadError::Limit { at, .. } => at,
            ReadError::Io { .. } | ReadError::Graph { .. } => &Location::None,
        }
    }
}

impl From<GraphError> for ReadError {
    fn from(source: GraphError) -> Self {
        ReadError::Graph {
            file: None,
            error: source,
        }
    }
}

/// Reads `path` and hands its text to `read`, naming the file in any error.
pub(crate) fn read_file<T>(
    path: &Path,
    read: impl FnOnce(&str) -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.display().to_string(),
        error: source,
    })?;
    read(&text).map_err(|e| e.in_file(path))
}

/// Renders the `file:line: ` prefix of a message.
struct Place<'a>(&'a Option<String>, &'a Location);

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(file), Location::None) => write!(f, "{file}: "),
            (Some(file), Location::Line(l)) => write!(f, "{file}:{l}: "),
            (Some(file), Location::LineColumn(l, c)) => write!(f, "{file}:{l}:{c}: "),
            (Some(file), Location::Path(p)) => write!(f, "{file}: {p}: "),
            (None, Location::None) => Ok(()),
            (None, Location::Line(l)) => write!(f, "line {l}: "),
            (None, Location::LineColumn(l, c)) => write!(f, "line {l}, column {c}: "),
            (None, Location::Path(p)) => write!(f, "{p}: "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_and_place() {
        let e = ReadError::invalid(Location::Line(57), "edge \"rack2node\": bad");
        assert_eq!(e.to_string(), "line 57: edge \"rack2node\": bad");
        let e = e.in_file(Path::new("tiny.graphml"));
        assert_eq!(e.to_string(), "tiny.graphml:57: edge \"rack2node\": bad");
        assert_eq!(e.file(), Some("tiny.graphml"));
        let e = ReadError::invalid(Location::Path("graph.nodes[3]".into()), "x");
        assert_eq!(
            e.in_file(Path::new("a.json")).to_string(),
            "a.json: graph.nodes[3]: x"
        );
        let e = ReadError::from(GraphError::Roots(2)).in_file(Path::new("g"));
        assert!(
            e.to_string()
                .starts_with("g: the containment subsystem has 2 roots")
        );
    }

    #[test]
    fn offsets_become_lines_and_columns() {
        let text = "ab\ncdé\nf";
        assert_eq!(Location::of_offset(text, 0), Location::LineColumn(1, 1));
        assert_eq!(Location::of_offset(text, 3), Location::LineColumn(2, 1));
        assert_eq!(Location::of_offset(text, 7), Location::LineColumn(2, 4));
        assert_eq!(Location::of_offset(text, 999), Location::LineColumn(3, 2));
    }
}
