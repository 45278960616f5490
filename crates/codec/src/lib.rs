//! pinax-codec: THE byte layouts of Pinax — everything persisted or compared as bytes.
//!
//! - [`keys`]: how a tablet lays out MVCC versions and intents in its column families
//!   (escaped user key + descending hybrid time; intent and reverse-index keys), and the
//!   tagged value format. Pinned by golden tests; bump [`FORMAT_VERSION`] on change.
//! - `datum`: memcomparable encoding of SQL values (byte order == SQL order).
//! - `hash`: the 16-bit hash that prefixes hash-sharded row keys.
//! - [`patch`]: row patches (an update of some columns) and the stacks of them a
//!   read answers for the SQL layer to merge.
//! - [`heap_tuple`]: where attribute values are in a stored row (a PostgreSQL heap
//!   tuple), for filters evaluated in the tablets.
//!
//! Invariants: every encoding here is order-preserving where it is used as a key and
//! self-delimiting; every decoder returns `Err` on bad input and never panics.
//! Depends only on `pinax-common`. Layout reference: `docs/key-encoding.md`.

pub mod blob;
pub mod datum;
pub mod error;
pub mod hash;
pub mod heap_tuple;
pub mod keys;
pub mod patch;
pub mod status_record;

pub use datum::{decode_datum, decode_key, encode_datum, encode_key, ColumnOrder, Datum, DatumType, NullsOrder, SortOrder};
pub use error::CodecError;
pub use hash::{encode_hash_prefix, hash16};

/// Version of the on-disk layout defined in this crate. Stored in every tablet's
/// metadata; a tablet written with another version is refused.
pub const FORMAT_VERSION: u32 = 1;
