//! One vertex of a JGF document as Fluxion's JGF writers print it (`jgf`, `jgf_shorthand`,
//! the `scheduling` key of `rv1`).

use shardsched_resource::ResourceGraph;

use super::Emitted;
use super::json::Json;

/// One JGF vertex as Fluxion writes it.
pub(super) fn jgf_vertex(
    g: &ResourceGraph,
    e: &Emitted<'_>,
    agfilter: Option<&[(String, String)]>,
) -> Json {
    let v = e.v;
    let mut m = Json::obj();
    let kind = g.kind_str(v);
    m.set("type", Json::Str(kind.to_string()));
    let basename = g.basename(v);
    if basename != kind {
        m.set("basename", Json::Str(basename.to_string()));
    }
    let id = g.id(v);
    if g.name(v) != format!("{basename}{id}") {
        m.set("name", Json::Str(g.name(v).to_string()));
    }
    m.set("id", Json::Int(id));
    m.set("rank", Json::Int(g.rank(v)));
    if let Some(props) = g.properties(v).filter(|p| !p.is_empty()) {
        let mut p = Json::obj();
        for (k, val) in props {
            p.set(k, Json::Str(val.clone()));
        }
        m.set("properties", p);
    }
    if !g.unit(v).is_empty() {
        m.set("unit", Json::Str(g.unit(v).to_string()));
    }
    if e.exclusive {
        m.set("exclusive", Json::Bool(true));
    }
    if e.needs != 1 {
        m.set("size", Json::Int(e.needs));
    }
    let mut paths = Json::obj();
    for (subsystem, path) in g.paths(v) {
        paths.set(subsystem, Json::Str(path));
    }
    m.set("paths", paths);
    if let Some(l) = e.label {
        let mut eph = Json::obj();
        eph.set("label", Json::Str(l.to_string()));
        m.set("ephemeral", eph);
    }
    if let Some(ag) = agfilter.filter(|a| !a.is_empty()) {
        let mut a = Json::obj();
        for (k, val) in ag {
            a.set(k, Json::Str(val.clone()));
        }
        m.set("agfilter", a);
    }
    let mut o = Json::obj();
    o.set("id", Json::Str(g.uniq_id(v).to_string()));
    o.set("metadata", m);
    o
}
