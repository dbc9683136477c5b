//! The hwloc reader on two of flux-sched's topologies (tests/data/hwloc, with Fluxion's
//! answers from its t3026 expectations) and on small hand-written ones.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::graph::ResourceGraph;

const CATALYST: &str = include_str!("../../../../tests/data/hwloc/catalyst.xml");
const CORONA: &str = include_str!("../../../../tests/data/hwloc/corona.xml");

/// The names of `v`'s children, in order.
fn children(g: &ResourceGraph, v: VertexId) -> Vec<String> {
    g.children(v)
        .iter()
        .map(|&c| g.name(VertexId(c)).to_string())
        .collect()
}

fn find(g: &ResourceGraph, path: &str) -> VertexId {
    g.find_path(path).unwrap_or_else(|| panic!("no {path}"))
}

#[test]
fn catalyst_disks_follow_the_network_devices_in_the_os_device_numbering() {
    let g = read_hwloc(CATALYST, &["node", "socket", "core", "gpu", "storage"]).unwrap();
    let node = find(&g, "/cluster0/catalyst321");
    assert_eq!(
        (g.kind_str(node), g.id(node), g.rank(node)),
        ("node", 321, 0)
    );
    assert_eq!(g.basename(node), "catalyst");
    assert_eq!(children(&g, node), ["socket0", "socket1"]);
    let s1 = find(&g, "/cluster0/catalyst321/socket1");
    let names = children(&g, s1);
    // Cores are numbered across the machine; eno1-4, hsi0 and qib0 are OS devices 0-5.
    assert_eq!(names[0], "core12");
    assert_eq!(names[11], "core23");
    assert_eq!(
        names[12..],
        ["storage6", "storage7", "storage8", "storage9"]
    );
    let disk = find(&g, "/cluster0/catalyst321/socket1/storage7");
    assert_eq!(g.size(disk), 195, "195360984 kB in GB");
    assert_eq!(g.rank(disk), -1);
    let props = g.properties(disk).unwrap();
    assert_eq!(props.get("LinuxDeviceID").map(String::as_str), Some("8:16"));
    assert_eq!(g.len(), 1 + 1 + 2 + 24 + 4);
}

#[test]
fn corona_io_of_a_numa_group_comes_between_its_cores_and_the_next_groups() {
    let g = read_hwloc(CORONA, &["node", "socket", "core", "storage"]).unwrap();
    let s0 = find(&g, "/cluster0/corona116/socket0");
    let names = children(&g, s0);
    assert_eq!(names.len(), 25);
    assert_eq!(names[5..8], ["core5", "storage0", "core6"]);
    let disk = find(&g, "/cluster0/corona116/socket0/storage0");
    assert_eq!(g.size(disk), 1562);
    let s1 = find(&g, "/cluster0/corona116/socket1");
    assert_eq!(children(&g, s1)[0], "core24");
}

#[test]
fn without_an_allowlist_every_supported_level_is_a_vertex() {
    let g = read_hwloc(CORONA, &[]).unwrap();
    // socket → NUMA group → L3 (3 cores each) → core → 2 PUs; L2/L1 (one core each) and the
    // groups identical to their NUMA node are gone.
    let l3 = find(&g, "/cluster0/corona116/socket0/group0/L3cache0");
    assert_eq!(g.size(l3), 8192, "8 MiB in KiB");
    assert_eq!(children(&g, l3), ["core0", "core1", "core2"]);
    assert_eq!(
        children(
            &g,
            find(&g, "/cluster0/corona116/socket0/group0/L3cache0/core0")
        ),
        ["pu0", "pu1"]
    );
    // The NUMA node is the group's memory child: after its caches, before its I/O.
    let group = find(&g, "/cluster0/corona116/socket0/group0");
    assert_eq!(
        children(&g, group),
        ["L3cache0", "L3cache1", "numanode0", "storage0"]
    );
    assert_eq!(
        g.vertices()
            .filter(|&v| g.kind_str(v) == "numanode")
            .count(),
        8
    );
}

