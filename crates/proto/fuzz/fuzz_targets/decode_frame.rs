#![no_main]
//! Feed arbitrary bytes to the RPC frame decoders: they must return, never panic.
use libfuzzer_sys::fuzz_target;
use pinax_proto::{frame, RequestEnvelope, ResponseEnvelope};

fuzz_target!(|data: &[u8]| {
    let _ = frame::decode_frame::<RequestEnvelope>(data);
    let _ = frame::decode_payload::<RequestEnvelope>(data);
    let _ = frame::decode_payload::<ResponseEnvelope>(data);
    let mut cur = std::io::Cursor::new(data);
    let mut buf = Vec::new();
    let _ = frame::read_frame::<RequestEnvelope, _>(&mut cur, &mut buf);
});
