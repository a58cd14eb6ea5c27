//! The lab's races, shortened: `seam-lab race SCENARIO --json` run as a user would, on real
//! mounts, through the share emulator alone (the control) and through seamfs over it.
//!
//! Every test asserts seamfs's invariants and prints the control's figures beside them. Where the
//! control fails reliably even at these short sizes, the test asserts that too: it proves the
//! race really reaches the failure seamfs is meant to stop. Where it does not, the comment says
//! so and the figure is only printed. The full-size runs (`docs/lab.md`) are the `#[ignore]`d
//! tests at the end: `cargo test --release -p seam-tests --test e2e races::full -- --ignored`.
//!
//! Needs `seam-lab` and `seamfs` built in the same profile (`cargo build --release --workspace`).

use std::process::Command;

use seam_tests::bins;
use seam_tests::run::run;
use serde_json::Value;

/// A finished race: its JSON report.
struct Race {
    args: Vec<String>,
    report: Value,
}

/// Runs `seam-lab race SCENARIO ARGS --json`. Exit 0 (seamfs held) and 5 (seamfs broke an
/// invariant) both carry a report; the assertions below say which invariant and why.
#[track_caller]
fn race(scenario: &str, args: &[&str]) -> Race {
    let mut argv: Vec<String> = vec!["race".into(), scenario.into(), "--json".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let r = run(Command::new(bins::seam_lab()).args(&argv));
    if !matches!(r.code(), Some(0) | Some(5)) {
        panic!("seam-lab race did not run:\n{r}");
    }
    let report: Value =
        serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("seam-lab race printed no JSON report ({e}):\n{r}"));
    let race = Race { args: argv, report };
    race.print();
    race
}

impl Race {
    fn run_of(&self, target: &str) -> &Value {
        let r = &self.report["runs"][target];
        assert!(r.is_object(), "no {target} run in the report of `seam-lab {}`", self.args.join(" "));
        r
    }

    #[track_caller]
    fn value(&self, target: &str, key: &str) -> &Value {
        let v = &self.run_of(target)["figures"][key]["value"];
        assert!(!v.is_null(), "no figure {key} for {target} in the report of `seam-lab {}`", self.args.join(" "));
        v
    }

    #[track_caller]
    fn count(&self, target: &str, key: &str) -> u64 {
        self.value(target, key).as_u64().unwrap_or_else(|| panic!("figure {key} is not a count"))
    }

    #[track_caller]
    fn flag(&self, target: &str, key: &str) -> bool {
        self.value(target, key).as_bool().unwrap_or_else(|| panic!("figure {key} is not a flag"))
    }

    #[track_caller]
    fn landed(&self, target: &str, key: &str) -> (u64, u64) {
        let v = self.value(target, key);
        (v["landed"].as_u64().unwrap_or(0), v["attempted"].as_u64().unwrap_or(0))
    }

