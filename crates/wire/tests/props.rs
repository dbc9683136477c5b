//! Property tests: every message survives encode → decode, and no byte string makes a decoder
//! panic or over-allocate.

mod strategy;

use std::fmt::Debug;

use proptest::collection::vec;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shardsched_wire::codec::{decode, encode};
use shardsched_wire::msg::hello::{Hello, HelloReply};
use shardsched_wire::msg::{client_coord, client_shard, coord_shard, shard_coord};
use shardsched_wire::rpc::Reply;
use strategy::*;

fn round_trips<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    value: &T,
) -> Result<(), TestCaseError> {
    let bytes = encode(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: T = decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

/// Decoding must not panic; when it succeeds, the value must re-encode and decode to itself.
fn decodes_safely<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    if let Ok(value) = decode::<T>(bytes) {
        round_trips(&value)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn client_shard_messages_round_trip(req in client_shard_request(), reply in client_shard_reply()) {
        round_trips(&req)?;
        round_trips(&reply)?;
    }

    #[test]
    fn client_coord_messages_round_trip(req in client_coord_request(), reply in client_coord_reply()) {
        round_trips(&req)?;
        round_trips(&reply)?;
    }

    #[test]
    fn shard_coord_messages_round_trip(req in shard_coord_request(), reply in shard_coord_reply()) {
        round_trips(&req)?;
        round_trips(&reply)?;
    }

    #[test]
    fn coord_shard_messages_round_trip(req in coord_shard_request(), reply in coord_shard_reply()) {
        round_trips(&req)?;
        round_trips(&reply)?;
    }

    #[test]
    fn hello_round_trips((hello, reply) in hello()) {
        round_trips(&hello)?;
        round_trips(&reply)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(bytes in vec(any::<u8>(), 0..2048)) {
        decodes_safely::<Hello>(&bytes)?;
        decodes_safely::<HelloReply>(&bytes)?;
        decodes_safely::<client_shard::Request>(&bytes)?;
        decodes_safely::<Reply<client_shard::Response>>(&bytes)?;
        decodes_safely::<client_coord::Request>(&bytes)?;
        decodes_safely::<Reply<client_coord::Response>>(&bytes)?;
        decodes_safely::<shard_coord::Request>(&bytes)?;
        decodes_safely::<Reply<shard_coord::Response>>(&bytes)?;
        decodes_safely::<coord_shard::Request>(&bytes)?;
        decodes_safely::<Reply<coord_shard::Response>>(&bytes)?;
    }

    #[test]
    fn mutated_valid_messages_never_panic_a_decoder(
        req in client_shard_request(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = encode(&req).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (at, value) in flips {
            let i = at.index(bytes.len().max(1));
            if let Some(b) = bytes.get_mut(i) {
                *b = value;
            }
        }
        decodes_safely::<client_shard::Request>(&bytes)?;
    }
}
