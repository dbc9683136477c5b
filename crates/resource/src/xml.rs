//! What the two XML readers (GRUG GraphML and hwloc topologies) share: byte offsets turned
//! into lines for error messages, and a start tag's attributes decoded once.

use quick_xml::XmlVersion;
use quick_xml::events::BytesStart;

use crate::error::{Location, ReadError};

/// A start tag's attributes as `(name, value)`, values unescaped and normalised as XML 1.0
/// says; a malformed attribute is an error at `line`.
pub(crate) fn attributes(
    e: &BytesStart<'_>,
    line: usize,
) -> Result<Vec<(String, String)>, ReadError> {
    let name = e.local_name();
    let name = name.as_ref().to_string();
    let bad = |err: &dyn std::fmt::Display| {
        ReadError::invalid(Location::Line(line), format!("<{name}>: {err}"))
    };
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| bad(&err))?;
        let value = a
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|err| bad(&err))?;
        attrs.push((a.key.as_ref().to_string(), value.into_owned()));
    }
    Ok(attrs)
}

/// Byte offset → 1-based line (shared by the XML readers).
pub(crate) struct LineIndex {
    newlines: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        let newlines = text
            .bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i);
        LineIndex {
            newlines: newlines.collect(),
        }
    }

    pub(crate) fn line(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&nl| nl < offset) + 1
    }
}
