//! What a request is: the [`Rpc`] trait every request enum implements, naming its response
//! type, the authority it needs and its bounds. The transport (`shardsched-proto`) serves and
//! sends any `Rpc`; nothing here knows about streams or connections.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::identity::Op;
use crate::msg::Refusal;

/// A request type: names its response and the authority it needs.
pub trait Rpc: Serialize + DeserializeOwned + Debug + Send + Sync + 'static {
    /// What the server answers (inside [`Reply`]).
    type Response: Serialize + DeserializeOwned + Debug + Send + Sync + 'static;

    /// A stable name for logs and errors, e.g. `client_shard.submit`.
    fn kind(&self) -> &'static str;

    /// The authority needed; the transport's `serve` refuses peers whose role lacks it.
    fn op(&self) -> Op;

    /// Application-level bounds (beyond the frame size), checked by the transport's `serve` before the
    /// handler runs.
    fn check(&self) -> Result<(), Refusal> {
        Ok(())
    }
}

/// What travels back on a request stream: the answer, or a refusal.
pub type Reply<T> = Result<T, Refusal>;
