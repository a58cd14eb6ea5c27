//! The termination signals (SIGTERM, SIGINT, SIGHUP): blocked in every thread, taken by one.
//!
//! A process-directed signal lands on any thread that does not block it, and its default
//! action kills the whole daemon, leaving a dead mount. So the binary blocks them first thing,
//! library threads are started with them blocked whoever calls, and one thread waits for them.

/// The set of signals seamfs handles.
fn set() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local value.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

fn mask(how: libc::c_int, set: &libc::sigset_t) -> libc::sigset_t {
    // SAFETY: valid sigsets; pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(how, set, &mut old);
        old
    }
}

/// Blocks the termination signals in this thread and every thread it starts after.
pub fn block() {
    mask(libc::SIG_BLOCK, &set());
}

/// Unblocks them in this thread (a process that will not serve, such as the waiting parent).
pub fn unblock() {
    mask(libc::SIG_UNBLOCK, &set());
}

/// Waits for one of them (blocked beforehand by [`block`]) and returns it.
pub fn wait() -> i32 {
    let set = set();
    let mut sig = 0;
    // SAFETY: valid sigset and out-pointer.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Spawns a thread that starts with the signals blocked, whatever the caller's mask is (a
/// thread inherits its creator's mask, so it never has a window with them open).
pub fn spawn_blocked<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let old = mask(libc::SIG_BLOCK, &set());
    let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
    mask(libc::SIG_SETMASK, &old);
    spawned
}
