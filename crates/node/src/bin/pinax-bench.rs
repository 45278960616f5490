//! `pinax-bench`: client-side throughput of a running node (not a test).
//!
//! Measures, against the node at `--addr`:
//! 1. single-row autocommit writes (fast path), one client thread, and `--threads`;
//! 2. 1000-row batches: autocommit batches spanning all tablets (distributed
//!    transactions) and single-tablet batches (fast path);
//! 3. point reads.
//!
//! Prints rows/s and latency percentiles.

use anyhow::Result;
use pinax_client::Client;
use pinax_proto::{Sharding, WriteOp};
use std::time::{Duration, Instant};

fn key(i: u64) -> Vec<u8> {
    let h = ((i.wrapping_mul(0x9E3779B97F4A7C15)) >> 48) as u16;
    let mut k = h.to_be_bytes().to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e6
}

fn report(name: &str, rows: u64, elapsed: Duration, lat: &mut [Duration]) {
    let rps = rows as f64 / elapsed.as_secs_f64();
    if lat.is_empty() {
        println!("{name:<44} {rows:>9} rows {:>8.2} s {rps:>12.0} rows/s", elapsed.as_secs_f64());
    } else {
        println!(
            "{name:<44} {rows:>9} rows {:>8.2} s {rps:>12.0} rows/s  p50 {:>7.0} us  p99 {:>7.0} us",
            elapsed.as_secs_f64(),
            pct(lat, 0.5),
            pct(lat, 0.99)
        );
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let get =
        |name: &str, def: &str| -> String { args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| def.to_string()) };
    let addr = get("--addr", "127.0.0.1:7100");
    let single: u64 = get("--single-rows", "20000").parse()?;
    let batches: u64 = get("--batches", "100").parse()?;
    let threads: u64 = get("--threads", "4").parse()?;
    // `--certs-dir D`: TLS with the node identity in D (a secure node); else plaintext.
    let tls = match args.iter().position(|a| a == "--certs-dir").and_then(|i| args.get(i + 1)) {
        Some(d) => Some(pinax_proto::tls::TlsConfig::node(std::path::Path::new(d))?),
        None => None,
    };
    let c = Client::connect_with(&addr, pinax_client::ClientOptions { tls, ..Default::default() })?;
    let table = format!("bench_{}", std::process::id());
    c.create_table(&table, Sharding::Hash { tablets: 0 })?;
    // Marks where the measured phases start (bench/fsyncs.sh counts per phase).
    println!("# table {table} created");
    let value = vec![0x5Au8; 100];

    // 1. single-row fast path, one thread
    let mut lat = Vec::with_capacity(single as usize);
    let t0 = Instant::now();
    for i in 0..single {
        let s = Instant::now();
        c.write(&table, vec![WriteOp::put(key(i), value.clone())])?;
        lat.push(s.elapsed());
    }
    report("single-row write, 1 thread", single, t0.elapsed(), &mut lat);

    // 1b. single-row fast path, N threads
    let t0 = Instant::now();
    let per = single / threads;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let c = c.clone();
            let table = table.clone();
            let value = value.clone();
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let mut lat = Vec::with_capacity(per as usize);
                for i in 0..per {
                    let s = Instant::now();
                    c.write(&table, vec![WriteOp::put(key(1_000_000 + t * per + i), value.clone())])?;
                    lat.push(s.elapsed());
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.join().map_err(|_| anyhow::anyhow!("bench thread panicked"))??);
    }
    report(&format!("single-row write, {threads} threads"), per * threads, t0.elapsed(), &mut lat);

    // 2. 1000-row batches across all tablets (distributed transaction)
    let mut lat = Vec::new();
    let t0 = Instant::now();
    for b in 0..batches {
        let ops = (0..1000).map(|j| WriteOp::put(key(10_000_000 + b * 1000 + j), value.clone())).collect();
        let s = Instant::now();
        c.write(&table, ops)?;
        lat.push(s.elapsed());
    }
    report("1000-row batch, all tablets (txn)", batches * 1000, t0.elapsed(), &mut lat);

    // 2b. 1000-row batches into one tablet (fast path): keys sharing a hash prefix
    let mut lat = Vec::new();
    let t0 = Instant::now();
    for b in 0..batches {
        let ops = (0..1000u64)
            .map(|j| {
                let mut k = vec![0u8, 1u8];
                k.extend_from_slice(&(20_000_000 + b * 1000 + j).to_be_bytes());
                WriteOp::put(k, value.clone())
            })
            .collect();
        let s = Instant::now();
        c.write(&table, ops)?;
        lat.push(s.elapsed());
    }
    report("1000-row batch, one tablet (fast path)", batches * 1000, t0.elapsed(), &mut lat);

    // 3. point reads
    let mut lat = Vec::with_capacity(single as usize);
    let t0 = Instant::now();
    for i in 0..single {
        let s = Instant::now();
        let v = c.get(&table, &key(i))?;
        anyhow::ensure!(v.is_some(), "row {i} missing");
        lat.push(s.elapsed());
    }
    report("point read, 1 thread", single, t0.elapsed(), &mut lat);
    c.drop_table(&table, false)?;
    Ok(())
}
