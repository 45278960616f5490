//! Row values: PostgreSQL heap tuple bytes.
//!
//! A row's value in storage is the `HeapTupleHeader` + data of `heap_form_tuple`
//! (header fields that describe MVCC state are meaningless in storage and rewritten
//! when the tuple is handed back). This supports every type, user-defined ones
//! included, and columns added later (a shorter tuple reads missing attributes from
//! the catalog's defaults, as heap does). Values that point into another relation's
//! TOAST are detoasted before storing; compressed inline values are kept as they are.

use pgrx::pg_sys;
use pinax_codec::patch;

const HEAP_XMIN_COMMITTED: u16 = 0x0100;
const HEAP_XMIN_INVALID: u16 = 0x0200;
const HEAP_XMAX_INVALID: u16 = 0x0800;
const VARTAG_INDIRECT: u8 = 1;
const VARTAG_ONDISK: u8 = 18;

/// Make every attribute of `slot` available in `tts_values`/`tts_isnull`.
///
/// # Safety
/// `slot` must be a valid slot.
pub unsafe fn slot_getallattrs(slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let natts = (*(*slot).tts_tupleDescriptor).natts;
        if ((*slot).tts_nvalid as i32) < natts {
            pg_sys::slot_getsomeattrs_int(slot, natts);
        }
    }
}

/// Whether a varlena datum points into TOAST storage elsewhere (on disk or indirect).
///
/// # Safety
/// `p` must be a valid `u8`.
unsafe fn is_external_pointer(p: *const u8) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        // VARATT_IS_1B_E: a 1-byte header of exactly 0x01 (little-endian layout).
        *p == 0x01 && matches!(*p.add(1), VARTAG_ONDISK | VARTAG_INDIRECT)
    }
}

/// The stored bytes of the row in `slot`.
///
/// # Safety
/// `slot` must be a valid slot whose descriptor is the relation's.
pub unsafe fn form_tuple_bytes(slot: *mut pg_sys::TupleTableSlot) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        slot_getallattrs(slot);
        let desc = (*slot).tts_tupleDescriptor;
        let natts = (*desc).natts as usize;
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let isnull = std::slice::from_raw_parts((*slot).tts_isnull, natts);
        let mut vals: Vec<pg_sys::Datum> = values.to_vec();
        for (i, v) in vals.iter_mut().enumerate() {
            let att = (*desc).attrs.as_ptr().add(i);
            if !isnull[i] && (*att).attlen == -1 && !(*att).attisdropped {
                let p = v.cast_mut_ptr::<u8>();
                if is_external_pointer(p) {
                    *v = pg_sys::Datum::from(pg_sys::detoast_external_attr(p.cast()));
                }
            }
        }
        let tup = pg_sys::heap_form_tuple(desc, vals.as_mut_ptr(), isnull.as_ptr() as *mut bool);
        let len = (*tup).t_len as usize;
        let bytes = std::slice::from_raw_parts((*tup).t_data as *const u8, len).to_vec();
        pg_sys::heap_freetuple(tup);
        bytes
    }
}

/// Attribute `i`'s (0-based) `attlen` and alignment in bytes, as the tablets
/// read rows (`pinax_codec::heap_tuple`).
///
/// # Safety
/// `desc` is a valid tuple descriptor with more than `i` attributes.
pub unsafe fn attr_layout(desc: pg_sys::TupleDesc, i: usize) -> (i16, u8) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let a = (*desc).attrs.as_ptr().add(i);
        let align = match (*a).attalign as u8 {
            b's' => 2,
            b'i' => 4,
            b'd' => 8,
            _ => 1,
        };
        ((*a).attlen, align)
    }
}

/// Every attribute's [`attr_layout`].
///
/// # Safety
/// `desc` is a valid tuple descriptor.
pub unsafe fn row_layout(desc: pg_sys::TupleDesc) -> Vec<(i16, u8)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (0..(*desc).natts as usize).map(|i| attr_layout(desc, i)).collect() }
}

