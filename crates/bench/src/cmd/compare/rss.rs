//! Peak RSS of a side, read in a child process of this binary (`rss-child`).

use std::process::Command;

use mck_bench::peers::PeerCluster;

use super::super::throughput::{Api, Peer, Reading, Side, ours, plain};
use super::PARTITIONS;

/// Options of the hidden `rss-child` command: read a topic to its end with one side,
/// in a process of its own, so that the parent reads this process's peak RSS.
#[derive(clap::Args, Clone, Debug)]
pub struct RssChildArgs {
    /// `ours` or `plain`.
    #[arg(long, value_enum)]
    side: Side,
    /// The topic, on every cluster.
    #[arg(long)]
    topic: String,
    /// Partitions of the topic.
    #[arg(long)]
    partitions: i32,
    /// `id=host:port`, once per cluster.
    #[arg(long = "cluster", required = true)]
    clusters: Vec<String>,
    /// Records expected over all clusters.
    #[arg(long)]
    expected: u64,
    /// How the library's side takes records (`batch`: values as shared bytes;
    /// `in-batch`: read in place, as `mck consume` does).
    #[arg(long, value_enum, default_value_t = Api::Batch)]
    api: Api,
}

/// with `wait4`) in MiB.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
pub(super) fn peak_rss_mib(
    side: &str,
    clusters: &[PeerCluster],
    topic: &str,
    expected: u64,
) -> f64 {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["rss-child", "--side", side, "--topic", topic])
        .args(["--partitions", &PARTITIONS.to_string()])
        .args(["--expected", &expected.to_string()]);
    for c in clusters {
        cmd.arg("--cluster")
            .arg(format!("{}={}", c.id, c.bootstrap_servers));
    }
    let child = cmd.spawn().expect("the rss child starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 on the rss child");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the rss child ({side}) failed: status {status}"
    );
    usage.ru_maxrss as f64 / 1024.0
}

/// The hidden `rss-child` command.
pub fn rss_child(args: &RssChildArgs) {
    let clusters: Vec<PeerCluster> = args
        .clusters
        .iter()
        .map(|c| {
            let (id, servers) = c.split_once('=').expect("--cluster id=host:port");
            PeerCluster::new(id, servers)
        })
        .collect();
    let pass = match args.side {
        Side::Plain => plain(&clusters, &args.topic, args.partitions, Peer::Poll),
        side => {
            let rt = mck_testkit::runtime();
            let how = Reading {
                event_time: side.event_time().expect("a side of the library"),
                api: args.api,
                ..Reading::batches(1)
            };
            ours(&rt, &clusters, &args.topic, how).0
        }
    };
    assert_eq!(pass.records, args.expected, "every record read");
}