/// A small hwloc 2 topology: NUMA nodes as memory children, a GPU and a DMA engine.
const V2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x3" nodeset="0x1">
    <info name="HostName" value="tiny"/>
    <object type="Package" os_index="0" cpuset="0x3" nodeset="0x1">
      <object type="NUMANode" os_index="0" cpuset="0x3" nodeset="0x1" local_memory="1000"/>
      <object type="L2Cache" cpuset="0x3" cache_size="1048576" depth="2" cache_type="0">
        <object type="Core" os_index="0" cpuset="0x1"><object type="PU" os_index="0" cpuset="0x1"/></object>
        <object type="Core" os_index="1" cpuset="0x2"><object type="PU" os_index="1" cpuset="0x2"/></object>
      </object>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">
        <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:1db1] [10de:1212] a1">
          <object type="OSDev" name="dma0chan0" osdev_type="4"/>
          <object type="OSDev" name="cuda3" osdev_type="5"/>
          <object type="OSDev" name="sda" osdev_type="0"><info name="Size" value="2000000"/></object>
        </object>
      </object>
    </object>
  </object>
</topology>"#;

#[test]
fn hwloc2_files_keep_their_memory_children_and_drop_dma_devices() {
    let g = read_hwloc(V2, &[]).unwrap();
    let node = find(&g, "/cluster0/tiny");
    assert_eq!(g.id(node), -1, "a host name without digits");
    let pkg = find(&g, "/cluster0/tiny/socket0");
    // The L2 is its package's only child: its level brings no structure and goes. The DMA
    // engine is dropped, so the GPU is OS device 0 (named by its own number) and the disk 1.
    assert_eq!(
        children(&g, pkg),
        ["core0", "core1", "numanode0", "gpu3", "storage1"]
    );
    let disk = find(&g, "/cluster0/tiny/socket0/storage1");
    assert_eq!(g.size(disk), 2);
    assert_eq!(
        g.properties(disk)
            .unwrap()
            .get("LinuxDeviceID")
            .map(String::as_str),
        Some("-1")
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let err = |text: &str| read_hwloc(text, &[]).unwrap_err().to_string();
    assert!(
        err("<graphml/>").contains("expected <topology>"),
        "{}",
        err("<graphml/>")
    );
    assert!(err("<topology></topology>").contains("no <topology> with a root <object>"));
    let e = err("<topology><object type=\"Machine\"><object type=\"Gizmo\"/></object></topology>");
    assert!(
        e.starts_with("line 1: unknown hwloc object type \"Gizmo\""),
        "{e}"
    );
    let e = err("<topology><object type=\"Machine\"><object></object></object></topology>");
    assert!(e.contains("<object> has no type"), "{e}");
    let e = err("<topology><object type=\"Machine\">");
    assert!(e.contains("not closed"), "{e}");
    let no_size = V2.replace("<info name=\"Size\" value=\"2000000\"/>", "");
    let e = read_hwloc(&no_size, &["storage"]).unwrap_err().to_string();
    assert!(
        e.contains("Error getting the size of block storage device"),
        "{e}"
    );
}

#[test]
fn bounds_are_checked_before_anything_grows() {
    let deep = format!(
        "<topology>{}{}</topology>",
        "<object type=\"Group\">".repeat(HWLOC_DEPTH_MAX + 1),
        "</object>".repeat(HWLOC_DEPTH_MAX + 1)
    );
    let e = read_hwloc(&deep, &[]).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "element nesting would exceed the limit of {HWLOC_DEPTH_MAX}"
        )),
        "{e}"
    );
    let big = " ".repeat(HWLOC_XML_BYTES_MAX + 1);
    let e = read_hwloc(&big, &[]).unwrap_err().to_string();
    assert!(e.contains("would exceed the limit"), "{e}");
}

#[test]
fn atoi_reads_like_c() {
    assert_eq!(atoi("  42abc"), 42);
    assert_eq!(atoi("-7"), -7);
    assert_eq!(atoi("x1"), 0);
    assert_eq!(
        atoi("99999999999999999999999"),
        0,
        "overflow reads as nothing"
    );
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let _ = read_hwloc(&String::from_utf8_lossy(&bytes), &[]);
    }

    #[test]
    fn damaged_topologies_never_panic(cut in 0usize..2000, at in 0usize..2000, junk in "[<>/=\"a-zA-Z0-9 &;]{0,8}") {
        let mut text = V2.to_string();
        let at = at.min(text.len());
        let cut = (at + cut % 40).min(text.len());
        if text.is_char_boundary(at) && text.is_char_boundary(cut) {
            text.replace_range(at..cut, &junk);
        }
        let _ = read_hwloc(&text, &[]);
        let _ = read_hwloc(&text, &["node", "storage", "gpu"]);
    }
}
