//! hwloc: a node's graph read from the XML hwloc writes (`lstopo --of xml`), as Fluxion's
//! hwloc reader builds it (flux-sched `resource/readers/resource_reader_hwloc.cpp`).
//!
//! Fluxion hands the XML to libhwloc 2 (I/O objects kept if important, caches kept only
//! where they bring structure) and walks the loaded topology. We parse the XML ourselves
//! ([`xml`]) and apply the part of libhwloc's loading that decides which objects exist,
//! in which order, with which logical index ([`topology`]):
//!
//! - children in hwloc 2's order: normal objects, then memory (NUMA nodes), then I/O
//!   (bridges, PCI devices, OS devices), then Misc, each in document order;
//! - a 1.x file's NUMA node with children becomes a group holding them, the NUMA node its
//!   memory child (as hwloc 2 imports such files);
//! - a group that is its parent's only child or has at most one child is merged away, its
//!   memory and I/O children going to its parent; a cache level (L2, L1d, …) where every
//!   object has at most one child, or every object is its parent's only child, is removed;
//! - DMA OS devices are dropped (`HWLOC_TYPE_FILTER_KEEP_IMPORTANT`);
//! - a logical index counts the objects of one level left to right (normal objects by
//!   type and depth, NUMA nodes and OS devices across the whole machine).
//!
//! The walk then makes Fluxion's vertices: a root `cluster0`; `Machine` → `node` named by
//! its `HostName` info (id from its trailing digits, rank 0, 1, … per machine); `Group` →
//! `group`, `NUMANode` → `numanode`, `Package` → `socket`, unified or data L1–L3 caches →
//! `cache` named `L<n>cache<id>` of size `cache_size / 1024`, `Core` → `core`, `PU` → `pu`;
//! an OS device of type CoProc, or GPU named `rsmi…`, → `gpu` with the id its name carries
//! (`cuda3`, `rsmi1`, `opencl0d2`); a Block OS device → `storage` of its `Size` info in GB
//! (kB / 10⁶) with a `LinuxDeviceID` property. Every other object is walked through: its
//! children hang from the nearest vertex above. Vertices below a node have rank -1, ids are
//! logical indexes, names are basename + id. The allowlist (resource-query's `-W`) keeps
//! only the types it names (by the names above, caches as `L1cache`…`L3cache`); empty keeps
//! every type.

mod topology;
mod xml;

use std::path::Path;

use crate::error::{Location, ReadError, read_file};
use crate::graph::{CONTAINMENT, GraphBuilder, ResourceGraph, VertexId, VertexSpec};
use crate::hostlist::split_host;
use topology::{Class, Topology};
pub use xml::{HWLOC_DEPTH_MAX, HWLOC_OBJECTS_MAX, HWLOC_XML_BYTES_MAX};

/// Reads hwloc XML into a resource graph keeping the types `allowlist` names (all when it is
/// empty).
pub fn read_hwloc(text: &str, allowlist: &[&str]) -> Result<ResourceGraph, ReadError> {
    let doc = xml::read_document(text)?;
    let topo = Topology::load(&doc)?;
    let mut walk = Walk {
        doc: &doc,
        topo: &topo,
        allowlist,
        builder: GraphBuilder::new(),
        node_rank: -1,
    };
    let cluster = walk
        .builder
        .add_vertex(VertexSpec::new("cluster", "cluster", 0));
    walk.visit(topo.root, cluster)?;
    Ok(walk.builder.finish()?)
}

/// Reads the hwloc XML file at `path`; every error's message starts with the path. A file
/// larger than [`HWLOC_XML_BYTES_MAX`] is refused before it is read.
pub fn read_hwloc_file(
    path: impl AsRef<Path>,
    allowlist: &[&str],
) -> Result<ResourceGraph, ReadError> {
    let path = path.as_ref();
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() > HWLOC_XML_BYTES_MAX as u64
    {
        let what = format!("an hwloc XML of {} bytes", meta.len());
        return Err(ReadError::limit(Location::None, what, HWLOC_XML_BYTES_MAX).in_file(path));
    }
    read_file(path, |text| read_hwloc(text, allowlist))
}

/// Fluxion's `walk_hwloc`: one vertex per supported object, in hwloc's child order.
struct Walk<'a> {
    doc: &'a xml::Document,
    topo: &'a Topology,
    allowlist: &'a [&'a str],
    builder: GraphBuilder,
    /// The rank of the last node made (Fluxion's `m_node_rank`).
    node_rank: i64,
}

