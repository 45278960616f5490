//! How the client follows `NotLeader` hints, against scripted fake replicas
//! speaking the wire protocol (no real node: the answers are chosen here).

use pinax_client::{Client, ClientOptions};
use pinax_common::{ErrorCode, HybridTime, TabletId};
use pinax_proto::{frame, Partition, Request, RequestEnvelope, Response, ResponseEnvelope, RpcError, TabletInfo};
use std::io::{BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A fake replica at a fresh address: `answer(n, request)` answers its `n`-th
/// tablet request (Ping is always answered). Returns its address and how many
/// tablet requests it got.
fn replica(answer: impl Fn(u32) -> Result<Response, RpcError> + Send + Sync + 'static) -> (String, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicU32::new(0));
    let (answer, seen) = (Arc::new(answer), count.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (answer, seen) = (answer.clone(), seen.clone());
            std::thread::spawn(move || serve(stream, &*answer, &seen));
        }
    });
    (addr, count)
}

fn serve(stream: TcpStream, answer: &dyn Fn(u32) -> Result<Response, RpcError>, seen: &AtomicU32) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = BufWriter::new(stream);
    let (mut rbuf, mut wbuf) = (Vec::new(), Vec::new());
    while let Ok(Some(env)) = frame::read_frame::<RequestEnvelope, _>(&mut reader, &mut rbuf) {
        let result = match env.request {
            Request::Ping => Ok(Response::Pong { node_id: 1 }),
            _ => answer(seen.fetch_add(1, Ordering::SeqCst)),
        };
        let resp = ResponseEnvelope { ht: HybridTime::from_micros(1), uncertain: false, result };
        if frame::write_frame(&mut writer, &resp, &mut wbuf).is_err() || writer.flush().is_err() {
            return;
        }
    }
}

fn not_leader(hint: Option<&str>) -> RpcError {
    RpcError::new(ErrorCode::NotLeader, "this replica is not its leader").with_leader(hint.map(str::to_string))
}

/// The leader moved to a replica this client's locations do not list (added since,
/// and handed the leadership to even out the load), and that replica was not
/// ready the first time it was asked (its election, or the hand-over, still on).
/// The known replica keeps naming it: the client follows the hint again (after a
/// backoff) instead of going round the replicas it knows until its wait ends.
#[test]
fn a_leader_on_a_replica_added_since_is_followed_again() {
    let (new_replica, new_seen) = replica(|n| match n {
        0 => Err(not_leader(None)),
        _ => Ok(Response::Value { value: Some(b"v".to_vec()), read_ht: HybridTime::from_micros(1) }),
    });
    let hint = new_replica.clone();
    let (known, known_seen) = replica(move |_| Err(not_leader(Some(&hint))));
    let opts = ClientOptions { leader_wait: Duration::from_secs(3), ..ClientOptions::default() };
    let c = Client::connect_with(&known, opts).unwrap();
    let ti = TabletInfo { id: TabletId(7), partition: Partition::default(), leader: known.clone(), replicas: vec![known.clone()] };
    let t0 = Instant::now();
    let got = c.call_tablet(&ti, Request::Read { tablet: ti.id, key: b"k".to_vec(), at: pinax_proto::ReadPoint::LATEST });
    assert!(matches!(got, Ok(Response::Value { .. })), "{got:?} after {:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(1), "took {:?}", t0.elapsed());
    assert_eq!(new_seen.load(Ordering::SeqCst), 2);
    assert_eq!(known_seen.load(Ordering::SeqCst), 2);
    // The leader learned is used directly next time.
    let again = c.call_tablet(&ti, Request::Read { tablet: ti.id, key: b"k".to_vec(), at: pinax_proto::ReadPoint::LATEST });
    assert!(again.is_ok());
    assert_eq!(known_seen.load(Ordering::SeqCst), 2);
}
