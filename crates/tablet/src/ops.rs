//! Row operations carried by write requests (defined on the wire).

pub use pinax_proto::{WriteOp, WriteOpKind};
