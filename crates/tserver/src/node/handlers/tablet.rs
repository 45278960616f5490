//! Reads and writes of one tablet (`Write`, `WriteIfLive`, `WriteIntentIfLive`,
//! `DeleteAll`, `CreateTxnAndWrite`, `Read`, `Scan`, `RollbackTxn`), with the
//! read context (clock uncertainty) and the resolver of other transactions'
//! status they use.

use crate::factory::EngineFactory;
use crate::node::{err, tablet_err, Node};
use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};
use pinax_mvcc::{ReadContext, TxnStatus};
use pinax_proto::{ReadPoint, Request, Response, RpcError, ScanSpec, WriteOp};
use pinax_tablet::Tablet;
use std::sync::Arc;

impl<F: EngineFactory> Node<F> {
    /// Tablet `id`, to serve a request with (counted: splitting by load).
    pub(in crate::node) fn get_tablet(&self, id: TabletId) -> Result<Arc<Tablet<F::Engine>>, RpcError> {
        let t = self.tablet(id).ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} is not served by this node", id.0)))?;
        t.note_request();
        Ok(t)
    }

    fn resolver(&self) -> impl Fn(TxnId, HybridTime) -> pinax_mvcc::Result<TxnStatus> + '_ {
        move |txn, read_ht| self.txn_status(txn, read_ht).map_err(|e| pinax_mvcc::Error::StatusUnavailable { code: e.code, message: e.message })
    }

    fn read_ctx(&self, at: ReadPoint) -> ReadContext {
        let read_ht = if at.read_ht == HybridTime::INVALID { self.clock.now() } else { at.read_ht };
        let ctx = match at.txn {
            Some((txn, seq)) => ReadContext::in_txn(read_ht, txn, seq),
            None => ReadContext::at(read_ht),
        };
        if at.uncertain_from == HybridTime::INVALID {
            return ctx;
        }
        match self.max_clock_skew_micros() {
            0 => ctx,
            skew => ctx.uncertain_until(at.uncertain_from.add_micros(skew)),
        }
    }

    /// The bound on clock skew between this node and any other that reads use
    /// (`--max-clock-skew-ms`): 0 while this node knows no other node (a lone
    /// node's tablets, status records and SQL clients share one clock, so no read
    /// is uncertain).
    fn max_clock_skew_micros(&self) -> u64 {
        if self.directory.read().len() > 1 || !self.cfg.join.is_empty() {
            self.clock.max_skew_micros()
        } else {
            0
        }
    }

    /// Whether reads served here use an uncertainty window (told to clients with
    /// every answer: a SQL node holds back a SELECT's output only when one may
    /// have to run again).
    pub fn reads_uncertain(&self) -> bool {
        self.max_clock_skew_micros() > 0
    }

    /// `Write`: the fast path without `txn`, else the transaction's intents.
    pub(in crate::node) fn write(
        &self,
        tablet: TabletId,
        ops: Vec<WriteOp>,
        read_ht: Option<HybridTime>,
        txn: Option<(TxnId, u32)>,
        request: u128,
    ) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let r = self.resolver();
        match txn {
            None => t.write_fast(request, &ops, read_ht, &r).map(|ht| Response::Written { ht }).map_err(tablet_err),
            Some((txn, seq)) => {
                let read_ht = read_ht.ok_or_else(|| err(ErrorCode::InvalidRequest, "a transactional write needs a read time"))?;
                t.write_intents(request, txn, seq, read_ht, &ops, &r).map(|_| Response::Written { ht: read_ht }).map_err(tablet_err)
            }
        }
    }

    /// `WriteIfLive`.
    pub(in crate::node) fn write_if_live(
        &self,
        tablet: TabletId,
        op: WriteOp,
        read_ht: Option<HybridTime>,
        full: bool,
        request: u128,
    ) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let (ht, outcome) = t.write_if_live(request, &op, read_ht, full, &self.resolver()).map_err(tablet_err)?;
        Ok(Response::WrittenIfLive { ht, outcome })
    }

    /// `WriteIntentIfLive`.
    pub(in crate::node) fn write_intent_if_live(&self, tablet: TabletId, op: WriteOp, txn: TxnId, seq: u32, request: u128) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let outcome = t.write_intent_if_live(request, txn, seq, &op, &self.resolver()).map_err(tablet_err)?;
        Ok(Response::WrittenIfLive { ht: self.clock.now(), outcome })
    }

    /// `DeleteAll`.
    pub(in crate::node) fn delete_all(&self, tablet: TabletId, txn: TxnId, seq: u32, read_ht: HybridTime) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        t.delete_all(txn, seq, read_ht, &self.resolver()).map(|count| Response::DeletedAll { count }).map_err(tablet_err)
    }

    /// `CreateTxnAndWrite`: the transaction's record, then its first write.
    pub(in crate::node) fn create_txn_and_write(&self, txn: TxnId, write: Box<Request>) -> Result<Response, RpcError> {
        if !matches!(&*write, Request::Write { txn: Some((t, _)), .. } | Request::WriteIntentIfLive { txn: t, .. } if *t == txn) {
            return Err(err(ErrorCode::InvalidRequest, "CreateTxnAndWrite carries a write of its own transaction"));
        }
        match self.on_status_tablet(txn, Request::CreateTxn { txn }, true)? {
            Response::TxnCreated { .. } => Ok(Response::TxnWritten { write: self.serve(*write).map(Box::new) }),
            r => Err(err(ErrorCode::Internal, format!("unexpected answer to CreateTxn: {r:?}"))),
        }
    }

    /// `Read`.
    pub(in crate::node) fn read(&self, tablet: TabletId, key: Vec<u8>, at: ReadPoint) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let ctx = self.read_ctx(at);
        let value = t.read(ctx, &key, &self.resolver()).map_err(tablet_err)?;
        Ok(Response::Value { value, read_ht: ctx.read_ht })
    }

    /// `ReadMany`: every key read at one read point (taken once, as for a scan).
    pub(in crate::node) fn read_many(&self, tablet: TabletId, keys: Vec<Vec<u8>>, at: ReadPoint) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let ctx = self.read_ctx(at);
        let resolver = self.resolver();
        let values = keys.iter().map(|key| t.read(ctx, key, &resolver)).collect::<Result<Vec<_>, _>>().map_err(tablet_err)?;
        Ok(Response::Values { values, read_ht: ctx.read_ht })
    }

    /// `Scan`.
    pub(in crate::node) fn scan(&self, tablet: TabletId, spec: ScanSpec, at: ReadPoint) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let ctx = self.read_ctx(at);
        let result = t.scan(ctx, &spec, &self.resolver()).map_err(tablet_err)?;
        Ok(Response::Rows { result, read_ht: ctx.read_ht })
    }

    /// `RollbackTxn`.
    pub(in crate::node) fn rollback_txn(&self, tablet: TabletId, txn: TxnId, from_seq: u32) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        t.rollback_intents(txn, from_seq).map(|_| Response::Done).map_err(tablet_err)
    }
}
