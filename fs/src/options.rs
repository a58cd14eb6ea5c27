//! The mount options, one table: each `-o` option of `mount -t fuse.seamfs` (and `seamfs mount
//! -o`) is one `seamfs mount` flag and, where it makes sense in a file, one `seamfs.toml` key.
//!
//! `-o` options are turned into the flags they name and parsed by the same CLI, so the three
//! spellings cannot drift apart. mount(8)'s own options (`rw`, `noauto`, `nofail`, `x-*`...)
//! are passed to every helper and mean nothing to seamfs: they are accepted and dropped.

use std::ffi::OsString;
use std::path::Path;

use crate::mount::MountError;

/// One option in its three spellings.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// `-o` name (`ttl`, `no_index_split`).
    pub name: &'static str,
    /// The `seamfs mount` flag.
    pub flag: &'static str,
    /// The `seamfs.toml` line, if any.
    pub toml: Option<&'static str>,
    /// True when it takes a value (`ttl=1`).
    pub value: bool,
}

/// Every seamfs mount option. README's option table lists the same rows.
pub const OPTIONS: &[Opt] = &[
    Opt { name: "ttl", flag: "--ttl", toml: Some("ttl = S"), value: true },
    Opt { name: "log", flag: "--log", toml: Some("log = \"FILE\""), value: true },
    Opt { name: "no_index_split", flag: "--no-index-split", toml: Some("index_split = false"), value: false },
    Opt { name: "no_park", flag: "--no-park", toml: Some("park = false"), value: false },
    Opt { name: "no_passthrough", flag: "--no-passthrough", toml: Some("passthrough = false"), value: false },
    Opt { name: "lock_wait_ms", flag: "--lock-wait-ms", toml: Some("lock_wait_ms = MS"), value: true },
    Opt { name: "shared_index_wait_ms", flag: "--shared-index-wait-ms", toml: Some("shared_index_wait_ms = MS"), value: true },
    Opt { name: "threads", flag: "--threads", toml: Some("threads = N"), value: true },
    Opt { name: "feed", flag: "--feed", toml: Some("feed = \"ADDR\""), value: true },
    Opt { name: "box_id", flag: "--box-id", toml: Some("box_id = \"ID\""), value: true },
    Opt { name: "config", flag: "--config", toml: None, value: true },
    Opt { name: "over", flag: "--over", toml: None, value: false },
];

/// mount(8)'s options that every helper is given and seamfs has no use for.
fn generic(o: &str) -> bool {
    matches!(o, "rw" | "defaults" | "auto" | "noauto" | "nofail" | "_netdev" | "dev" | "suid" | "exec" | "relatime")
        || o.starts_with("x-")
        || o.starts_with("comment=")
}

/// `-o a,b=c` as flags, and whether `over` was among them. `sloppy` (mount -s) drops unknown
/// options instead of refusing them.
pub fn expand(opts: &str, sloppy: bool, target: &Path) -> Result<(Vec<OsString>, bool), MountError> {
    let mut flags = Vec::new();
    let mut over = false;
    for o in opts.split(',').filter(|o| !o.is_empty()) {
        let (name, val) = match o.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (o, None),
        };
        let Some(opt) = OPTIONS.iter().find(|x| x.name == name) else {
            if generic(o) || sloppy {
                continue;
            }
            let known: Vec<&str> = OPTIONS.iter().map(|x| x.name).collect();
            return Err(MountError::usage("parse -o", target, format!("unknown option `{o}` (seamfs knows {})", known.join(", "))));
        };
        match (opt.value, val) {
            (true, Some(v)) => flags.extend([OsString::from(opt.flag), OsString::from(v)]),
            (false, None) if opt.name == "over" => over = true,
            (false, None) => flags.push(opt.flag.into()),
            (true, None) => return Err(MountError::usage("parse -o", target, format!("`{name}` needs a value: `{name}=...`"))),
            (false, Some(_)) => return Err(MountError::usage("parse -o", target, format!("`{name}` takes no value"))),
        }
    }
    Ok((flags, over))
}

/// A mount(8) helper call, `mount.fuse.seamfs SOURCE TARGET [-sfnv] [-o OPTS] [-t TYPE]`,
/// as `seamfs` arguments; None for a fake mount (`-f`: check everything, mount nothing).
pub fn helper_argv(args: &[OsString]) -> Result<Option<Vec<OsString>>, MountError> {
    let here = Path::new("mount.seamfs");
    let usage = |why: &str| MountError::usage("parse arguments of", here, format!("{why}: usage: mount.seamfs SOURCE TARGET [-sfnv] [-o opt[,opt...]]"));
    let (mut pos, mut opts, mut sloppy, mut fake) = (Vec::new(), String::new(), false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("-o") => {
                let v = it.next().ok_or_else(|| usage("-o needs options"))?;
                opts.push(',');
                opts.push_str(&v.to_string_lossy());
            }
            Some(s) if s.starts_with("-o") => {
                opts.push(',');
                opts.push_str(&s[2..]);
            }
            // mount(8) names the type when it runs the generic helper; it can only be ours.
            Some("-t") => drop(it.next()),
            Some(s) if s.starts_with('-') && s.len() > 1 && s[1..].chars().all(|c| "sfnvw".contains(c)) => {
                sloppy |= s.contains('s');
                fake |= s.contains('f');
            }
            Some(s) if s.starts_with('-') => return Err(usage(&format!("unknown flag {s}"))),
            _ => pos.push(a.clone()),
        }
    }
    let [source, target] = <[OsString; 2]>::try_from(pos).map_err(|_| usage("expected SOURCE and TARGET"))?;
    let (flags, over) = expand(&opts, sloppy, Path::new(&target))?;
    let mut argv: Vec<OsString> = vec!["mount".into()];
    if over {
        let same = crate::mountinfo::absolute(Path::new(&source)) == crate::mountinfo::absolute(Path::new(&target));
        if !same {
            return Err(MountError::usage("parse -o", Path::new(&target), "`over` mounts a directory over itself: SOURCE and TARGET must be the same path"));
        }
        argv.extend(["--over".into(), target]);
    } else {
        argv.extend([source, target]);
    }
    argv.extend(flags);
    Ok((!fake).then_some(argv))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn helper_argv_maps_options_to_flags() {
        let a = helper_argv(&os(&["/share", "/mnt", "-o", "rw,noauto,ttl=0.5,no_index_split,lock_wait_ms=300,x-systemd.after=a,box_id=b2"]))
            .unwrap()
            .unwrap();
        assert_eq!(a, os(&["mount", "/share", "/mnt", "--ttl", "0.5", "--no-index-split", "--lock-wait-ms", "300", "--box-id", "b2"]));
        let o = helper_argv(&os(&["/w", "/w", "-n", "-o", "over,log=/var/log/s.log"])).unwrap().unwrap();
        assert_eq!(o, os(&["mount", "--over", "/w", "--log", "/var/log/s.log"]));
        assert!(helper_argv(&os(&["/a", "/b", "-f"])).unwrap().is_none());
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert!(helper_argv(&os(&["/a", "/b", "-o", "bogus"])).is_err());
        assert!(helper_argv(&os(&["/a", "/b", "-s", "-o", "bogus"])).unwrap().is_some());
        assert!(helper_argv(&os(&["/a", "/b", "-o", "ttl"])).is_err());
        assert!(helper_argv(&os(&["/a", "/b", "-o", "over"])).is_err());
        assert!(helper_argv(&os(&["/a"])).is_err());
    }
}
