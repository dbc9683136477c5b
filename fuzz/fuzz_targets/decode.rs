//! Arbitrary bytes into the wire's decoders: the frame splitter, then every message type a
//! peer can be sent. Nothing may panic, allocate beyond the frame limit, or fail to
//! re-encode a value it accepted.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shardsched_proto::codec::{decode, encode};
use shardsched_proto::frame::parse_frame;
use shardsched_proto::limits::FRAME_BYTES_MAX;
use shardsched_proto::msg::hello::{Hello, HelloReply};
use shardsched_proto::msg::{client_coord, client_shard, coord_shard, shard_coord};
use shardsched_proto::rpc::Reply;

fn check<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(value) = decode::<T>(bytes) {
        let again = encode(&value).expect("an accepted value re-encodes");
        assert_eq!(decode::<T>(&again).ok(), Some(value));
    }
}

fn all_messages(bytes: &[u8]) {
    check::<Hello>(bytes);
    check::<HelloReply>(bytes);
    check::<client_shard::Request>(bytes);
    check::<Reply<client_shard::Response>>(bytes);
    check::<client_coord::Request>(bytes);
    check::<Reply<client_coord::Response>>(bytes);
    check::<shard_coord::Request>(bytes);
    check::<Reply<shard_coord::Response>>(bytes);
    check::<coord_shard::Request>(bytes);
    check::<Reply<coord_shard::Response>>(bytes);
}

fuzz_target!(|data: &[u8]| {
    // As a stream of frames, the way a server reads a request stream.
    let mut rest = data;
    while let Ok(Some((payload, used))) = parse_frame(rest, FRAME_BYTES_MAX) {
        all_messages(payload);
        rest = &rest[used..];
    }
    // And as a bare payload.
    all_messages(data);
});
