//! Child JVM processes that cannot outlive the test process.
//!
//! Every child is spawned from one long-lived thread with `PR_SET_PDEATHSIG = SIGKILL`,
//! so when the test process dies (panic, Ctrl-C, kill -9) the kernel kills its JVMs.
//! (The death signal follows the *thread* that forked, which is why a dedicated
//! thread does the forking rather than whichever test thread asked.)

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::mpsc;

type Request = (Command, mpsc::Sender<std::io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: std::sync::OnceLock<Mutex<mpsc::Sender<Request>>> = std::sync::OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("mck-testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("the test kit cannot start its spawner thread");
        Mutex::new(tx)
    })
}

/// Spawns `cmd` so that it is killed when this process exits for any reason.
pub(crate) fn spawn_tied(mut cmd: Command) -> std::io::Result<Child> {
    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs in the child
    // between fork and exec.
    unsafe {
        let parent = libc::getpid();
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?
}

/// Sends SIGKILL to a child and reaps it.
pub(crate) fn kill_and_wait(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether a process `pid` exists (a test process that left files behind, say).
pub(crate) fn is_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Sends SIGTERM to a child and reaps it, killing it if it has not exited `within`.
pub(crate) fn terminate_and_wait(child: &mut Child, within: std::time::Duration) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill only sends a signal, to a child this process has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    kill_and_wait(child);
}
