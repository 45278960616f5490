//! Reading PostgreSQL `List`s (the `list_nth` family is inline C, not in the
//! bindings).

use pgrx::pg_sys;

/// Elements of a `List` of pointers (a null list is empty).
///
/// # Safety
/// `l` must be null or a valid pointer list whose elements are `T`s.
pub unsafe fn list_ptrs<T>(l: *mut pg_sys::List) -> Vec<*mut T> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if l.is_null() {
            return Vec::new();
        }
        (0..(*l).length as usize).map(|i| (*(*l).elements.add(i)).ptr_value as *mut T).collect()
    }
}

/// Elements of an integer `List` (a null list is empty).
///
/// # Safety
/// `l` must be null or a valid integer list.
pub unsafe fn list_ints(l: *mut pg_sys::List) -> Vec<i32> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if l.is_null() {
            return Vec::new();
        }
        (0..(*l).length as usize).map(|i| (*(*l).elements.add(i)).int_value).collect()
    }
}

/// Elements of an OID `List` (a null list is empty).
///
/// # Safety
/// `l` must be null or a valid OID list.
pub unsafe fn list_oids(l: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if l.is_null() {
            return Vec::new();
        }
        (0..(*l).length as usize).map(|i| (*(*l).elements.add(i)).oid_value).collect()
    }
}
