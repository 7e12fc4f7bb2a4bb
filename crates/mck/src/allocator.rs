//! glibc's allocator, set for reading a stream.
//!
//! The native fetch path reads answers of a few MiB and copies their records into
//! batches of similar size; while the program writes, up to the byte budget of them
//! are held at once, then let go. With glibc's defaults the threshold for mapping an
//! allocation on its own follows the largest one freed and the heap is given back
//! above twice that, so these buffers went back to the kernel and came again as fresh
//! pages: `mck consume --format json` took twice the page faults of `--format value`
//! (about 50 000 against 23 000 for 5 M records of 100 B) and about 7 % more CPU for
//! them. Fixed thresholds keep that memory for the next answers; what is kept is
//! bounded by the budget the memory was used for, so peak memory does not grow.

/// Allocations from this size up are mapped on their own (glibc's largest dynamic
/// threshold; fetch answers above 8 MiB are mapped by the library itself).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Free memory at the top of a heap is given back to the kernel from this size.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 64 << 20;

/// Sets the thresholds, unless the user set glibc's allocator through its
/// environment (`GLIBC_TUNABLES` or a `MALLOC_…_` variable): theirs stand. Call it
/// first in `main`, before any thread starts.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if user_set(|name| std::env::var_os(name)) {
            return;
        }
        // SAFETY: mallopt only sets two of the allocator's parameters; no other
        // thread runs yet.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    }
}

/// Whether the environment (`var` reads one variable) sets glibc's allocator.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn user_set(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    let tunables =
        var("GLIBC_TUNABLES").is_some_and(|t| t.to_string_lossy().contains("glibc.malloc."));
    tunables
        || [
            "MALLOC_MMAP_THRESHOLD_",
            "MALLOC_TRIM_THRESHOLD_",
            "MALLOC_TOP_PAD_",
            "MALLOC_MMAP_MAX_",
        ]
        .iter()
        .any(|name| var(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn the_users_own_allocator_settings_stand() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert!(!user_set(env(&[])));
        assert!(!user_set(env(&[("GLIBC_TUNABLES", "glibc.rtld.nns=2")])));
        assert!(user_set(env(&[(
            "GLIBC_TUNABLES",
            "glibc.rtld.nns=2:glibc.malloc.trim_threshold=0"
        )])));
        assert!(user_set(env(&[("MALLOC_TRIM_THRESHOLD_", "0")])));
        assert!(user_set(env(&[("MALLOC_MMAP_THRESHOLD_", "131072")])));
        assert!(!user_set(env(&[("MALLOC_ARENA_MAX", "2")])));
    }
}
