//! The file store's index of tasks by context (`contexts/<ctx>/<task>`): a
//! follow-up reads only its context's tasks, whatever else is stored; the
//! index survives a restart and is rebuilt when missing or stale.

mod common;

use common::temp_dir;
use toolnexus_core::server::{TaskFilter, TaskStore};
use toolnexus_core::{Message, Role, Task, TaskState};
use toolnexus_host_native::store::{FileStore, CONTEXTS};

fn task(id: &str, context: &str) -> Task {
    Task {
        id: id.into(),
        context_id: context.into(),
        state: TaskState::Completed,
        status_message: None,
        updated_ms: Some(1_764_547_200_000),
        artifacts: Vec::new(),
        history: vec![Message {
            role: Role::User,
            message_id: format!("m-{id}"),
            parts: vec![format!("turn of {id}").into()],
            context_id: None,
            task_id: None,
        }],
        dialect: toolnexus_core::Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    }
}

async fn ids_in(store: &FileStore, context: &str) -> Vec<String> {
    let filter = TaskFilter {
        context_id: Some(context.into()),
        ..TaskFilter::default()
    };
    let mut ids: Vec<String> = store
        .list(&filter)
        .await
        .expect("list")
        .expect("the file store lists")
        .into_iter()
        .map(|t| t.id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_context_lists_its_own_tasks_among_many_others_across_restarts_and_a_stale_index() {
    let dir = temp_dir("ctx-index");
    let (store, _) = FileStore::open(&dir).expect("open");
    for i in 0..300 {
        store
            .save(&task(&format!("other-{i}"), &format!("ctx-{}", i % 50)))
            .await
            .expect("save");
    }
    for id in ["trip-a", "trip-b", "trip-c"] {
        store.save(&task(id, "trip")).await.expect("save");
    }
    // A later save of the same task keeps one entry.
    store
        .save(&task("trip-a", "trip"))
        .await
        .expect("save again");
    let mine = ["trip-a", "trip-b", "trip-c"];
    assert_eq!(ids_in(&store, "trip").await, mine);
    assert_eq!(ids_in(&store, "ctx-7").await.len(), 6);
    assert!(ids_in(&store, "nobody").await.is_empty());
    // The context is found through its index: one marker per task.
    let index = dir.join(CONTEXTS).join("trip");
    let mut markers: Vec<String> = std::fs::read_dir(&index)
        .expect("the context's index folder")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    markers.sort();
    assert_eq!(markers, mine);
    drop(store);

    // A restart: the same answer.
    let (store, _) = FileStore::open(&dir).expect("reopen");
    assert_eq!(ids_in(&store, "trip").await, mine);
    drop(store);

    // A stale index: a marker a crash lost, the whole index of another
    // context gone (a store from before the index), a marker whose task
    // never reached the disk, one naming another context's task, and a
    // task file that went bad (quarantined on open).
    std::fs::remove_file(index.join("trip-b")).expect("lose a marker");
    std::fs::remove_dir_all(dir.join(CONTEXTS).join("ctx-7")).expect("lose an index");
    std::fs::File::create(index.join("trip-never-saved")).expect("marker");
    std::fs::File::create(index.join("other-1")).expect("marker");
    std::fs::write(dir.join("trip-c.json"), b"{\"id\": \"trip-c\", \"stat").expect("tear");
    let (store, _) = FileStore::open(&dir).expect("reopen a stale store");
    assert_eq!(ids_in(&store, "trip").await, ["trip-a", "trip-b"]);
    assert_eq!(ids_in(&store, "ctx-7").await.len(), 6);
    // Every other context is still whole.
    let mut all = 0;
    for c in 0..50 {
        all += ids_in(&store, &format!("ctx-{c}")).await.len();
    }
    assert_eq!(all, 300);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_context_id_that_cannot_name_a_folder_is_listed_by_reading_every_task() {
    let dir = temp_dir("ctx-long");
    let (store, _) = FileStore::open(&dir).expect("open");
    let long = "c".repeat(300);
    store.save(&task("t-long", &long)).await.expect("save");
    store.save(&task("t-other", "short")).await.expect("save");
    assert_eq!(ids_in(&store, &long).await, ["t-long"]);
    assert_eq!(ids_in(&store, "short").await, ["t-other"]);
    let _ = std::fs::remove_dir_all(&dir);
}
