//! git on either side, from the CLI, never reading or writing the user's global config.

use std::path::Path;
use std::process::Command;

use super::LabError;

/// The lab's identity and settings, before every git command's own arguments.
pub const LAB_GIT_CONFIG: [&str; 10] = [
    "-c", "user.name=seam-lab", "-c", "user.email=lab@seamfs.invalid",
    "-c", "commit.gpgsign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
];

/// The environment every lab git gets: no global or system config, no prompt.
pub const LAB_GIT_ENV: [(&str, &str); 3] = [("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null"), ("GIT_TERMINAL_PROMPT", "0")];

/// A git command in `dir` with the lab's identity and no global or system config.
pub fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir).args(LAB_GIT_CONFIG).envs(LAB_GIT_ENV);
    c.env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE");
    c
}

/// Runs git in `dir`; its trimmed stdout, or an error naming the command and git's stderr.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, LabError> {
    let out = git_cmd(dir).args(args).output().map_err(|e| LabError::new(format!("run git {}", args.join(" ")), dir, e))?;
    if !out.status.success() {
        return Err(LabError::new(
            format!("git {}", args.join(" ")),
            dir,
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A new repository in `dir` (branch `main`) with one commit of `README`.
pub fn init_repo(dir: &Path) -> Result<String, LabError> {
    git(dir, &["init", "-q", "-b", "main"])?;
    write(&dir.join("README"), "seam-lab sample repository\n")?;
    git(dir, &["add", "README"])?;
    git(dir, &["commit", "-q", "-m", "initial"])?;
    git(dir, &["rev-parse", "HEAD"])
}

/// A host commit: appends a line to `host.txt`, commits it, returns the new HEAD.
pub fn host_commit(dir: &Path, n: usize) -> Result<String, LabError> {
    append(&dir.join("host.txt"), &format!("host change {n}\n"))?;
    git(dir, &["add", "host.txt"])?;
    git(dir, &["commit", "-q", "-m", &format!("host commit {n}")])?;
    git(dir, &["rev-parse", "HEAD"])
}

/// Writes a file, naming it on failure.
pub fn write(path: &Path, text: &str) -> Result<(), LabError> {
    std::fs::write(path, text).map_err(|e| LabError::new("write", path, e))
}

/// Appends to a file, naming it on failure.
pub fn append(path: &Path, text: &str) -> Result<(), LabError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| LabError::new("open for append", path, e))?;
    f.write_all(text.as_bytes()).map_err(|e| LabError::new("append", path, e))
}
