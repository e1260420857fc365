//! The `toolnexus` command line.

mod cli;

/// mimalloc: glibc's malloc took about a quarter of a GetTask's
/// instructions, and cross-thread frees go through its arena locks
/// (host-native/benches/get_task_ab.sh measures the difference).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cli::main());
}
