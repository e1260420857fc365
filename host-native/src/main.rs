//! The `toolnexus` command line.

mod allocator;
mod cli;

#[global_allocator]
static ALLOCATOR: allocator::PerCommand = allocator::PerCommand;

fn main() {
    let code = cli::main();
    exit_now(code)
}

/// Ends the process once its output is flushed, without the `atexit`
/// handlers `std::process::exit` runs: by then the runtime is shut down and
/// every file written, and those handlers only hand memory back to the OS
/// (mimalloc's collection, one `madvise` per segment) and run the shared
/// libraries' destructors, work a one-shot `toolnexus call` paid for after
/// its result was out.
fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    {
        unsafe extern "C" {
            /// POSIX `_exit(2)`: the process ends now, no `atexit` handlers.
            fn _exit(status: i32) -> !;
        }
        // SAFETY: `_exit` takes any status and never returns; the output
        // above is flushed, and nothing after this point must run.
        unsafe { _exit(code) }
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}
