//! The transaction trace: with `RUST_LOG=…,pinax_trace=debug`, every request that
//! writes, decides or resolves a transaction's intents is logged with its outcome
//! (target `pinax_trace`), and so is every resolution this node starts itself
//! (the applier, the sweeps). Off by default (a disabled target costs one check
//! per request); the multi-host tests turn it on to follow one transaction
//! across nodes when a check fails.

use pinax_proto::{Request, Response, RpcError, WriteOp};
use std::fmt::Write as _;

/// The trace's target.
pub(crate) const TARGET: &str = "pinax_trace";

/// Whether the trace is on.
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: "pinax_trace", tracing::Level::DEBUG)
}

/// A key, in hex (its first 48 bytes).
fn hex_key(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len().min(48) * 2 + 1);
    for b in key.iter().take(48) {
        let _ = write!(s, "{b:02x}");
    }
    if key.len() > 48 {
        s.push('…');
    }
    s
}

/// A short digest of a value (to tell the versions of a row apart in a trace).
fn digest(value: &[u8]) -> String {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(value);
    format!("#{:08x}", h as u32)
}

fn ops(ops: &[WriteOp]) -> String {
    let mut s = String::new();
    for (i, op) in ops.iter().enumerate().take(16) {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{:?}:{}", op.kind, hex_key(&op.key));
        if !op.value.is_empty() {
            s.push_str(&digest(&op.value));
        }
    }
    if ops.len() > 16 {
        let _ = write!(s, " … ({} ops)", ops.len());
    }
    s
}

/// What a traced request does, or None for a request the trace leaves out.
pub(crate) fn describe(req: &Request) -> Option<String> {
    Some(match req {
        Request::Write { tablet, ops: o, read_ht, txn: Some((txn, seq)), request } => {
            format!("Write tablet={} {txn} seq={seq} read_ht={read_ht:?} request={request:x} [{}]", tablet.0, ops(o))
        }
        Request::WriteIntentIfLive { tablet, op, txn, seq, request } => {
            format!("WriteIntentIfLive tablet={} {txn} seq={seq} request={request:x} [{}]", tablet.0, ops(std::slice::from_ref(op)))
        }
        Request::DeleteAll { tablet, txn, seq, read_ht } => format!("DeleteAll tablet={} {txn} seq={seq} read_ht={read_ht:?}", tablet.0),
        Request::CreateTxnAndWrite { txn, write } => format!("CreateTxnAndWrite {txn} then {}", describe(write).unwrap_or_default()),
        Request::RollbackTxn { tablet, txn, from_seq } => format!("RollbackTxn tablet={} {txn} from_seq={from_seq}", tablet.0),
        Request::ResolveTxn { tablet, txn, commit_ht } => format!("ResolveTxn tablet={} {txn} commit_ht={commit_ht:?}", tablet.0),
        Request::CreateTxn { txn } => format!("CreateTxn {txn}"),
        Request::CommitTxn { txn, participants } => format!("CommitTxn {txn} participants={:?}", participants.iter().map(|p| p.0).collect::<Vec<_>>()),
        Request::AbortTxn { txn, participants } => format!("AbortTxn {txn} participants={:?}", participants.iter().map(|p| p.0).collect::<Vec<_>>()),
        Request::Forwarded(inner) => format!("Forwarded {}", describe(inner)?),
        // Reads of one row (a statement's read before its write): what they saw.
        Request::Read { tablet, key, at } => format!("Read tablet={} {} at={at:?}", tablet.0, hex_key(key)),
        Request::ReadMany { tablet, keys, at } => {
            format!("ReadMany tablet={} [{}] at={at:?}", tablet.0, keys.iter().map(|k| hex_key(k)).collect::<Vec<_>>().join(" "))
        }
        Request::Scan { tablet, spec, at } if spec.point => format!("PointScan tablet={} {} at={at:?}", tablet.0, hex_key(&spec.start)),
        _ => return None,
    })
}

/// A traced request's outcome.
pub(crate) fn outcome(res: &Result<Response, RpcError>) -> String {
    match res {
        Ok(Response::TxnWritten { write }) => format!("TxnWritten({})", outcome(&write.as_ref().map(|r| (**r).clone()).map_err(|e| e.clone()))),
        Ok(Response::Value { value, read_ht }) => format!("Value {} read_ht={read_ht:?}", value.as_deref().map_or("none".to_string(), digest)),
        Ok(Response::Rows { result, read_ht }) => {
            let rows: Vec<String> = result.rows.iter().take(4).map(|(k, v)| format!("{}{}", hex_key(k), digest(v))).collect();
            format!("Rows [{}] read_ht={read_ht:?}", rows.join(" "))
        }
        Ok(r) => {
            let mut s = format!("{r:?}");
            s.truncate(200);
            s
        }
        Err(e) => format!("error {:?}: {}", e.code, e.message),
    }
}
