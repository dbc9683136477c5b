//! Tests of the hwloc reader.
