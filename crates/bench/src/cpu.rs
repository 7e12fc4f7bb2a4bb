//! CPU time, read from the kernel: this process's, its threads' (grouped by name), and
//! other processes' (the brokers').

use mck_testkit::KafkaCluster;

/// CPU seconds used by this process so far (user + system, all threads; the brokers
/// are other processes and not counted).
pub fn process_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The process ids of `cluster`'s brokers (found by their log dir on the command
/// line).
pub fn broker_pids(cluster: &KafkaCluster) -> Vec<u32> {
    // Each broker logs under `<log dir>/node-<id>`.
    let needle = format!("-Dkafka.logs.dir={}/", cluster.log_dir().display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .any(|arg| arg.starts_with(needle.as_bytes()))
            })
        })
        .collect()
}

/// CPU seconds (user + system) used so far by these processes.
pub fn pids_cpu(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| stat_cpu(&stat).map(|(_, secs)| secs))
        .sum()
}

/// CPU seconds (user + system) used so far by the JIT compiler threads of these
/// JVMs (HotSpot's `C1 CompilerThread<n>` and `C2 CompilerThread<n>`, whose names
/// the kernel cuts to 15 bytes).
pub fn pids_compile_cpu(pids: &[u32]) -> f64 {
    let mut secs = 0.0;
    for pid in pids {
        each_thread_cpu(&format!("/proc/{pid}/task"), |name, used| {
            if name.starts_with("C1 Compiler") || name.starts_with("C2 Compiler") {
                secs += used;
            }
        });
    }
    secs
}

/// Calls `each` with the name and CPU seconds (user + system) of every live thread
/// under `tasks` (a process's `/proc/<pid>/task`).
fn each_thread_cpu(tasks: &str, mut each: impl FnMut(&str, f64)) {
    let Ok(tasks) = std::fs::read_dir(tasks) else {
        return;
    };
    for task in tasks.flatten() {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("stat"))
            && let Some((name, secs)) = stat_cpu(&stat)
        {
            each(name, secs);
        }
    }
}

/// The name and CPU seconds (user + system) of a `/proc/…/stat` line.
pub fn stat_cpu(stat: &str) -> Option<(&str, f64)> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // `pid (comm) state ...`: utime and stime are the 12th and 13th fields after the
    // name.
    let (head, rest) = stat.rsplit_once(") ")?;
    let name = head.split_once(" (").map_or("", |(_, name)| name);
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks_used = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks_used as f64 / ticks))
}

/// CPU seconds by thread group (see [`threads_cpu`]).
pub type ThreadsCpu = std::collections::BTreeMap<String, f64>;

/// CPU seconds used so far by this process's live threads, grouped by thread name
/// with the per-instance tail cut off: `mck-fetch` (the library's fetcher threads,
/// `mck-fetch-<cluster>`), `tokio-r` (the tokio runtime's workers and blocking pool),
/// `rdk:broker` (librdkafka's `rdk:broker<N>`), `rdk:main`, the main thread and so
/// on; from `/proc/self/task/*/stat`. Threads that already exited are not counted.
pub fn threads_cpu() -> ThreadsCpu {
    let mut groups = ThreadsCpu::new();
    each_thread_cpu("/proc/self/task", |name, secs| {
        *groups.entry(thread_group(name).to_string()).or_default() += secs;
    });
    groups
}

/// The group a thread name belongs to (see [`threads_cpu`]).
pub fn thread_group(name: &str) -> &str {
    for prefix in ["mck-fetch", "tokio-r"] {
        if name.starts_with(prefix) {
            return prefix;
        }
    }
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '/')
}
