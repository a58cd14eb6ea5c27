//! Peak memory of one heal, outside the daemon (issue #16, Deliver 3):
//!
//!   cargo run --release -p seamfs --example heal_peak -- OBJECTS_DIR OLD_INDEX OLD_COMMIT NEW_COMMIT [HINT_INDEX]
//!
//! Prints the process's peak resident set before the heal (the index read) and after it, in
//! MiB: the difference is what the heal added at its peak beyond the index bytes, which it frees
//! once decoded (as seamfs's heals do).

fn peak_kib() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    r.ru_maxrss
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        eprintln!("usage: heal_peak OBJECTS_DIR OLD_INDEX OLD_COMMIT NEW_COMMIT [HINT_INDEX]");
        std::process::exit(2);
    }
    let index = std::fs::read(&a[1]).expect("read the index");
    let hint_path = a.get(4).cloned();
    let hint = move || hint_path.as_ref().and_then(|p| std::fs::File::open(p).ok()).map(seamfs::heal::HintData::File);
    let hints: [seamfs::heal::Hint; 1] = [&hint];
    let opts = seamfs::heal::HealOptions { index_mtime: None, hints: if a.len() > 4 { &hints } else { &[] } };
    let before = peak_kib();
    let t = std::time::Instant::now();
    let out = seamfs::heal::heal_owned(std::path::Path::new(&a[0]), index, &a[2], &a[3], opts).expect("heal");
    let took = t.elapsed();
    let after = peak_kib();
    let what = match &out {
        seamfs::heal::HealOutcome::Healed { bytes, kind } => format!("healed ({kind:?}, {} bytes)", bytes.len()),
        other => format!("{other:?}"),
    };
    println!(
        "{what} in {took:?}; peak RSS before {:.1} MiB, after {:.1} MiB, heal added {:.1} MiB",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after - before) as f64 / 1024.0
    );
}
