//! The thread pool the hot loops run on. Its size is the pipeline's
//! `--workers`, settable at run time (rayon's global pool is fixed once
//! built), so one process can run at 1 or N cores and show the scaling.
//!
//! A process forked from one that used the pool (Python's multiprocessing
//! with the "fork" start method) inherits the pool without its threads:
//! work handed to it would wait forever. So the pool records the process
//! that built it, and a forked child builds one of its own, as big.
//!
//! The pool's own lock is taken by the forking thread across the fork
//! (`pthread_atfork`): held by another thread at that moment, it would stay
//! locked in the child for ever, and the child's first encode would wait on it.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::cell::RefCell;
use std::sync::{Arc, Once, RwLock, RwLockWriteGuard};

struct Pool {
    threads: Arc<ThreadPool>,
    pid: u32,
}

static POOL: RwLock<Option<Pool>> = RwLock::new(None);

thread_local! {
    /// The pool's lock, held by the forking thread from just before a fork to
    /// just after it, in the parent and in the child.
    static HELD: RefCell<Option<RwLockWriteGuard<'static, Option<Pool>>>> =
        const { RefCell::new(None) };
}

extern "C" fn before_fork() {
    let guard = POOL.write().unwrap_or_else(|e| e.into_inner());
    HELD.with(|held| *held.borrow_mut() = Some(guard));
}

extern "C" fn after_fork() {
    HELD.with(|held| drop(held.borrow_mut().take()));
}

/// Hold the pool's lock across every fork of this process, from the first use.
fn guard_forks() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        #[cfg(unix)]
        {
            type Handler = Option<extern "C" fn()>;
            extern "C" {
                fn pthread_atfork(prepare: Handler, parent: Handler, child: Handler) -> i32;
            }
            // SAFETY: the handlers only lock and unlock POOL, on the forking thread.
            unsafe {
                pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork));
            }
        }
    });
}

/// The pool, if this process built it (a forked child's is not its own).
fn own(pool: &Option<Pool>) -> Option<&Arc<ThreadPool>> {
    pool.as_ref()
        .filter(|p| p.pid == std::process::id())
        .map(|p| &p.threads)
}

/// Make `threads` the pool's threads, leaking a pool inherited through a
/// fork: dropping it would signal threads that only the parent has, through
/// locks they may have held when the process forked.
fn replace(pool: &mut Option<Pool>, threads: Arc<ThreadPool>) {
    if let Some(old) = pool.take() {
        if old.pid != std::process::id() {
            std::mem::forget(old);
        }
    }
    *pool = Some(Pool {
        threads,
        pid: std::process::id(),
    });
}

fn build(threads: usize) -> Arc<ThreadPool> {
    Arc::new(
        ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tokenmill-{i}"))
            .build()
            .expect("cannot start worker threads"),
    )
}

/// Use `threads` worker threads from now on (0: one per core).
pub fn set_threads(threads: usize) {
    let threads = if threads == 0 {
        default_threads()
    } else {
        threads
    };
    guard_forks();
    let mut pool = POOL.write().unwrap_or_else(|e| e.into_inner());
    if own(&pool).map(|p| p.current_num_threads()) != Some(threads) {
        replace(&mut pool, build(threads));
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run `f` on the pool, so its rayon work uses the configured threads.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    guard_forks();
    let pool = {
        let mut guard = POOL.write().unwrap_or_else(|e| e.into_inner());
        match own(&guard) {
            Some(pool) => pool.clone(),
            None => {
                // A forked child keeps the size its parent set (`--workers`).
                let threads = guard
                    .as_ref()
                    .map_or_else(default_threads, |p| p.threads.current_num_threads());
                let pool = build(threads);
                replace(&mut guard, pool.clone());
                pool
            }
        }
    };
    pool.install(f)
}

/// Run `f(parallel)` on the pool when `parallel`, else on the calling thread
/// (whose caller already keeps the other cores busy).
pub fn install_if<R: Send>(parallel: bool, f: impl FnOnce(bool) -> R + Send) -> R {
    if parallel {
        install(|| f(true))
    } else {
        f(false)
    }
}

/// Make glibc hand freed memory back as it goes, for a process that runs
/// stage after stage. By default glibc raises its trim threshold to twice
/// the largest block it has unmapped (up to 64 MB), and that much can stay
/// resident at the top of its heaps: count and train on 500 MB of C left
/// 20 and 38 MB that `release_memory` did not return, under encode's peak.
/// Fixed at 16 MB, the peak of `tokenmill run` there fell from 530-573 to
/// 505-521 MB (five runs each, the same wall and system time); 1 MB or
/// glibc's 128 KB kept 15 MB less at the peak for 30% more system time.
/// Blocks under 32 MB (the ceiling glibc's own threshold rises to) still
/// come from the heaps: mapping and unmapping every big buffer (glibc's
/// 128 KB start) made encoding 1.2 GB of C 14% slower.
pub fn bound_retained_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        // SAFETY: mallopt only sets malloc's tunables.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20);
            mallopt(M_TRIM_THRESHOLD, 16 << 20);
        }
    }
}

/// Give memory that the hot loops freed back to the operating system: glibc
/// keeps freed blocks in per-thread arenas, which would otherwise inflate
/// the resident size of every later stage in the same process.
pub fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only returns free memory to the OS.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Whether `child` runs to its end in a forked copy of this process within
/// 20 s (a lock left held by the fork makes it wait for ever).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn runs_in_a_fork(child: impl FnOnce()) -> bool {
    extern "C" {
        fn fork() -> i32;
        fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
        fn kill(pid: i32, signal: i32) -> i32;
        fn _exit(status: i32) -> !;
    }
    const WNOHANG: i32 = 1;
    const SIGKILL: i32 = 9;
    // SAFETY: the child runs `child` and exits without unwinding into the
    // test harness; the parent only waits for it.
    unsafe {
        let pid = fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
            _exit(if ran.is_ok() { 0 } else { 1 });
        }
        let mut status = 0;
        for _ in 0..2000 {
            if waitpid(pid, &mut status, WNOHANG) == pid {
                return status == 0;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        kill(pid, SIGKILL);
        waitpid(pid, &mut status, 0);
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_child_forked_while_another_thread_holds_the_pool_lock_builds_its_pool() {
        install(|| ());
        let (locked, wait) = mpsc::channel();
        let holder = std::thread::spawn(move || {
            let _pool = POOL.write().unwrap_or_else(|e| e.into_inner());
            locked.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        wait.recv().unwrap();
        assert!(runs_in_a_fork(|| assert_eq!(install(|| 1 + 1), 2)));
        holder.join().unwrap();
    }
}