    /// Everything seamfs's run noted (refusal samples, the tail of its log on a violation).
    fn notes(&self, target: &str) -> String {
        self.run_of(target)["notes"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// Both runs' figures, one line each, control beside seamfs (visible with --nocapture).
    fn print(&self) {
        eprintln!("seam-lab {}", self.args.join(" "));
        let Some(control) = self.report["runs"]["control"]["figures"].as_object() else { return };
        for (key, f) in control {
            let sfs = &self.report["runs"]["seamfs"]["figures"][key]["value"];
            eprintln!("  {:<44} control {:<28} seamfs {}", key, show(&f["value"]), show(sfs));
        }
    }

    /// Asserts seamfs's invariant counts are 0.
    #[track_caller]
    fn seamfs_zero(&self, keys: &[&str]) {
        for k in keys {
            let n = self.count("seamfs", k);
            assert_eq!(n, 0, "seamfs broke {k} ({n}) in `seam-lab {}`:\n{}", self.args.join(" "), self.notes("seamfs"));
        }
    }

    /// Asserts seamfs's invariant flags hold.
    #[track_caller]
    fn seamfs_holds(&self, keys: &[&str]) {
        for k in keys {
            assert!(self.flag("seamfs", k), "seamfs broke {k} in `seam-lab {}`:\n{}", self.args.join(" "), self.notes("seamfs"));
        }
    }

    /// Asserts the control shows the failure (the race reached it).
    #[track_caller]
    fn control_fails(&self, key: &str) {
        let v = self.value("control", key);
        let failed = v.as_u64().map(|n| n > 0).or_else(|| v.as_bool().map(|b| !b)).unwrap_or(false);
        assert!(
            failed,
            "the control did not show {key} ({v}) in `seam-lab {}`: the race no longer reaches the failure, so it shows nothing about seamfs",
            self.args.join(" ")
        );
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Object(o) => format!("{}/{}", o.get("landed").unwrap_or(&Value::Null), o.get("attempted").unwrap_or(&Value::Null)),
        Value::String(s) => format!("{:?}", s.replace('\n', " | ")),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Shortened races (the whole module stays within a few minutes).

/// Host `git status` every 50 ms while the box commits, the share serving a replaced `index` as
/// missing for up to 1 s: through seamfs nobody sees an emptied index; the control's box reads
/// the index as missing after a pause and commits trees without the seed files (reliably: every
/// pause is a chance, and the host rewrites the index every 50 ms).
#[test]
fn index_poller_under_stale_missing() {
    let r = race("index-poller", &["--ops", "60", "--fault", "stale-missing", "--window", "1000"]);
    r.seamfs_zero(&[
        "emptied_index_host",
        "emptied_index_box",
        "all_deleted_host",
        "all_deleted_box",
        "seed_damaged_views",
        "index_read_errors",
        "files_lost_from_head",
        "fsck_problems",
    ]);
    assert!(r.landed("seamfs", "box_commits").0 > 0, "no box commit landed through seamfs: the race raced nothing");
    r.control_fails("emptied_index_box");
    r.control_fails("files_lost_from_head");
}

/// Host commits every 100 ms while the box commits and resets: no host commit is lost to a stale
/// view through seamfs, no box commit is a root commit. The control loses host commits reliably
/// (the box's stale HEAD rewinds the branch within seconds).
/// Three boxes (three emulator mounts, a seamfs each) and the host polling, every box committing
/// its own files (ADR 0028): with one box id each nothing is lost and no box's status ever stages
/// another box's files; with one id for all (one shared `index-box`, as before box ids) the
/// boxes see each other's staging, reliably within ten commits a box (12-16 of ~33 looks in
/// three runs here). Files lost from HEAD happen there only sometimes: printed, not asserted.
/// Two runs of about 6 s.
#[test]
fn three_boxes_keep_their_own_indexes() {
    let ids = race("index-poller", &["--boxes", "3", "--target", "seamfs", "--ops", "10"]);
    let mut keys = vec!["foreign_index_views".to_string(), "files_lost_from_head".into(), "emptied_index_box".into()];
    keys.extend((0..3).flat_map(|i| [format!("box{i}_commits_lost"), format!("box{i}_foreign_views")]));
    ids.seamfs_zero(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    let (landed, tried) = ids.landed("seamfs", "box_commits");
    assert!(landed > 0 && tried == 30, "no box commit landed ({landed}/{tried}):\n{}", ids.notes("seamfs"));
    let same = race("index-poller", &["--boxes", "3", "--same-box-id", "--target", "seamfs", "--ops", "10"]);
    let foreign = same.count("seamfs", "foreign_index_views");
    assert!(foreign > 0, "three boxes on one index-box never saw each other's staging: the race shows nothing");
    eprintln!("same id: foreign views {foreign}, files lost from HEAD {}", same.count("seamfs", "files_lost_from_head"));
}

#[test]
fn host_commits_vs_box_commits_and_resets() {
    let r = race("host-commits", &["--duration", "15"]);
    r.seamfs_zero(&["host_commits_lost", "box_root_commits", "fsck_problems"]);
    let (landed, attempted) = r.landed("seamfs", "box_ops");
    eprintln!("  seamfs: {landed}/{attempted} box ops landed (the issue aims at 95 %; not asserted here)");
    assert!(landed > 0 && r.landed("seamfs", "host_commits").0 > 0, "one side made no progress through seamfs");
    r.control_fails("host_commits_lost");
}

/// The same race with the host change feed on (seamd `--feed`, seamfs `--feed`, ADR 0021): the
/// feed only makes the work tree fresher, so every invariant holds as without it.
#[test]
fn host_commits_with_the_feed_on() {
    let r = race("host-commits", &["--duration", "10", "--feed"]);
    assert_eq!(r.report["params"]["feed"], "on", "the race did not run with the feed: {}", r.report["params"]);
    r.seamfs_zero(&["host_commits_lost", "box_root_commits", "fsck_problems"]);
    assert!(r.landed("seamfs", "box_ops").0 > 0 && r.landed("seamfs", "host_commits").0 > 0, "one side made no progress through seamfs with the feed");
    r.control_fails("host_commits_lost");
}

/// The box's git killed at random points: through seamfs no lock outlives its dead owner by more
/// than 1 s, and every landed commit stays reachable. On the control about half the kills leave
/// a lock that stays forever (8 of 25 and 98 of 191 in the runs recorded in docs/lab.md), so at
/// 25 attempts it reliably shows at least one.
#[test]
fn kill9_leaves_no_lock() {
    let r = race("kill9", &["--ops", "25", "--seed", "7"]);
    r.seamfs_zero(&["kills_leaving_locks", "locks_at_end", "landed_unreachable", "fsck_problems"]);
    assert!(r.count("seamfs", "kills_holding_locks") > 0, "no kill landed while git held a lock through seamfs: the race tested nothing");
    r.control_fails("kills_leaving_locks");
}

/// Both sides write distinct config keys: none is lost through seamfs. The control loses keys
/// reliably (the box rewrites `config` from a stale copy).
#[test]
fn config_writes_from_both_sides_keep_every_key() {
    let r = race("config", &["--ops", "200"]);
    r.seamfs_zero(&["keys_lost"]);
    r.seamfs_holds(&["core_section_kept"]);
    assert_eq!(r.landed("seamfs", "box_keys").0, 200, "not every box key was written through seamfs");
    r.control_fails("keys_lost");
}

/// The host tags and repacks (`pack-refs --all`, each a new `packed-refs` by rename) while the
/// box lists its tags: through seamfs every listing runs and none misses a tag packed before it
/// started. The control (the emulator's 1 s TTL) lists old generations reliably.
#[test]
fn packed_refs_repacked_by_the_host_read_whole_and_fresh() {
    let r = race("packed-refs", &["--ops", "30", "--host-period-ms", "20"]);
    r.seamfs_zero(&["packed_refs_read_failed", "packed_refs_stale"]);
    let (ran, tried) = r.landed("seamfs", "box_listings");
    assert!(tried >= 5 && ran == tried, "seamfs: {ran} of {tried} box listings succeeded; at least 5 must have run during the repacks");
    r.control_fails("packed_refs_stale");
}

/// Host `pull --rebase --autostash` racing box commits: no work lost through seamfs. The
/// control loses box commits or host lines in some runs and not in others at this length:
/// printed, not asserted. Box commits made while the host's rebase is in progress are refused
/// (they used to land on the rebase's detached HEAD and be lost when it ended).
#[test]
fn autostash_pull_vs_box_commits() {
    let r = race("autostash", &["--duration", "15"]);
    r.seamfs_zero(&["work_lost", "fsck_problems"]);
    assert!(r.landed("seamfs", "box_commits").0 > 0, "no box commit landed through seamfs");
    eprintln!(
        "  control: work lost {}, leftover autostash dirs {}; seamfs: leftover autostash dirs {}, box commits a host abort rewound {}, pulls landed {:?}",
        r.count("control", "work_lost"),
        r.count("control", "leftover_autostash"),
        r.count("seamfs", "leftover_autostash"),
        r.count("seamfs", "box_commits_rewound_by_host_abort"),
        r.landed("seamfs", "host_pulls")
    );
}

/// libgit2 and gitoxide stage and commit in the box: staging leaves the host's shared index
/// byte-identical through seamfs, the host's own staging survives and is in no box commit. On
/// the control both clients write the shared index itself (reliably).
#[test]
fn libgit2_and_gitoxide_in_the_box() {
    let r = race("clients", &[]);
    r.seamfs_holds(&["clients_staged", "shared_index_unchanged", "box_index_has_client_files", "clients_committed", "host_staging_kept"]);
    r.seamfs_zero(&["host_staging_in_box_commits", "box_files_missing", "fsck_problems"]);
    r.control_fails("shared_index_unchanged");
}

/// The host as an IDE (`git add -A` outside `box/` and `git status` every 200 ms, a commit of
/// `host.txt` every second) while the box makes 40 commits: through seamfs no move of the branch
/// takes back a file of the other side (a host commit from a shared index the box's commit left
/// stale would delete or rewind the box's files), each side's commits hold only its own files,
/// and every file is in the final HEAD at its last committed revision. On the control the box's
/// stale view of the branch rewinds it over the host's commits, which takes `host.txt` back
/// (reliably: the box renames the branch and the index itself every ~150 ms, so its entries never
/// expire and it never sees a host commit; 3 to 7 reverting commits in six runs of this size).
/// The control never shows a host commit reverting box files: with one index, the box writes its
/// staging into the shared index before it moves the branch, so that direction is seamfs's alone
/// (its split index); its figure is printed. Through seamfs a box commit has been seen to take a
/// host change back at full size (docs/lab.md, bug 6: 2 of 181 in one run), not in five runs of
/// this size; if this test fails on `reverting_commits` with a note `box commit … took back
/// host.txt`, it is that bug.
#[test]
fn ide_polls_and_commits_vs_box_commits() {
    let r = race("ide", &["--ops", "40"]);
    r.seamfs_zero(&IDE_INVARIANTS);
    assert!(r.landed("seamfs", "box_commits").0 > 0 && r.landed("seamfs", "host_commits").0 > 0, "one side made no progress through seamfs");
    eprintln!(
        "  host commits reverting box files: control {}, seamfs {}",
        r.count("control", "host_reverting_box"),
        r.count("seamfs", "host_reverting_box")
    );
    r.control_fails("reverting_commits");
}

/// The `ide` race's invariants.
const IDE_INVARIANTS: [&str; 6] = [
    "reverting_commits",
    "host_commits_with_box_changes",
    "box_commits_with_host_changes",
    "files_behind_head",
    "host_commits_lost",
    "fsck_problems",
];

/// With the share's faults (a replaced name read old, or missing, for up to 1 s) the same
/// invariants hold through seamfs, and the control still fails (host commits and config keys:
/// reliably; kill9 at 20 attempts: printed).
#[test]
fn fault_windows_hold() {
    for fault in ["stale-old", "stale-missing"] {
        let fault_args = ["--fault", fault, "--window", "1000"];
        let with = |size: &[&'static str]| -> Vec<&'static str> { size.iter().chain(&fault_args).copied().collect() };
        let r = race("host-commits", &with(&["--duration", "8"]));
        r.seamfs_zero(&["host_commits_lost", "box_root_commits", "fsck_problems"]);
        // Zero losses mean something only if both sides' commits landed under the fault.
        let (box_ops, host) = (r.landed("seamfs", "box_commit").0, r.landed("seamfs", "host_commits").0);
        eprintln!("  under {fault}: {box_ops} box commits and {host} host commits landed through seamfs");
        assert!(box_ops > 0 && host > 0, "under {fault} a side landed nothing through seamfs (box {box_ops}, host {host}): the race proves nothing");
        r.control_fails("host_commits_lost");
        let r = race("config", &with(&["--ops", "100"]));
        r.seamfs_zero(&["keys_lost"]);
        let (box_keys, host_keys) = (r.landed("seamfs", "box_keys").0, r.landed("seamfs", "host_keys").0);
        eprintln!("  under {fault}: {box_keys} box and {host_keys} host config keys written through seamfs");
        assert!(box_keys > 0 && host_keys > 0, "under {fault} a side wrote no key through seamfs: the race proves nothing");
        r.control_fails("keys_lost");
    }
}

/// kill -9 of box git under the share's faults: no lock may stay past 1 s. Under `stale-old` a
/// lookup of a lock name replaced moments ago can still show the file it replaced, so the reaper
/// takes the share's directory listing (never cached) as the truth for the dead owner's lock.
/// Seeds 2-9 at 30 kills each left none after 1 s (before: up to 3 of ~15 outlived it).
#[test]
fn kill9_under_faults_leaves_no_lock() {
    for fault in ["stale-old", "stale-missing"] {
        let r = race("kill9", &["--ops", "20", "--fault", fault, "--window", "1000"]);
        r.seamfs_zero(&["kills_leaving_locks", "locks_at_end", "landed_unreachable", "fsck_problems"]);
        // No lock left means something only if some kill landed while git held one.
        let holding = r.count("seamfs", "kills_holding_locks");
        eprintln!("  under {fault}: {holding} of {} kills landed while git held a lock", r.count("seamfs", "kills"));
        assert!(holding > 0, "under {fault} no kill landed while a lock was held: the race proves nothing");
    }
}

// ---------------------------------------------------------------------------------------------
// Full-size runs (minutes each): the figures in docs/lab.md. Run with -- --ignored.

#[test]
#[ignore = "full size: about 4 minutes"]
fn full_index_poller() {
    let r = race("index-poller", &[]);
    r.seamfs_zero(&["emptied_index_host", "emptied_index_box", "all_deleted_host", "all_deleted_box", "seed_damaged_views", "index_read_errors", "files_lost_from_head", "fsck_problems"]);
}

#[test]
#[ignore = "full size: about 2 minutes"]
fn full_host_commits() {
    let r = race("host-commits", &[]);
    r.seamfs_zero(&["host_commits_lost", "box_root_commits", "fsck_problems"]);
    r.control_fails("host_commits_lost");
}

#[test]
#[ignore = "full size: about 6 minutes"]
fn full_kill9() {
    let r = race("kill9", &[]);
    r.seamfs_zero(&["kills_leaving_locks", "locks_at_end", "landed_unreachable", "fsck_problems"]);
    r.control_fails("kills_leaving_locks");
}

#[test]
#[ignore = "full size: about 1 minute"]
fn full_config() {
    let r = race("config", &[]);
    r.seamfs_zero(&["keys_lost"]);
    r.control_fails("keys_lost");
}

#[test]
#[ignore = "full size: about 2 minutes"]
fn full_autostash() {
    let r = race("autostash", &[]);
    r.seamfs_zero(&["work_lost", "fsck_problems"]);
}

/// Bug 6 of docs/lab.md (a box commit took a host change back, 1-2 of ~190 box commits in one of
/// three full-size runs) showed here; fixed by putting the sync point back when the box writes an
/// index it read before a heal.
#[test]
#[ignore = "full size: about 2 minutes"]
fn full_ide() {
    let r = race("ide", &[]);
    r.seamfs_zero(&IDE_INVARIANTS);
    r.control_fails("reverting_commits");
}
