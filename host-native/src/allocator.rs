//! The binary's allocator, chosen per command before the first allocation.
//!
//! `serve` and `demo` run servers: mimalloc there (glibc's malloc took about
//! a quarter of a GetTask's instructions, and cross-thread frees go through
//! its arena locks; host-native/benches/get_task_ab.sh measures the
//! difference). A one-shot command (`call`, `tools`, `--version`, ...)
//! allocates little and exits: there mimalloc's start-up cost more than it
//! saves, so those use the system's. Measured on a `toolnexus call` (about
//! 3 ms): its 1 GiB arena is reserved with `MADV_HUGEPAGE`, and each 2 MiB
//! region first touched was a huge-page clear (three per call, ~0.7 ms of
//! CPU); without huge pages, its arena's bitmaps and a fresh page per size
//! class were still ~100 more page faults and ~0.3 ms than the system's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

/// Set once, from `UNDECIDED`, never changed after: every block is freed by
/// the allocator that made it.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Whether the command whose first argument is `first` runs a server.
fn is_server(first: &[u8]) -> bool {
    matches!(first, b"serve" | b"demo")
}

/// Picks the allocator from the process's arguments. glibc calls the
/// functions of `.init_array` with `main`'s arguments before `main` (std
/// reads its own arguments the same way), so this runs before the first
/// allocation of Rust code.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn choose(argc: i32, argv: *const *const std::ffi::c_char, _: *const *const u8) {
    let first = if argc > 1 && !argv.is_null() {
        // SAFETY: glibc passes `main`'s argv: `argc` pointers to C strings.
        unsafe { *argv.add(1) }
    } else {
        std::ptr::null()
    };
    // SAFETY: non-null, `first` is one of those C strings.
    let server =
        !first.is_null() && is_server(unsafe { std::ffi::CStr::from_ptr(first) }.to_bytes());
    let choice = if server { MIMALLOC } else { SYSTEM };
    let _ = CHOICE.compare_exchange(UNDECIDED, choice, Relaxed, Relaxed);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[link_section = ".init_array"]
static CHOOSE: extern "C" fn(i32, *const *const std::ffi::c_char, *const *const u8) = choose;

/// Whether to use mimalloc. Undecided at the first allocation (another
/// platform, or an allocation before `choose`): mimalloc, as before.
#[inline]
fn mimalloc() -> bool {
    match CHOICE.load(Relaxed) {
        MIMALLOC => true,
        SYSTEM => false,
        _ => match CHOICE.compare_exchange(UNDECIDED, MIMALLOC, Relaxed, Relaxed) {
            Ok(_) => true,
            Err(now) => now == MIMALLOC,
        },
    }
}

/// Whether a block of `size` bytes from plain `mi_malloc` is aligned
/// enough: mimalloc aligns every block to 16 bytes (`MI_MAX_ALIGN_SIZE`)
/// but those of 8 bytes or less, which are aligned to 8. The rule std's
/// own `System` applies to `malloc`. The `mimalloc` crate's `GlobalAlloc`
/// always calls `mi_malloc_aligned`, whose checks cost a few instructions
/// per allocation and, past 1 KiB, a slower path of ~200 instructions
/// (several per GetTask: its boxed future, the answer's buffer).
#[inline]
fn plain(align: usize, size: usize) -> bool {
    align <= 16 && align <= size
}

/// mimalloc or the system's allocator, as [`CHOICE`] says.
pub struct PerCommand;

// SAFETY: each method forwards to one allocator, the same one for the whole
// process (CHOICE never changes once set), so a block is always resized and
// freed by the allocator that made it.
unsafe impl GlobalAlloc for PerCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mimalloc() {
            if plain(layout.align(), layout.size()) {
                // SAFETY: `mi_malloc` takes any size; see `plain` for the alignment.
                return libmimalloc_sys::mi_malloc(layout.size()).cast();
            }
            mimalloc::MiMalloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mimalloc() {
            if plain(layout.align(), layout.size()) {
                // SAFETY: as in `alloc`.
                return libmimalloc_sys::mi_zalloc(layout.size()).cast();
            }
            mimalloc::MiMalloc.alloc_zeroed(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mimalloc() {
            mimalloc::MiMalloc.dealloc(ptr, layout)
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if mimalloc() {
            if plain(layout.align(), new_size) {
                // SAFETY: `ptr` is a block of mimalloc's (CHOICE never
                // changes); `mi_realloc` keeps it, or moves it to a block
                // aligned as `plain` says.
                return libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast();
            }
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        } else {
            System.realloc(ptr, layout, new_size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_get_mimalloc_and_one_shot_commands_the_system_allocator() {
        assert!(is_server(b"serve") && is_server(b"demo"));
        for one_shot in [
            &b"call"[..],
            b"tools",
            b"tasks",
            b"card",
            b"--version",
            b"help",
            b"",
        ] {
            assert!(!is_server(one_shot), "{one_shot:?}");
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_choice_is_made_before_main_and_never_changes() {
        // Chosen from this test binary's own first argument (a test filter,
        // or nothing) before the first allocation.
        let first = std::env::args().nth(1).unwrap_or_default();
        let chosen = if is_server(first.as_bytes()) {
            MIMALLOC
        } else {
            SYSTEM
        };
        assert_eq!(CHOICE.load(Relaxed), chosen);
        assert_eq!(mimalloc(), chosen == MIMALLOC);
        let other = if chosen == MIMALLOC {
            c"call"
        } else {
            c"serve"
        };
        let argv = [c"toolnexus".as_ptr(), other.as_ptr()];
        choose(2, argv.as_ptr(), std::ptr::null());
        assert_eq!(CHOICE.load(Relaxed), chosen, "set once");
    }
}
