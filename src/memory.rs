//! Handing freed memory back to the system between reconcile cycles.
//!
//! glibc's allocator keeps what a program frees in its arenas for reuse and returns
//! pages to the system only from the top of a heap. A controller that renders and
//! applies a revision every few seconds frees almost everything it allocated for the
//! cycle, yet its resident set crept up by about 0.08 MiB a minute for an hour while
//! its live heap stayed at 3 MB (docs/performance.md, the memory soak): the free pages
//! were scattered below live allocations. `malloc_trim(0)` returns the free pages of
//! every arena, wherever they are. `heap` reads the allocator's own count of live and
//! free bytes, so a long run can tell a leak (live bytes rising) from retention (free
//! bytes rising) without a profiler.

/// Returns the allocator's free pages to the system; whether any were returned. Call
/// it when the process is idle: glibc locks each arena while it walks it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_pages() -> bool {
    // SAFETY: malloc_trim takes no pointers; glibc locks each arena while it trims it,
    // so it is safe alongside allocations on other threads.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Other allocators (musl, macOS, Windows) return memory themselves or offer no such
/// call: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_pages() -> bool {
    false
}

/// What the allocator holds, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heap {
    /// In use by the program: arena chunks plus large mmapped blocks.
    pub allocated: u64,
    /// Free inside the arenas (kept for reuse; `release_free_pages` returns its whole pages).
    pub free: u64,
}

/// The allocator's own count of live and free bytes (glibc `mallinfo2`, over all
/// arenas), or `None` where there is no such count.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn heap() -> Option<Heap> {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value; glibc
    // locks each arena while it sums it.
    let info = unsafe { libc::mallinfo2() };
    Some(Heap { allocated: (info.uordblks + info.hblkhd) as u64, free: info.fordblks as u64 })
}

/// No such count outside glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap() -> Option<Heap> {
    None
}

/// After a cycle its garbage is freed: gives the allocator's free pages back to the
/// system (on a blocking thread; glibc locks each arena while it trims it) and records
/// what the heap holds.
pub async fn hand_back(metrics: &crate::metrics::Metrics) {
    let clock = std::time::Instant::now();
    let released = tokio::task::spawn_blocking(release_free_pages).await;
    tracing::debug!(?released, took = ?clock.elapsed(), "returned free memory to the system");
    if let Some(heap) = heap() {
        metrics.heap_allocated.set(heap.allocated as i64);
        metrics.heap_free.set(heap.free as i64);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn the_heap_count_follows_allocations() {
        // The count covers every arena, so other tests' threads allocate and free in
        // the same window: a large block, and an eighth of it as slack for them.
        const BLOCK: u64 = 64 << 20;
        let before = super::heap().expect("glibc counts its heap").allocated;
        let block = vec![1u8; BLOCK as usize];
        let during = super::heap().expect("glibc counts its heap").allocated;
        assert!(during >= before + BLOCK - BLOCK / 8, "{before} -> {during}");
        drop(block);
        super::release_free_pages();
        let after = super::heap().expect("glibc counts its heap").allocated;
        assert!(after + BLOCK / 2 < during, "{during} -> {after}");
    }
}
