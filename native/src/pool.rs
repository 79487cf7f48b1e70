//! The thread pool the hot loops run on. Its size is the pipeline's
//! `--workers`, settable at run time (rayon's global pool is fixed once
//! built), so one process can run at 1 or N cores and show the scaling.
//!
//! A process forked from one that used the pool (Python's multiprocessing
//! with the "fork" start method) inherits the pool without its threads:
//! work handed to it would wait forever. So the pool records the process
//! that built it, and a forked child builds one of its own, as big.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, RwLock};

struct Pool {
    threads: Arc<ThreadPool>,
    pid: u32,
}

static POOL: RwLock<Option<Pool>> = RwLock::new(None);

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
