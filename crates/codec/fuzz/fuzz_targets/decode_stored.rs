#![no_main]
//! Feed arbitrary bytes to the decoders of what the storage keeps (version and
//! intent keys, stored values, patches and their stacks, transaction status
//! records, blobs): they must return, never panic.
use libfuzzer_sys::fuzz_target;
use pinax_codec::{blob, keys, patch, status_record};

fuzz_target!(|data: &[u8]| {
    let _ = keys::split_version_key(data);
    let _ = keys::split_intent_key(data);
    let _ = keys::decode_value(data);
    let _ = keys::decode_intent_value(data);
    let _ = patch::decode_patch(data);
    let _ = patch::decode_patch_op(data);
    let _ = patch::decode_patch_intent(data);
    let _ = patch::decode_stack(data);
    let _ = status_record::decode(data);
    if let Some((&kind, rest)) = data.split_first() {
        let _ = blob::decode_blob(kind, rest);
    }
});
