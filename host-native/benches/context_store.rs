//! What a follow-up in a context costs the file store, beside many tasks of
//! other contexts: the context's earlier tasks read (`list` by context, as
//! the server does for conversation memory) and the follow-up saved.
//!
//! `cargo bench -p toolnexus-host-native --bench context_store [-- N]`
//!
//! Stores N (default 10 000) completed tasks, each in its own context, and 3
//! in the context of the follow-up; reopens the store (as a restart does);
//! then times 50 follow-ups and prints the median and the slowest.

use std::time::Instant;
use toolnexus_core::server::{TaskFilter, TaskStore};
use toolnexus_core::{Message, Role, Task, TaskState};
use toolnexus_host_native::store::FileStore;

fn task(id: String, context: String, text: &str) -> Task {
    Task {
        id,
        context_id: context,
        state: TaskState::Completed,
        status_message: None,
        updated_ms: Some(1_764_547_200_000),
        artifacts: Vec::new(),
        history: vec![Message {
            role: Role::User,
            message_id: format!("m-{text}"),
            parts: vec![format!("{text:0<64}").into()],
            context_id: None,
            task_id: None,
        }],
        dialect: toolnexus_core::Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    }
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("toolnexus-bench-ctx-{}", std::process::id()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (store, _) = FileStore::open(&dir).expect("open");
        let filled = Instant::now();
        for i in 0..n {
            let t = task(format!("other-{i:06}"), format!("ctx-{i:06}"), "other");
            store.save(&t).await.expect("save");
        }
        for i in 0..3 {
            let t = task(format!("mine-{i}"), "the-context".into(), "earlier turn");
            store.save(&t).await.expect("save");
        }
        println!(
            "stored {n} unrelated tasks and 3 in the context in {:.1} s",
            filled.elapsed().as_secs_f64()
        );
        drop(store);
        let opened = Instant::now();
        let (store, _) = FileStore::open(&dir).expect("reopen");
        println!("reopened in {:.2} s", opened.elapsed().as_secs_f64());
        let filter = TaskFilter {
            context_id: Some("the-context".into()),
            ..TaskFilter::default()
        };
        let mut times = Vec::new();
        for i in 0..50 {
            let started = Instant::now();
            let earlier = store.list(&filter).await.expect("list").expect("listed");
            assert!(earlier.len() >= 3, "the context's tasks are found");
            let t = task(format!("follow-{i}"), "the-context".into(), "follow-up");
            store.save(&t).await.expect("save");
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "follow-up in a context (list by context + save), {n} unrelated tasks: median {:.2} ms, max {:.2} ms",
            times[times.len() / 2],
            times[times.len() - 1]
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}