/// Put the row `bytes` into `slot` as the version named `tid` of relation `relid`.
/// `own_xid`: the row was written by this transaction (its xmin is the current
/// transaction id, which RI and ON CONFLICT checks test).
///
/// # Safety
/// `slot` must be a valid slot of the relation; `bytes` must come from
/// [`form_tuple_bytes`] for a descriptor compatible with the slot's.
pub unsafe fn store_tuple(
    slot: *mut pg_sys::TupleTableSlot,
    bytes: &[u8],
    tid: pg_sys::ItemPointerData,
    relid: pg_sys::Oid,
    own_xid: Option<pg_sys::TransactionId>,
) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let hdr = std::mem::size_of::<pg_sys::HeapTupleData>();
        let mem = pg_sys::MemoryContextAlloc((*slot).tts_mcxt, hdr + bytes.len()) as *mut u8;
        let tup = mem as pg_sys::HeapTuple;
        let data = mem.add(hdr) as pg_sys::HeapTupleHeader;
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data as *mut u8, bytes.len());
        (*tup).t_len = bytes.len() as u32;
        (*tup).t_self = tid;
        (*tup).t_tableOid = relid;
        (*tup).t_data = data;
        let heap = &mut (*data).t_choice.t_heap;
        heap.t_xmax = pg_sys::InvalidTransactionId;
        heap.t_field3.t_cid = 0;
        (*data).t_infomask &= !(HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID);
        match own_xid {
            Some(x) => {
                heap.t_xmin = x;
                (*data).t_infomask |= HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID;
            }
            None => {
                heap.t_xmin = pg_sys::FrozenTransactionId;
                (*data).t_infomask |= HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_INVALID;
            }
        }
        (*data).t_ctid = tid;
        pg_sys::ExecForceStoreHeapTuple(tup, slot, true);
        (*slot).tts_tid = tid;
        (*slot).tts_tableOid = relid;
    }
}

/// A stored row as PostgreSQL reads it: a stack (an update's patches over the
/// row, `pinax_codec::patch`, as the tablets answer a row whose newest versions
/// change only some columns) is merged for descriptor `desc`: each patch's
/// changed attributes, oldest patch first, over the full row. Any other value is
/// returned as it is.
///
/// # Safety
/// `desc` must be the descriptor of the relation the row belongs to.
pub unsafe fn merged(desc: pg_sys::TupleDesc, value: Vec<u8>) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !patch::is_stack(&value) {
            return value;
        }
        let stack = match patch::decode_stack(&value) {
            Ok(s) => s,
            Err(e) => crate::error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, format!("pinax: malformed row patches: {e}"), None),
        };
        let natts = (*desc).natts as usize;
        let load = |bytes: &[u8]| {
            let slot = pg_sys::MakeSingleTupleTableSlot(desc, &raw const pg_sys::TTSOpsHeapTuple);
            store_tuple(slot, bytes, pg_sys::ItemPointerData::default(), pg_sys::InvalidOid, None);
            slot_getallattrs(slot);
            slot
        };
        let base = load(stack.base);
        let mut values = std::slice::from_raw_parts((*base).tts_values, natts).to_vec();
        let mut nulls = std::slice::from_raw_parts((*base).tts_isnull, natts).to_vec();
        let mut slots = vec![base];
        for (cols, row) in stack.patches.iter().rev() {
            let s = load(row);
            for &c in cols.iter().filter(|&&c| (c as usize) <= natts) {
                let i = c as usize - 1;
                values[i] = *(*s).tts_values.add(i);
                nulls[i] = *(*s).tts_isnull.add(i);
            }
            slots.push(s);
        }
        let tup = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        let bytes = std::slice::from_raw_parts((*tup).t_data as *const u8, (*tup).t_len as usize).to_vec();
        pg_sys::heap_freetuple(tup);
        for s in slots {
            pg_sys::ExecDropSingleTupleTableSlot(s);
        }
        bytes
    }
}
