//! PostgreSQL hooks, one file per hook. Previous hooks are saved once in `_PG_init`
//! (`install`) and called in turn.

pub mod executor;
mod maintenance;
pub mod planner;
pub mod relation_info;
pub mod relcache;
pub mod restart;
mod table_options;
mod tablespace;
pub mod utility;
pub mod xact;

/// Install every hook and callback. Called once, from `_PG_init`.
///
/// # Safety
/// Must run in the postmaster while loading shared_preload_libraries.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        utility::install();
        relation_info::install();
        executor::install();
        restart::install();
        xact::install();
        crate::sequence::install();
        planner::install();
        crate::customscan::install();
        relcache::install();
    }
}
