//! One entry point for every graph format, for callers that take `-f grug|jgf|rv1exec|spec`.
//!
//! Fluxion's resource-query picks the reader with `-f`; our CLI and shards do the same with
//! [`GraphFormat`], and [`read_graph_file`] names the file in every error.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::error::{ReadError, read_file};
use crate::graph::ResourceGraph;

/// A graph file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphFormat {
    /// Fluxion's GraphML generating recipe ([`read_grug`](crate::read_grug)).
    Grug,
    /// Fluxion's JSON Graph Format ([`read_jgf`](crate::read_jgf)).
    Jgf,
    /// An RFC 20 R document ([`read_rv1exec`](crate::read_rv1exec)).
    Rv1exec,
    /// Our TOML cluster spec ([`read_cluster_spec`](crate::read_cluster_spec)).
    Spec,
}

impl GraphFormat {
    /// Every format, in the order above.
    pub const ALL: [GraphFormat; 4] = [
        GraphFormat::Grug,
        GraphFormat::Jgf,
        GraphFormat::Rv1exec,
        GraphFormat::Spec,
    ];

    /// The name `-f` takes: `grug`, `jgf`, `rv1exec`, `spec`.
    pub fn name(self) -> &'static str {
        match self {
            GraphFormat::Grug => "grug",
            GraphFormat::Jgf => "jgf",
            GraphFormat::Rv1exec => "rv1exec",
            GraphFormat::Spec => "spec",
        }
    }

    /// A guess from a file name: `.graphml` → GRUG, `.toml` → spec, `.json` → JGF (an R
    /// document is JSON too; say `rv1exec` explicitly for one).
    pub fn from_path(path: &Path) -> Option<GraphFormat> {
        match path.extension()?.to_str()? {
            "graphml" | "xml" => Some(GraphFormat::Grug),
            "json" => Some(GraphFormat::Jgf),
            "toml" => Some(GraphFormat::Spec),
            _ => None,
        }
    }
}

impl fmt::Display for GraphFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GraphFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "grug" | "graphml" => Ok(GraphFormat::Grug),
            "jgf" => Ok(GraphFormat::Jgf),
            "rv1exec" => Ok(GraphFormat::Rv1exec),
            "spec" | "toml" => Ok(GraphFormat::Spec),
            _ => Err(format!(
                "unknown graph format {s:?} (expected grug, jgf, rv1exec or spec)"
            )),
        }
    }
}

/// Reads `text` as `format`.
pub fn read_graph(format: GraphFormat, text: &str) -> Result<ResourceGraph, ReadError> {
    match format {
        GraphFormat::Grug => crate::grug::read_grug(text),
        GraphFormat::Jgf => crate::jgf::read_jgf(text),
        GraphFormat::Rv1exec => crate::rv1exec::read_rv1exec(text),
        GraphFormat::Spec => crate::spec::read_cluster_spec(text),
    }
}

/// Reads the file at `path` as `format`; every error's message starts with the path.
pub fn read_graph_file(
    format: GraphFormat,
    path: impl AsRef<Path>,
) -> Result<ResourceGraph, ReadError> {
    read_file(path.as_ref(), |text| read_graph(format, text))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testdata::resource_file;

    #[test]
    fn names_round_trip() {
        for f in GraphFormat::ALL {
            assert_eq!(f.name().parse::<GraphFormat>().unwrap(), f);
        }
        assert!("yaml".parse::<GraphFormat>().is_err());
        assert_eq!(
            GraphFormat::from_path(Path::new("a/tiny.graphml")),
            Some(GraphFormat::Grug)
        );
        assert_eq!(
            GraphFormat::from_path(Path::new("c.toml")),
            Some(GraphFormat::Spec)
        );
        assert_eq!(GraphFormat::from_path(Path::new("README")), None);
    }

    #[test]
    fn dispatches_and_names_files_in_errors() {
        let g = read_graph(GraphFormat::Spec, crate::spec::DEFAULT_CLUSTER_TOML).unwrap();
        assert_eq!(g.name(g.root()), "cluster0");
        let e = read_graph(GraphFormat::Jgf, crate::spec::DEFAULT_CLUSTER_TOML).unwrap_err();
        assert!(
            e.to_string().starts_with("line 1, column 1: invalid JSON"),
            "{e}"
        );
        let Some(path) = resource_file("grugs/tiny.graphml") else {
            return;
        };
        assert_eq!(
            read_graph_file(GraphFormat::Grug, &path).unwrap().len(),
            100
        );
        let e = read_graph_file(GraphFormat::Jgf, &path).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}:1:1: invalid JSON", path.display())),
            "{e}"
        );
        assert_eq!(e.file(), Some(path.display().to_string().as_str()));
        let Some(path) = resource_file("rv1exec/tiny_rv1exec.json") else {
            return;
        };
        assert_eq!(
            read_graph_file(GraphFormat::Rv1exec, &path).unwrap().len(),
            43
        );
    }
}