impl Walk<'_> {
    fn visit(&mut self, t: usize, parent: VertexId) -> Result<(), ReadError> {
        let here = match self.vertex(t)? {
            Some(spec) => {
                let v = self.builder.add_vertex(spec);
                self.builder.add_edge(parent, v, CONTAINMENT);
                v
            }
            None => parent,
        };
        let topo = self.topo;
        for &child in topo.children_in_order(t) {
            self.visit(child, here)?;
        }
        Ok(())
    }

    fn allowed(&self, kind: &str) -> bool {
        self.allowlist.is_empty() || self.allowlist.contains(&kind)
    }

    /// The vertex object `t` becomes, or `None` when it is walked through.
    fn vertex(&mut self, t: usize) -> Result<Option<VertexSpec>, ReadError> {
        let node = &self.topo.nodes[t];
        let index = node.logical_index;
        let Some(obj) = node.object.and_then(|o| self.doc.objects.get(o)) else {
            // A 1.x NUMA node's group.
            return Ok(self
                .allowed("group")
                .then(|| VertexSpec::new("group", "group", index)));
        };
        let at = Location::Line(obj.line);
        let simple = |kind: &str| VertexSpec::new(kind, kind, index);
        let spec = match node.class {
            Class::Machine => {
                let Some(host) = obj.info("HostName").filter(|_| self.allowed("node")) else {
                    return Ok(None);
                };
                let (basename, id) = match split_host(host) {
                    (base, Some(n)) => {
                        let id = i64::try_from(n).map_err(|_| {
                            ReadError::invalid(at, format!("Error converting node id for {host}"))
                        })?;
                        (base, id)
                    }
                    (base, None) => (base, -1),
                };
                self.node_rank += 1;
                let mut spec = VertexSpec::new("node", basename, id);
                spec.name = Some(host.to_string());
                spec.rank = self.node_rank;
                spec
            }
            Class::Group => simple("group"),
            Class::Numa => simple("numanode"),
            Class::Package => simple("socket"),
            Class::Core => simple("core"),
            Class::Pu => simple("pu"),
            Class::Cache {
                level: level @ 1..=3,
                instruction: false,
            } => {
                let basename = format!("L{level}cache");
                if !self.allowed(&basename) {
                    return Ok(None);
                }
                let bytes: i64 = obj
                    .attr("cache_size")
                    .map_or(Ok(0), str::parse)
                    .map_err(|_| ReadError::invalid(at, "cache_size is not an integer"))?;
                let mut spec = VertexSpec::new("cache", &basename, index);
                spec.size = bytes / 1024;
                return Ok(Some(spec));
            }
            Class::OsDev => return self.os_device(obj, index, at),
            _ => return Ok(None),
        };
        Ok(self.allowed(&spec.kind).then_some(spec))
    }

    /// A GPU or a block storage device, as Fluxion tells them from other OS devices.
    fn os_device(
        &self,
        obj: &xml::Object,
        index: i64,
        at: Location,
    ) -> Result<Option<VertexSpec>, ReadError> {
        let name = obj.attr("name").unwrap_or("");
        let osdev_type = obj.attr("osdev_type").and_then(|t| t.parse::<u32>().ok());
        match osdev_type {
            Some(OSDEV_COPROC) | Some(OSDEV_GPU)
                if osdev_type == Some(OSDEV_COPROC) || name.starts_with("rsmi") =>
            {
                if !self.allowed("gpu") {
                    return Ok(None);
                }
                let id = if let Some(n) = name.strip_prefix("cuda") {
                    atoi(n)
                } else if let Some(n) = name.strip_prefix("rsmi") {
                    atoi(n)
                } else if let Some(n) = name.strip_prefix("opencl") {
                    n.split_once('d').map_or(0, |(_, dev)| atoi(dev))
                } else {
                    index
                };
                Ok(Some(VertexSpec::new("gpu", "gpu", id)))
            }
            Some(OSDEV_BLOCK) => {
                if !self.allowed("storage") {
                    return Ok(None);
                }
                let Some(size) = obj.info("Size") else {
                    let msg = "Error getting the size of block storage device";
                    return Err(ReadError::invalid(at, msg));
                };
                let kilobytes = atoi(size);
                if kilobytes == 0 {
                    let msg = "Error parsing the size of block storage device";
                    return Err(ReadError::invalid(at, msg));
                }
                let mut spec = VertexSpec::new("storage", "storage", index);
                spec.size = kilobytes / 1_000_000;
                let device = obj.info("LinuxDeviceID").unwrap_or("-1");
                spec.properties
                    .insert("LinuxDeviceID".to_string(), device.to_string());
                Ok(Some(spec))
            }
            _ => Ok(None),
        }
    }
}

/// hwloc 2's OS device types, as its XML numbers them.
const OSDEV_BLOCK: u32 = 0;
const OSDEV_GPU: u32 = 1;
const OSDEV_COPROC: u32 = 5;

/// C's `atoi`: leading blanks, a sign, digits; 0 when there are none (or they overflow,
/// which Fluxion's callers treat as an error or never meet).
fn atoi(s: &str) -> i64 {
    crate::jgf::leading_int(s).unwrap_or(0)
}

#[cfg(test)]
mod tests;
