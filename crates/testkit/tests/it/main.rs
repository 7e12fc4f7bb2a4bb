//! The test kit's own tests, one module per part, linked into one binary: real
//! brokers, the mock cluster, the fault proxy, MirrorMaker 2, the secured listeners,
//! and the repository's maps.

mod mirror_maker;
mod mock_cluster;
mod proxy;
mod real_cluster;
mod repo_maps;
mod secured_cluster;
