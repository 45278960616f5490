//! The layering rules of CONVENTIONS.md, checked on the crates' manifests:
//! dependencies point downward only.

use std::path::Path;

/// `pinax-*` (and rocksdb) dependencies of a crate's `[dependencies]` section.
fn deps(krate: &str) -> Vec<String> {
    // Cargo sets the variable when it runs the test: the checkout being tested,
    // also when the binary was built from another one sharing the target
    // directory (its compile-time value would name that one).
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let root = Path::new(&dir).join("..").join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_deps = l == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(name) = l.split(['=', ' ', '.']).next() {
                if name.starts_with("pinax-") || name == "rocksdb" {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

fn assert_only(krate: &str, allowed: &[&str]) {
    for d in deps(krate) {
        assert!(allowed.contains(&d.as_str()), "{krate} must not depend on {d} (allowed: {allowed:?})");
    }
}

#[test]
fn dependencies_point_downward() {
    assert_only("common", &[]);
    assert_only("codec", &["pinax-common"]);
    assert_only("proto", &["pinax-common"]);
    assert_only("engine", &[]);
    assert_only("engine-mem", &["pinax-engine"]);
    assert_only("engine-rocks", &["pinax-engine", "rocksdb"]);
    // MVCC decides visibility and knows nothing of the wire: what a request does
    // with the visible rows is the pushdown executor's, above it.
    assert_only("mvcc", &["pinax-common", "pinax-codec", "pinax-engine"]);
    assert_only("pushdown", &["pinax-codec", "pinax-engine", "pinax-mvcc", "pinax-proto"]);
    assert_only("txn", &["pinax-common", "pinax-mvcc"]);
    assert_only("tablet", &["pinax-common", "pinax-codec", "pinax-engine", "pinax-mvcc", "pinax-pushdown", "pinax-txn", "pinax-proto"]);
    assert_only("master", &["pinax-common", "pinax-codec", "pinax-engine", "pinax-proto"]);
    // The SQL layer builds on the client: it must stay free of storage internals.
    assert_only("client", &["pinax-common", "pinax-proto"]);
    // The PostgreSQL extension (its own workspace) sees only the client's world.
    assert_only("../pg/ext", &["pinax-common", "pinax-codec", "pinax-proto", "pinax-client"]);
    assert_eq!(deps("../pg/ext").len(), 4, "the parser must see the extension's dependencies");
    assert!(deps("engine-rocks").contains(&"rocksdb".to_string()), "the parser must see dependencies");
}
