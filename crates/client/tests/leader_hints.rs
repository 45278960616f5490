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
    replica_seeing(move |n, _| answer(n))
}

/// [`replica`], `answer` also seeing the request.
fn replica_seeing(answer: impl Fn(u32, &Request) -> Result<Response, RpcError> + Send + Sync + 'static) -> (String, Arc<AtomicU32>) {
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

fn serve(stream: TcpStream, answer: &dyn Fn(u32, &Request) -> Result<Response, RpcError>, seen: &AtomicU32) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = BufWriter::new(stream);
    let (mut rbuf, mut wbuf) = (Vec::new(), Vec::new());
    while let Ok(Some(env)) = frame::read_frame::<RequestEnvelope, _>(&mut reader, &mut rbuf) {
        let result = match env.request {
            Request::Ping => Ok(Response::Pong { node_id: 1 }),
            ref r => answer(seen.fetch_add(1, Ordering::SeqCst), r),
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

fn value() -> Result<Response, RpcError> {
    Ok(Response::Value { value: Some(b"v".to_vec()), read_ht: HybridTime::from_micros(1) })
}

/// A replica's node cannot be reached (here: nothing listens; a partition times
/// out instead) while the others still name it as leader (their election not
/// over). The client does not go back to it for each hint, which cost a connect
/// timeout each: it asks the other replicas, and the one that leads answers.
#[test]
fn a_hint_naming_a_node_that_could_not_be_reached_is_not_followed() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let hint = dead.clone();
    let (follower, follower_seen) = replica(move |_| Err(not_leader(Some(&hint))));
    let (leader, leader_seen) = replica(|_| value());
    let opts = ClientOptions { leader_wait: Duration::from_secs(3), ..ClientOptions::default() };
    let c = Client::connect_with(&follower, opts).unwrap();
    let ti =
        TabletInfo { id: TabletId(8), partition: Partition::default(), leader: dead.clone(), replicas: vec![dead.clone(), follower.clone(), leader.clone()] };
    let got = c.call_tablet(&ti, Request::Read { tablet: ti.id, key: b"k".to_vec(), at: pinax_proto::ReadPoint::LATEST });
    assert!(matches!(got, Ok(Response::Value { .. })), "{got:?}");
    assert_eq!(leader_seen.load(Ordering::SeqCst), 1);
    assert_eq!(follower_seen.load(Ordering::SeqCst), 1, "the follower was asked again and again");
}

/// Every replica the client knows denies having the tablet (it moved while they
/// were cached): the client asks the master where it is (`LocateTablet`, here
/// to its seed) and sends the request there, instead of failing the statement.
#[test]
fn a_tablet_no_known_replica_has_is_located_afresh() {
    let (moved_to, moved_seen) = replica(|_| value());
    let to = moved_to.clone();
    let (seed, _) = replica_seeing(move |_, r| match r {
        Request::LocateTablet { tablet } => {
            Ok(Response::Tablet(TabletInfo { id: *tablet, partition: Partition::default(), leader: to.clone(), replicas: vec![to.clone()] }))
        }
        _ => Err(RpcError::new(ErrorCode::TabletNotFound, "tablet 9 is not served by this node")),
    });
    let c = Client::connect_with(&seed, ClientOptions::default()).unwrap();
    let ti = TabletInfo { id: TabletId(9), partition: Partition::default(), leader: seed.clone(), replicas: vec![seed.clone()] };
    let got = c.call_tablet(&ti, Request::Read { tablet: ti.id, key: b"k".to_vec(), at: pinax_proto::ReadPoint::LATEST });
    assert!(matches!(got, Ok(Response::Value { .. })), "{got:?}");
    assert_eq!(moved_seen.load(Ordering::SeqCst), 1);
    // A tablet the master does not know either (a dropped table) fails at once.
    let (gone, _) = replica(|_| Err(RpcError::new(ErrorCode::TabletNotFound, "no such tablet")));
    let c = Client::connect_with(&gone, ClientOptions::default()).unwrap();
    let ti = TabletInfo { id: TabletId(10), partition: Partition::default(), leader: gone.clone(), replicas: vec![gone.clone()] };
    let t0 = Instant::now();
    let got = c.call_tablet(&ti, Request::Read { tablet: ti.id, key: b"k".to_vec(), at: pinax_proto::ReadPoint::LATEST });
    assert!(matches!(&got, Err(e) if e.code() == ErrorCode::TabletNotFound), "{got:?}");
    assert!(t0.elapsed() < Duration::from_secs(1), "took {:?}", t0.elapsed());
}
