//! Bytes of heap one stored task costs in the memory store.
//!
//! `cargo bench -p toolnexus-host-native --bench task_memory`
//!
//! A counting allocator measures the live heap before and after storing
//! N completed tasks shaped like real ones (UUID ids, a 64-character task, a
//! 160-character answer), then after the store evicts down to its cap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use toolnexus_core::server::TaskStore;
use toolnexus_core::{Artifact, Message, Role, Task, TaskState};
use toolnexus_host_native::MemoryStore;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn task(i: usize) -> Task {
    let id = format!("{:08x}-1f2e-4d3c-8b7a-{:012x}", i, i * 7919);
    let context = format!("{:08x}-aaaa-4bbb-8ccc-{:012x}", i, i * 104_729);
    Task {
        id,
        context_id: context,
        state: TaskState::Completed,
        status_message: None,
        updated_ms: None,
        artifacts: vec![Artifact {
            artifact_id: format!("{:08x}-art0-4000-8000-{:012x}", i, i),
            parts: vec![format!(
                "{:0<160}",
                format!("Answer {i}: the release has three steps; ")
            )
            .into()],
        }],
        history: vec![Message {
            role: Role::User,
            message_id: format!("{:08x}-msg0-4000-8000-{:012x}", i, i),
            parts: vec![format!("{:0<64}", format!("Plan release {i} ")).into()],
            // As the server stores it: the task's ids are not repeated.
            context_id: None,
            task_id: None,
        }],
        dialect: toolnexus_core::Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn main() {
    const N: usize = 100_000;
    let payload: usize = {
        let t = task(1);
        t.id.len()
            + t.context_id.len()
            + t.artifacts[0].parts[0].text().map_or(0, str::len)
            + t.history[0].parts[0].text().map_or(0, str::len)
    };
    let store = MemoryStore::new(N);
    let before = LIVE.load(Ordering::Relaxed);
    for i in 0..N {
        block_on(store.save(&task(i))).expect("save");
    }
    let after = LIVE.load(Ordering::Relaxed);
    let per_task = (after - before) as f64 / N as f64;
    println!("memory store, {N} completed tasks: {per_task:.0} bytes of heap per stored task");
    println!("  (of which text payload: ~{payload} bytes: ids, a 64-char task, a 160-char answer)");

    // Past the cap the oldest finished tasks go; the heap stays put.
    for i in N..2 * N {
        block_on(store.save(&task(i))).expect("save");
    }
    let capped = LIVE.load(Ordering::Relaxed);
    println!(
        "after {} more saves at cap {N}: {} tasks kept, heap {:+.1}% vs full",
        N,
        store.len(),
        (capped as f64 - after as f64) / (after - before) as f64 * 100.0
    );
}
