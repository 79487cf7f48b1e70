//! The thread pool the hot loops run on. Its size is the pipeline's
//! `--workers`, settable at run time (rayon's global pool is fixed once
//! built), so one process can run at 1 or N cores and show the scaling.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, RwLock};

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

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
    if pool.as_ref().map(|p| p.current_num_threads()) != Some(threads) {
        *pool = Some(build(threads));
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run `f` on the pool, so its rayon work uses the configured threads.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = {
        let mut guard = POOL.write().unwrap_or_else(|e| e.into_inner());
        guard
            .get_or_insert_with(|| build(default_threads()))
            .clone()
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
